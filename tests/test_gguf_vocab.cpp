// llama.cpp's vocabularies in GGUF files (formats/gguf_tokenizer.h,
// formats/gguf_pre_tokenizers.h, docs/gguf.md): its tokenizer test vectors
// on reduced copies of its 15 test vocabularies (tests/fixtures/gguf/vocab/,
// tools/gguf_fixtures/make_vocab_fixtures.py), every tokenizer.ggml.pre value
// it maps, refusals, and a Mamba file written as llama.cpp's converter writes
// Mamba-130M (the GPT-NeoX vocabulary, pre "mpt") with llama.cpp's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "tokenizer/hf/regex.h"
#include "tokenizer/unicode_normalize.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"
#include "formats/gguf_pre_tokenizers.h"
#include "formats/gguf_tokenizer.h"
#include "cli_util.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using gguf::Value;
using gguf::ValueType;
using test::expect_error;

const std::string kVocab = std::string(HYMBA_FIXTURES_DIR) + "/gguf/vocab";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_test_gguf_vocab_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

nlohmann::json fixture(const std::string& name) { return nlohmann::json::parse(read_file(kVocab + "/" + name + ".json")); }

// Every text of llama.cpp's vectors, on every vocabulary: llama.cpp's ids
// (without bos/eos, special-token text as text), read from the
// tokenizer.ggml.* keys alone.
TEST(GgufVocab, LlamaCppsVectorsGiveItsIdsOnEveryVocabulary) {
  std::set<std::string> models, pres;
  int vocabularies = 0, texts = 0;
  for (const auto& entry : fs::directory_iterator(kVocab)) {
    const std::string name = entry.path().stem().string();
    if (entry.path().extension() != ".json" || name == "mamba_mpt") continue;
    SCOPED_TRACE(name);
    const nlohmann::json e = fixture(name);
    const gguf::File f = gguf::File::open(kVocab + "/" + name + ".gguf");
    models.insert(f.get_string("tokenizer.ggml.model"));
    if (f.has("tokenizer.ggml.pre")) pres.insert(f.get_string("tokenizer.ggml.pre"));
    const auto tok = gguf::tokenizer_from_gguf(f).tokenizer;
    ASSERT_EQ(e["texts"].size(), e["ids"].size());
    for (size_t i = 0; i < e["texts"].size(); ++i) {
      const std::string text = e["texts"][i].get<std::string>();
      EXPECT_EQ(tok->encode(text), e["ids"][i].get<std::vector<int32_t>>()) << "text " << i << ": " << text;
      ++texts;
    }
    ++vocabularies;
  }
  EXPECT_EQ(vocabularies, 15);
  EXPECT_EQ(texts, 694);
  EXPECT_EQ(models, (std::set<std::string>{"bert", "gemma4", "gpt2", "llama"}));
  EXPECT_EQ(pres, (std::set<std::string>{"bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "default", "falcon",
                                         "gpt-2", "llama-bpe", "mpt", "qwen2", "qwen35", "refact", "starcoder"}));
}

// A byte-level vocabulary (GPT-2's 256 byte characters, no merges) or, for
// the UTF-8 forms, the 256 <0xXX> byte tokens, under tokenizer.ggml.pre `pre`.
std::string byte_vocab_file(const fs::path& dir, const std::string& pre, bool byte_encode) {
  gguf::Writer w;
  w.set("general.architecture", Value::str("none"));
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(pre));
  std::vector<std::string> tokens;
  std::vector<double> types;
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_encode ? gguf::byte_level_char(static_cast<uint8_t>(b))
                                 : std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    types.push_back(byte_encode ? 1 : 6);
  }
  if (!byte_encode) {  // the space marker of the UTF-8 forms
    tokens.push_back("\xE2\x96\x81");
    types.push_back(1);
  }
  tokens.push_back("<|end|>");
  types.push_back(3);
  w.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::kI32, types));
  w.set("tokenizer.ggml.merges", Value::string_array({}));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(tokens.size() - 1)));
  const std::string path = (dir / (pre + ".gguf")).string();
  w.write(path);
  return path;
}

