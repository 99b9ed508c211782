// JSON mode: the prefix recognizer agrees with a strict JSON parser
// (nlohmann::json) on every prefix and on mutated documents; a walk that
// samples only what the constraint allows ends in a text that parses as an
// object, for every tokenizer family the engine reads (byte, sentencepiece
// BPE and unigram, byte-level BPE, Metaspace, WordPiece).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "infer/json_constraint.h"
#include "infer/json_prefix.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using infer::JsonConstraint;
using infer::JsonPrefix;
using nlohmann::json;

// What JSON mode must accept as a whole: one object, nothing before but
// whitespace, nothing after.
bool strict_object(const std::string& text) {
  if (!json::accept(text)) return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{' && text.back() == '}';
}

bool prefix_accepts(const std::string& text, bool& complete) {
  JsonPrefix p;
  const bool ok = p.feed(text);
  complete = ok && p.complete();
  return ok;
}

json random_value(Rng& rng, int depth) {
  const int kind = static_cast<int>(rng.uniform() * (depth > 3 ? 5 : 7));
  static const std::vector<std::string> kStrings = {"", "a", "é", "x\"y", "tab\there", "\\", "日本", "😀", "\n"};
  switch (kind) {
    case 0:
      return rng.uniform() < 0.5;
    case 1:
      return nullptr;
    case 2:
      return static_cast<int64_t>(rng.uniform() * 2000) - 1000;
    case 3:
      return (rng.uniform() - 0.5) * 1e6;
    case 4:
      return kStrings[static_cast<size_t>(rng.uniform() * kStrings.size())];
    case 5: {
      json a = json::array();
      for (int i = 0, n = static_cast<int>(rng.uniform() * 4); i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = 0, n = static_cast<int>(rng.uniform() * 4); i < n; ++i)
        o[kStrings[static_cast<size_t>(rng.uniform() * kStrings.size())] + std::to_string(i)] =
            random_value(rng, depth + 1);
      return o;
    }
  }
}

std::vector<std::string> random_documents(int count) {
  Rng rng(7);
  std::vector<std::string> docs;
  for (int i = 0; i < count; ++i) {
    json o = json::object();
    for (int k = 0, n = 1 + static_cast<int>(rng.uniform() * 4); k < n; ++k)
      o["k" + std::to_string(k)] = random_value(rng, 1);
    docs.push_back(i % 2 == 0 ? o.dump() : o.dump(2));
  }
  docs.push_back(R"({"u": "\u00e9\ud83d\ude00", "n": -0.5e+10, "z": 0, "e": 1E3, "s": "\/\b\f\n\r\t"})");
  return docs;
}

TEST(JsonPrefix, EveryPrefixOfAnObjectIsAcceptedAndOnlyTheWholeIsComplete) {
  for (const std::string& doc : random_documents(200)) {
    JsonPrefix p;
    for (size_t i = 0; i < doc.size(); ++i) {
      ASSERT_TRUE(p.feed(static_cast<uint8_t>(doc[i]))) << "byte " << i << " of " << doc;
      ASSERT_EQ(p.complete(), i + 1 == doc.size()) << doc.substr(0, i + 1);
    }
    EXPECT_FALSE(p.feed(' ')) << "nothing may follow the object";
  }
}

// Each document with one byte changed, dropped or doubled: the recognizer
// takes it whole exactly when the parser does (as one object).
TEST(JsonPrefix, AgreesWithAStrictParserOnMutatedDocuments) {
  const std::string alphabet =
      std::string("{}[]\":,. -+0123456789trufalsn\\/bu\t\nxA") + "\xC3\xA9\xED\xA0\xE0\x80\xF4\x90\x01";
  Rng rng(11);
  int agreed_valid = 0;
  for (const std::string& doc : random_documents(150)) {
    for (int m = 0; m < 20; ++m) {
      std::string t = doc;
      const auto at = static_cast<size_t>(rng.uniform() * t.size());
      const char c = alphabet[static_cast<size_t>(rng.uniform() * alphabet.size())];
      const int how = static_cast<int>(rng.uniform() * 3);
      if (how == 0) t[at] = c;
      if (how == 1) t.erase(at, 1);
      if (how == 2) t.insert(at, 1, c);
      bool complete = false;
      prefix_accepts(t, complete);
      ASSERT_EQ(complete, strict_object(t)) << t;
      agreed_valid += complete ? 1 : 0;
    }
  }
  EXPECT_GT(agreed_valid, 100) << "the mutations should leave some documents valid";
}

