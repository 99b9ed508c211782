// The t5 (Unigram) tokenizer form of GGUF files (docs/gguf.md, "The
// tokenizer"): a sentencepiece Unigram model is exported as llama.cpp's
// "t5" (UGM) vocabulary with its normalizer's precompiled charsmap, read back
// into the same ids, and a file written by llama.cpp's gguf-py
// (tests/fixtures/gguf/gguf_py_t5.gguf, tools/gguf_fixtures/make_t5_fixture.py)
// gives llama.cpp's own ids. The charsmap is untrusted input: truncated and
// mutated ones are refused in one line naming the key, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/rng.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/gguf.h"
#include "formats/gguf_tokenizer.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_error;

const std::string kGguf = std::string(HYMBA_FIXTURES_DIR) + "/gguf";
const std::string kTok = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_test_gguf_t5_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::vector<std::string>& parity_texts() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> out;
    std::ifstream in(kTok + "/texts.jsonl");
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) out.push_back(json::parse(line).get<std::string>());
    return out;
  }();
  return t;
}

struct Exported {
  fs::path dir;
  std::string note, full, ggml_only;  // the file, and the same without hymba.* keys
};

// Exports the tokenizer of `model` (a sentencepiece .model) into a GGUF file.
Exported export_model(const std::string& model, const std::string& name) {
  Exported e;
  e.dir = temp_dir(name);
  fs::copy_file(model, e.dir / kTokenizerFile);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("none"));
  e.note = gguf::add_tokenizer_metadata(e.dir.string(), w);
  e.full = (e.dir / "full.gguf").string();
  w.write(e.full);
  const gguf::File f = gguf::File::open(e.full);
  gguf::Writer only;
  for (const std::string& k : f.keys())
    if (k.rfind("hymba.", 0) != 0) only.set(k, f.get(k));
  e.ggml_only = (e.dir / "ggml_only.gguf").string();
  only.write(e.ggml_only);
  return e;
}