// Every value llama.cpp maps: its regexes compile (PCRE2), and a text of
// every kind of character goes through the pipeline into bytes and back.
TEST(GgufVocab, EveryPreTokenizerLlamaCppMapsRuns) {
  const std::vector<std::string> names = gguf::bpe_pre_tokenizer_names();
  EXPECT_EQ(names.size(), 90u) << "every value llama.cpp v0.5.0 maps";
  for (const char* n : {"mpt", "qwen2", "qwen35", "falcon", "starcoder", "refact", "command-r", "deepseek-llm",
                        "deepseek-coder", "gpt-4o", "kimi-k2", "afmoe", "tekken", "chameleon", "gemma4", "whitespace"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(gguf::bpe_pre_tokenizer("mpt")->type, "mpt");
  EXPECT_EQ(gguf::bpe_pre_tokenizer("deepseek-r1-qwen")->type, "qwen2");
  EXPECT_EQ(gguf::bpe_pre_tokenizer("")->regexes.size(), 4u) << "llama.cpp's default: four splits";
  EXPECT_TRUE(gguf::bpe_pre_tokenizer("llama-bpe")->ignore_merges);
  EXPECT_FALSE(gguf::bpe_pre_tokenizer("gemma4")->byte_encode);
  const fs::path dir = temp_dir("pre");
  const std::string text = "Hello  World's 1234567 naïve\tcafé\n\n 日本語 中文 한국어 €100 🦙.cpp (x)  ";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto p = gguf::bpe_pre_tokenizer(name);
    ASSERT_TRUE(p.has_value());
    for (const std::string& r : p->regexes) EXPECT_NO_THROW(tok::Regex(r, name));
    const auto tok = gguf::tokenizer_from_gguf(gguf::File::open(byte_vocab_file(dir, name, p->byte_encode))).tokenizer;
    const std::vector<int32_t> ids = tok->encode(text);
    // No merges: one token per byte (a space is the U+2581 token where llama.cpp escapes spaces).
    EXPECT_EQ(ids.size(), text.size());
    EXPECT_EQ(tok->decode(ids), text);
  }
  fs::remove_all(dir);
}

std::vector<std::string> pieces(const std::string& pattern, const std::string& text) {
  std::vector<std::string> out;
  for (const tok::MatchSpan& m : tok::Regex(pattern, "test").find_all(text))
    out.push_back(text.substr(m.start, m.end - m.start));
  return out;
}

// The splits llama.cpp computes by hand rather than by a regex, as regexes.
TEST(GgufVocab, HandWrittenSplitsOfLlamaCppAreItsRegexes) {
  // afmoe and tiny_aya: digits in groups of three from the right.
  EXPECT_EQ(pieces(gguf::bpe_pre_tokenizer("afmoe")->regexes[0], "x1234567 89"),
            (std::vector<std::string>{"1", "234", "567", "89"}));
  EXPECT_EQ(gguf::bpe_pre_tokenizer("tiny_aya")->regexes[0], gguf::bpe_pre_tokenizer("afmoe")->regexes[0]);
  // kimi-k2: Han runs apart from the other letters, contractions either case.
  EXPECT_EQ(pieces(gguf::bpe_pre_tokenizer("kimi-k2")->regexes[0], "中文abc DON'T 1234"),
            (std::vector<std::string>{"中文", "abc", " DON'T", " ", "123", "4"}));
  // deepseek-llm: trailing spaces are the end of the piece, not of a line.
  EXPECT_EQ(pieces(gguf::bpe_pre_tokenizer("deepseek-llm")->regexes[3], "a  \nb  "),
            (std::vector<std::string>{"  "}));
  // llama.cpp's \p{Lu} and \p{Ll} are any letter (its text keeps one category per letter).
  EXPECT_EQ(pieces(gguf::bpe_pre_tokenizer("youtu")->regexes[1], "camelCase Écoles"),
            (std::vector<std::string>{"camelCase", " Écoles"}));
}

TEST(GgufVocab, UnknownValuesAreRefusedInOneLineNamingTheKey) {
  const fs::path dir = temp_dir("bad");
  const std::string path = byte_vocab_file(dir, "no-such-pre", true);
  expect_error([&] { (void)gguf::tokenizer_from_gguf(gguf::File::open(path)); },
               {"no-such-pre.gguf", "key 'tokenizer.ggml.pre' is \"no-such-pre\", a pre-tokenizer llama.cpp does not map"});
  gguf::Writer w;
  w.set("general.architecture", Value::str("none"));
  w.set("tokenizer.ggml.model", Value::str("rwkv"));
  w.set("tokenizer.ggml.tokens", Value::string_array({"a"}));
  const std::string rwkv = (dir / "rwkv.gguf").string();
  w.write(rwkv);
  expect_error([&] { (void)gguf::tokenizer_from_gguf(gguf::File::open(rwkv)); },
               {"rwkv.gguf", "key 'tokenizer.ggml.model' is \"rwkv\""});
  fs::remove_all(dir);
}

// The WPM form: BERT's splits, lowercase and accents stripped, longest
// pieces first, a word it cannot cover is [UNK].
TEST(GgufVocab, BertFormSplitsAndCoversWordsAsLlamaCppDoes) {
  const gguf::File f = gguf::File::open(kVocab + "/bert-bge.gguf");
  const auto tok = gguf::tokenizer_from_gguf(f).tokenizer;
  const std::vector<std::string>& tokens = f.get_strings("tokenizer.ggml.tokens");
  const auto text_of = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += tokens[static_cast<size_t>(id)] + "|";
    return s;
  };
  EXPECT_EQ(text_of(tok->encode("Hello World!")), "▁hello|▁world|▁!|");
  EXPECT_EQ(tok->encode("qqqq"), std::vector<int32_t>{static_cast<int32_t>(f.get_uint("tokenizer.ggml.unknown_token_id"))});
}