TEST(JsonPrefix, RefusesWhatStrictParsersRefuse) {
  for (const char* bad :
       {"[1]", "{\"a\":01}", "{\"a\":1,}", "{,}", "{\"a\" 1}", "{'a':1}", "{\"a\":tru}", "{\"a\":\"\x01\"}",
        "{\"a\":\"\xC0\xAF\"}", "{\"a\":\"\xED\xA0\x80\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}",
        "{\"a\":\"\\x\"}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":1e}", "{} ", "{1:2}", "{\"a\":[1,]}"}) {
    bool complete = false;
    prefix_accepts(bad, complete);
    EXPECT_FALSE(complete) << bad;
    EXPECT_FALSE(strict_object(bad)) << bad;
  }
  JsonPrefix deep;
  EXPECT_TRUE(deep.feed("{\"a\":"));
  for (int i = 1; i < JsonPrefix::kMaxDepth; ++i) ASSERT_TRUE(deep.feed('[')) << i;
  EXPECT_FALSE(deep.feed('[')) << "nesting stops at kMaxDepth";
  JsonPrefix spaces;
  EXPECT_TRUE(spaces.feed(std::string(JsonPrefix::kMaxWhitespaceRun, ' ')));
  EXPECT_FALSE(spaces.feed(' ')) << "whitespace runs are bounded";
}

// Samples only allowed tokens: mostly at random, sometimes the one that
// brings the object nearest to closed; returns the ids.
std::vector<int32_t> constrained_walk(const Tokenizer& tok, uint64_t seed, int max_steps) {
  const std::shared_ptr<const infer::TokenPieces> pieces = infer::token_pieces(tok);
  JsonConstraint c(pieces, tok.eos_id());
  Rng rng(seed);
  std::vector<int32_t> ids;
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
  for (int step = 0; step < max_steps && !c.complete(); ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.mask(logits.data(), tok.vocab_size());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < tok.vocab_size(); ++id)
      if (logits[static_cast<size_t>(id)] == 0.0f) allowed.push_back(id);
    int32_t pick = allowed[static_cast<size_t>(rng.uniform() * allowed.size())];
    if (rng.uniform() < 0.5) {
      int best = 1 << 30;
      for (int32_t id : allowed) {
        JsonPrefix next = c.state();
        next.feed((*pieces)[id]);
        const int open = next.complete() ? -1 : next.open();
        if (open < best || (open == best && rng.uniform() < 0.3)) best = open, pick = id;
      }
    }
    EXPECT_TRUE(c.allows(pick));
    c.accept(pick);
    ids.push_back(pick);
  }
  EXPECT_TRUE(c.complete()) << "the walk did not close the object in " << max_steps << " tokens";
  return ids;
}

std::vector<fs::path> tokenizer_fixtures() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(HYMBA_FIXTURES_DIR) / "tokenizers"))
    if (e.is_directory() && !e.path().filename().string().ends_with("_train")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(JsonMode, ConstrainedWalksParseAsObjectsOnEveryTokenizerFamily) {
  std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> tokenizers;
  tokenizers.emplace_back("byte", make_byte_tokenizer());
  for (const fs::path& dir : tokenizer_fixtures())
    tokenizers.emplace_back(dir.filename().string(), load_tokenizer_or_directory(dir.string()));
  ASSERT_GE(tokenizers.size(), 8u);
  for (const auto& [name, tok] : tokenizers) {
    SCOPED_TRACE(name);
    for (uint64_t seed : {1, 2, 3}) {
      const std::vector<int32_t> ids = constrained_walk(*tok, seed, 400);
      const std::string text = tok->decode(ids);
      ASSERT_TRUE(json::accept(text)) << text;
      EXPECT_TRUE(json::parse(text).is_object()) << text;
    }
  }
}

TEST(JsonMode, EosOnlyOnceTheObjectIsClosed) {
  const auto tok = make_byte_tokenizer();
  JsonConstraint c(infer::token_pieces(*tok), tok->eos_id());
  EXPECT_FALSE(c.allows(tok->eos_id()));
  EXPECT_FALSE(c.allows('a'));
  EXPECT_TRUE(c.allows(' '));
  for (const char ch : std::string("{\"a\":1}")) c.accept(static_cast<uint8_t>(ch));
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.allows(tok->eos_id()));
  EXPECT_FALSE(c.allows(' '));
  EXPECT_THROW(c.accept('x'), Error);
}

}  // namespace
}  // namespace hymba