std::string bytes_of(const gguf::Value& v) {
  std::string s(v.numbers.size(), '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(static_cast<uint8_t>(v.numbers[i]));
  return s;
}

TEST(GgufT5, SentencepieceUnigramIsWrittenAsLlamaCppWritesIt) {
  const Exported e = export_model(kGguf + "/t5_unigram.model", "keys");
  EXPECT_EQ(e.note, "");
  const gguf::File ours = gguf::File::open(e.full);
  const gguf::File theirs = gguf::File::open(kGguf + "/gguf_py_t5.gguf");  // convert_hf_to_gguf's T5 vocabulary
  EXPECT_EQ(ours.get_string("tokenizer.ggml.model"), "t5");
  EXPECT_EQ(ours.get_string("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(ours.get_strings("tokenizer.ggml.tokens"), theirs.get_strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(ours.get_numbers("tokenizer.ggml.scores"), theirs.get_numbers("tokenizer.ggml.scores"));
  EXPECT_EQ(ours.get_numbers("tokenizer.ggml.token_type"), theirs.get_numbers("tokenizer.ggml.token_type"));
  EXPECT_EQ(ours.get("tokenizer.ggml.scores").element_type, gguf::ValueType::kF32);
  EXPECT_EQ(ours.get("tokenizer.ggml.token_type").element_type, gguf::ValueType::kI32);
  const gguf::Value& charsmap = ours.get("tokenizer.ggml.precompiled_charsmap");
  EXPECT_EQ(charsmap.element_type, gguf::ValueType::kU8);
  EXPECT_GT(charsmap.numbers.size(), 1000u);  // nmt_nfkc's table
  EXPECT_EQ(bytes_of(charsmap), bytes_of(theirs.get("tokenizer.ggml.precompiled_charsmap")));
  // And they are the model's own normalizer bytes.
  EXPECT_EQ(bytes_of(charsmap), spm::read_model_settings(read_file(kGguf + "/t5_unigram.model")).precompiled_charsmap);
  for (const char* key : {"tokenizer.ggml.add_space_prefix", "tokenizer.ggml.remove_extra_whitespaces"})
    EXPECT_EQ(ours.get_bool(key), theirs.get_bool(key)) << key;
  EXPECT_TRUE(ours.get_bool("tokenizer.ggml.add_space_prefix"));
  for (const char* key : {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.padding_token_id", "tokenizer.ggml.bos_token_id"})
    EXPECT_EQ(ours.get_uint(key), theirs.get_uint(key)) << key;
  // Token types: pad, eos control; unk unknown; normal pieces after.
  const auto& types = ours.get_numbers("tokenizer.ggml.token_type");
  EXPECT_EQ(types[0], 3);
  EXPECT_EQ(types[2], 2);
  EXPECT_EQ(types[10], 1);
  fs::remove_all(e.dir);
}

TEST(GgufT5, GgufPyFileGivesLlamaCppsIds) {
  const json expected = json::parse(read_file(kGguf + "/expected_t5.json"));
  const CheckpointTokenizer ct = gguf::tokenizer_from_gguf(gguf::File::open(kGguf + "/gguf_py_t5.gguf"));
  ASSERT_EQ(expected["texts"].size(), expected["llama_cpp_ids"].size());
  ASSERT_GE(expected["texts"].size(), 10u);
  for (size_t i = 0; i < expected["texts"].size(); ++i) {
    const std::string text = expected["texts"][i].get<std::string>();
    EXPECT_EQ(ct.tokenizer->encode(text), expected["llama_cpp_ids"][i].get<std::vector<int32_t>>()) << text;
  }
  // llama.cpp's UGM defaults: eos added after a text, no bos.
  EXPECT_FALSE(ct.add_bos);
  EXPECT_EQ(ct.tokenizer->eos_id(), 1);
  EXPECT_EQ(ct.tokenizer->unk_id(), 2);
}

// Export -> import from llama.cpp's keys alone: the original's ids on all parity texts.
TEST(GgufT5, RoundTripFromT5KeysAloneGivesTheOriginalIds) {
  const std::string model = kGguf + "/t5_unigram.model";
  const Exported e = export_model(model, "round");
  const auto original = load_tokenizer(model);
  const auto rebuilt = gguf::tokenizer_from_gguf(gguf::File::open(e.ggml_only)).tokenizer;
  const auto exact = gguf::tokenizer_from_gguf(gguf::File::open(e.full)).tokenizer;
  EXPECT_EQ(exact->fingerprint(), original->fingerprint());
  int same = 0;
  for (const std::string& t : parity_texts()) {
    const auto ids = original->encode(t);
    EXPECT_EQ(rebuilt->encode(t), ids) << t;
    same += rebuilt->encode(t) == ids;
  }
  EXPECT_EQ(same, static_cast<int>(parity_texts().size()));
  EXPECT_GE(parity_texts().size(), 500u);
  EXPECT_EQ(rebuilt->vocab_size(), original->vocab_size());
  EXPECT_EQ(rebuilt->eos_id(), original->eos_id());
  EXPECT_EQ(rebuilt->decode(original->encode("Hello world")), "Hello world");
  fs::remove_all(e.dir);
}

// A model with byte fallback: llama.cpp's UGM has none, so the export says
// so, and the file's reading gives <unk> where sentencepiece gives bytes.
TEST(GgufT5, ByteFallbackModelIsWrittenWithANote) {
  const std::string model = kTok + "/spm_unigram/tokenizer.model";
  const Exported e = export_model(model, "bytes");
  EXPECT_NE(e.note.find("llama.cpp's t5 tokenizer differs from sentencepiece: it has no byte fallback"),
            std::string::npos) << e.note;
  EXPECT_EQ(e.note.find('\n'), std::string::npos);
  const auto original = load_tokenizer(model);
  const auto rebuilt = gguf::tokenizer_from_gguf(gguf::File::open(e.ggml_only)).tokenizer;
  const std::vector<spm::UnigramModel::Piece> pieces = spm::read_pieces(read_file(model));
  int with_bytes = 0, same_without = 0, without = 0;
  for (const std::string& t : parity_texts()) {
    const auto ids = original->encode(t);
    const bool bytes = std::any_of(ids.begin(), ids.end(),
                                   [&pieces](int32_t id) { return pieces.at(static_cast<size_t>(id)).type == spm::kByte; });
    if (bytes) {
      ++with_bytes;
      EXPECT_NE(rebuilt->encode(t), ids) << t;
    } else {
      ++without;
      same_without += rebuilt->encode(t) == ids;
    }
  }
  EXPECT_GT(with_bytes, 0);
  EXPECT_EQ(same_without, without);
  fs::remove_all(e.dir);
}

// A copy of `src`'s keys with `key` replaced (or dropped when `v` is null).
std::string with_key(const std::string& src, const std::string& key, const gguf::Value* v, const fs::path& out) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w;
  for (const std::string& k : f.keys())
    if (k != key) w.set(k, f.get(k));
  if (v) w.set(key, *v);
  w.write(out.string());
  return out.string();
}

TEST(GgufT5, BadT5MetadataIsRefusedInOneLine) {
  const fs::path dir = temp_dir("bad");
  const std::string src = kGguf + "/gguf_py_t5.gguf";
  const auto load = [](const std::string& p) { (void)gguf::tokenizer_from_gguf(gguf::File::open(p)); };
  const std::string p1 = with_key(src, "tokenizer.ggml.scores", nullptr, dir / "no_scores.gguf");
  expect_error([&] { load(p1); }, {"no_scores.gguf", "key 'tokenizer.ggml.scores' is missing"});
  const gguf::Value few = gguf::Value::array(gguf::ValueType::kF32, {0.0, -1.0});
  const std::string p2 = with_key(src, "tokenizer.ggml.scores", &few, dir / "few.gguf");
  expect_error([&] { load(p2); }, {"key 'tokenizer.ggml.scores' has 2 entries for 1000 tokens"});
  const gguf::File f = gguf::File::open(src);
  const gguf::Value& cm = f.get("tokenizer.ggml.precompiled_charsmap");
  gguf::Value cut = cm;
  cut.numbers.resize(cm.numbers.size() / 2);
  const std::string p3 = with_key(src, "tokenizer.ggml.precompiled_charsmap", &cut, dir / "cut.gguf");
  expect_error([&] { load(p3); }, {"key 'tokenizer.ggml.precompiled_charsmap'", "does not fit"});
  gguf::Value tiny = cm;
  tiny.numbers.resize(3);
  const std::string p4 = with_key(src, "tokenizer.ggml.precompiled_charsmap", &tiny, dir / "tiny.gguf");
  expect_error([&] { load(p4); }, {"key 'tokenizer.ggml.precompiled_charsmap'", "too short"});
  const gguf::Value text = gguf::Value::str("not bytes");
  const std::string p5 = with_key(src, "tokenizer.ggml.precompiled_charsmap", &text, dir / "str.gguf");
  expect_error([&] { load(p5); }, {"key 'tokenizer.ggml.precompiled_charsmap' must be an array of u8"});
  const gguf::Value unk = gguf::Value::u32(5000);
  const std::string p6 = with_key(src, "tokenizer.ggml.unknown_token_id", &unk, dir / "unk.gguf");
  expect_error([&] { load(p6); }, {"key 'tokenizer.ggml.unknown_token_id' is 5000, past the 1000 tokens"});
  std::vector<std::string> tokens = f.get_strings("tokenizer.ggml.tokens");
  tokens[20] = tokens[21];
  const gguf::Value dup = gguf::Value::string_array(tokens);
  const std::string p7 = with_key(src, "tokenizer.ggml.tokens", &dup, dir / "dup.gguf");
  expect_error([&] { load(p7); }, {"key 'tokenizer.ggml.tokens' lists", "twice (ids 20 and 21)"});
  // A huge charsmap is refused before its walk (no long stall on hostile input).
  expect_error([] { spm::check_precompiled_charsmap(std::string((size_t{16} << 20) + 8, '\0'), "big"); },
               {"big: precompiled charsmap", "larger than the 16 MiB"});
  const gguf::Value rwkv = gguf::Value::str("rwkv");
  const std::string p8 = with_key(src, "tokenizer.ggml.model", &rwkv, dir / "rwkv.gguf");
  expect_error([&] { load(p8); }, {"key 'tokenizer.ggml.model' is \"rwkv\"", "gpt2, gemma4, llama, t5 and bert"});
  fs::remove_all(dir);
}

// Seeded byte flips in the charsmap's trie and strings: each one loads and
// tokenizes, or is refused in one line naming the key; never a crash.
TEST(GgufT5, MutatedCharsmapsNeverCrash) {
  const gguf::File f = gguf::File::open(kGguf + "/gguf_py_t5.gguf");
  const std::string good = bytes_of(f.get("tokenizer.ggml.precompiled_charsmap"));
  spm::check_precompiled_charsmap(good, "good");
  Rng rng(24);
  int refused = 0, loaded = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng.next_u64() % 8);
    for (int k = 0; k < flips; ++k) {
      // Mostly the trie (where the walk's indices live), sometimes the header and strings.
      const size_t span = (i % 3 == 0) ? bad.size() : std::min<size_t>(bad.size(), 4 + 4 * 4096);
      bad[rng.next_u64() % span] = static_cast<char>(rng.next_u64() & 0xFF);
    }
    try {
      spm::check_precompiled_charsmap(bad, "mutated");
      ++loaded;
      spm::UnigramModel m;
      m.pieces = {{"<unk>", 0, spm::kUnknown}, {"</s>", 0, spm::kControl}, {"\xE2\x96\x81", -1, spm::kNormal},
                  {"a", -2, spm::kNormal}};
      m.unk_piece = "<unk>";
      m.eos_piece = m.bos_piece = "</s>";
      m.settings.precompiled_charsmap = bad;
      const auto tok = load_sentencepiece_tokenizer(spm::write_unigram_model(m), "mutated");
      for (const std::string& t : {std::string("Ｆｕｌｌ ﬁ café"), std::string("日本語 \t a\xC3"), parity_texts()[7]})
        (void)tok->encode(t);
    } catch (const Error& e) {
      ++refused;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("mutated"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(refused + loaded, 300);
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);  // flips in replacement strings or unused units still load
  std::printf("charsmap mutations: %d refused, %d loaded and tokenized\n", refused, loaded);
}

// A Unigram tokenizer.json: written in the t5 form only when llama.cpp's
// UGM tokenizer gives its ids; else a one-line note and no vocabulary.
std::string unigram_json(const std::string& prepend, bool seed_002_pipeline) {
  json j = json::parse(read_file(kTok + "/unigram/tokenizer.json"));
  if (!seed_002_pipeline) {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", prepend},
                          {"split", true}};
    j["model"]["byte_fallback"] = false;
  }
  return j.dump();
}

Exported export_json(const std::string& text, const std::string& name) {
  Exported e;
  e.dir = temp_dir(name);
  write_text_atomic((e.dir / "tokenizer.json").string(), text);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("none"));
  e.note = gguf::add_tokenizer_metadata(e.dir.string(), w);
  e.full = (e.dir / "full.gguf").string();
  w.write(e.full);
  const gguf::File f = gguf::File::open(e.full);
  gguf::Writer only;
  for (const std::string& k : f.keys())
    if (k.rfind("hymba.", 0) != 0) only.set(k, f.get(k));
  e.ggml_only = (e.dir / "ggml_only.gguf").string();
  only.write(e.ggml_only);
  return e;
}

TEST(GgufT5, UnigramTokenizerJsonIsWrittenOnlyWhenLlamaCppAgrees) {
  {  // No normalizer, Metaspace without a prefix: llama.cpp's UGM runs it exactly.
    const Exported e = export_json(unigram_json("never", false), "json_ok");
    EXPECT_EQ(e.note, "");
    const gguf::File f = gguf::File::open(e.ggml_only);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "t5");
    EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_space_prefix"));
    EXPECT_FALSE(f.has("tokenizer.ggml.precompiled_charsmap"));
    const auto original = load_tokenizer((e.dir / "tokenizer.json").string());
    const auto rebuilt = gguf::tokenizer_from_gguf(f).tokenizer;
    // HF matches special-token text inside a text, llama.cpp's plain
    // tokenize and sentencepiece do not; and on long runs of one repeated
    // piece, near-ties of the Viterbi sums fall differently (HF sums in
    // double, sentencepiece in float).
    int compared = 0, differ = 0;
    for (const std::string& t : parity_texts()) {
      if (t.find("<s>") != std::string::npos || t.find("</s>") != std::string::npos ||
          t.find("<unk>") != std::string::npos)
        continue;
      ++compared;
      differ += rebuilt->encode(t) != original->encode(t);
    }
    EXPECT_GE(compared, 450);
    EXPECT_LE(differ, 3);
    std::printf("t5 form of a Unigram tokenizer.json: %d of %d texts differ\n", differ, compared);
    fs::remove_all(e.dir);
  }
  {  // Metaspace prepending a space: HF keeps "  x" as two markers, llama.cpp makes three.
    const Exported e = export_json(unigram_json("always", false), "json_always");
    EXPECT_NE(e.note.find("(Metaspace prepend always) would tokenize"), std::string::npos) << e.note;
    EXPECT_NE(e.note.find("so llama.cpp gets no tokenizer.ggml.* vocabulary"), std::string::npos) << e.note;
    EXPECT_EQ(e.note.find('\n'), std::string::npos) << e.note;
    EXPECT_EQ(gguf::File::open(e.full).find("tokenizer.ggml.model"), nullptr);
    fs::remove_all(e.dir);
  }
  {  // Seed 002's NFKC + Lowercase with a whitespace split.
    const Exported e = export_json(unigram_json("always", true), "json_seed002");
    EXPECT_NE(e.note.find("has a Sequence normalizer, which llama.cpp's t5 tokenizer cannot express"),
              std::string::npos) << e.note;
    EXPECT_EQ(gguf::File::open(e.full).find("tokenizer.ggml.model"), nullptr);
    // The engine's own copy still reads back exactly.
    EXPECT_EQ(gguf::tokenizer_from_gguf(gguf::File::open(e.full)).tokenizer->encode("Hello World"),
              load_tokenizer((e.dir / "tokenizer.json").string())->encode("Hello World"));
    fs::remove_all(e.dir);
  }
}

}  // namespace
}  // namespace hymba