// A Mamba file as convert_hf_to_gguf.py writes Mamba-130M: arch mamba, the
// GPT-NeoX vocabulary with tokenizer.ggml.pre "mpt" padded with [PAD]
// tokens, A as -exp(A_log), conv1d squeezed, tied head.
TEST(GgufVocab, ConverterStyleMambaFileRunsWithLlamaCppsLogitsAndIds) {
  const nlohmann::json e = fixture("mamba_mpt");
  const std::string path = kVocab + "/mamba_mpt.gguf";
  auto model = load_model(path, false);
  EXPECT_TRUE(model->config().tie_word_embeddings);
  const std::vector<int32_t> ids = e["logit_ids"].get<std::vector<int32_t>>();
  model->forward(ids.data(), nullptr, 1, static_cast<int64_t>(ids.size()));
  const int64_t vocab = model->config().vocab_size;
  double err = 0, scale = 1e-12;
  int64_t i = 0;
  for (const auto& row : e["logits"]) {
    ASSERT_EQ(static_cast<int64_t>(row.size()), vocab);
    for (const auto& v : row) {
      err = std::max(err, std::fabs(double{model->logits()[i]} - v.get<double>()));
      scale = std::max(scale, std::fabs(v.get<double>()));
      ++i;
    }
  }
  EXPECT_LT(err / scale, 1e-5) << "F32 weights, llama.cpp with an F32 KV cache";
  const auto tok = load_checkpoint_tokenizer_of(path).tokenizer;
  for (size_t t = 0; t < e["texts"].size(); ++t)
    EXPECT_EQ(tok->encode(e["texts"][t].get<std::string>()), e["ids"][t].get<std::vector<int32_t>>()) << t;
}

// `hymba import` takes it, and the imported checkpoint exports the
// tokenizer.ggml.* keys it was read from.
TEST(GgufVocab, ImportedVocabularyExportsWithTheSameKeys) {
  using test::run_cli;
  const fs::path dir = temp_dir("cli");
  const std::string src = kVocab + "/mamba_mpt.gguf", ckpt = (dir / "ckpt").string(), out = (dir / "out.gguf").string();
  test::CliResult r = run_cli("import --in " + src + " --out " + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(ckpt) / gguf::kGgmlVocabFile));
  r = run_cli("generate --ckpt " + ckpt + " --prompt \"Hello  world\" --temperature 0 --max-new-tokens 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("export --format gguf --ckpt " + ckpt + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const gguf::File a = gguf::File::open(src), b = gguf::File::open(out);
  int compared = 0;
  for (const std::string& key : a.keys()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ASSERT_TRUE(b.has(key)) << key;
    const Value &va = a.get(key), &vb = b.get(key);
    EXPECT_EQ(va.type, vb.type) << key;
    EXPECT_EQ(va.element_type, vb.element_type) << key;
    EXPECT_EQ(va.u, vb.u) << key;
    EXPECT_EQ(va.s, vb.s) << key;
    EXPECT_EQ(va.strings, vb.strings) << key;
    EXPECT_EQ(va.numbers, vb.numbers) << key;
    ++compared;
  }
  EXPECT_GE(compared, 7);
  for (const std::string& key : b.keys()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    EXPECT_TRUE(a.has(key)) << key << " is new";
  }
  // A tokenizer changed after the import no longer claims those keys; the
  // tokenizer.json the import wrote still exports as the same gpt2 form.
  const std::string json_path = (fs::path(ckpt) / "tokenizer.json").string();
  write_text_atomic(json_path, read_file(json_path) + " ");
  r = run_cli("export --format gguf --ckpt " + ckpt + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const gguf::File c = gguf::File::open(out);
  EXPECT_EQ(c.get_string("tokenizer.ggml.pre"), "mpt");
  EXPECT_EQ(c.get_strings("tokenizer.ggml.tokens"), a.get_strings("tokenizer.ggml.tokens"));
  EXPECT_EQ(c.get_strings("tokenizer.ggml.merges"), a.get_strings("tokenizer.ggml.merges"));
  fs::remove_all(dir);
}

// Qwen's published tokenizer.json (NFC, then Qwen2's split regex) exports as
// llama.cpp's converter writes it: pre "qwen2", and a note that llama.cpp
// applies no NFC; read back from those keys alone it gives the file's ids on
// every parity text that NFC leaves as it is.
TEST(GgufVocab, QwenTokenizerJsonExportsAsQwen2) {
  const std::string tok_dir = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers";
  const fs::path dir = temp_dir("qwen");
  fs::copy_file(tok_dir + "/qwen3/tokenizer.json", dir / "tokenizer.json");
  gguf::Writer w;
  w.set("general.architecture", Value::str("none"));
  const std::string note = gguf::add_tokenizer_metadata(dir.string(), w);
  EXPECT_NE(note.find("llama.cpp applies no NFC normalizer"), std::string::npos) << note;
  gguf::Writer ggml_only;
  const std::string full = (dir / "full.gguf").string(), only = (dir / "ggml_only.gguf").string();
  w.write(full);
  const gguf::File f = gguf::File::open(full);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  for (const std::string& k : f.keys())
    if (k.rfind("hymba.", 0) != 0) ggml_only.set(k, f.get(k));
  ggml_only.write(only);
  const auto original = load_tokenizer((dir / "tokenizer.json").string());
  const auto rebuilt = gguf::tokenizer_from_gguf(gguf::File::open(only)).tokenizer;
  int compared = 0;
  std::istringstream lines(read_file(tok_dir + "/texts.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const nlohmann::json t = nlohmann::json::parse(line);
    const std::string text = t.is_string() ? t.get<std::string>() : t["text"].get<std::string>();
    // (Special-token text aside: this reduced vocabulary also lists <|endoftext|> as a plain token.)
    if (normalize_utf8(text, NormalForm::kNFC) != text || text.find("<|") != std::string::npos) continue;
    EXPECT_EQ(rebuilt->encode(text), original->encode(text)) << text;
    ++compared;
  }
  EXPECT_EQ(compared, 462) << "of the 528 parity texts";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hymba
