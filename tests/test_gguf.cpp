// GGUF in and out (formats/gguf*.h, docs/gguf.md): the container's reader
// and writer, refusals of bad files (one line naming the key or tensor) and
// a seeded mutation loop over a real file, export -> import round trips per
// architecture and dtype, the tokenizer in both metadata forms, and files
// written by an independent writer (llama.cpp's gguf-py) with what llama.cpp
// itself computed on them (tests/fixtures/gguf/, tools/gguf_fixtures/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_tokenizer.h"
#include "kernels/cpu/quant_q4.h"
#include "model/presets.h"
#include "cli_util.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::expect_error;

const std::string kFixtures = std::string(HYMBA_FIXTURES_DIR) + "/gguf";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_test_gguf_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& ids) {
  m.forward(ids.data(), nullptr, 1, static_cast<int64_t>(ids.size()));
  return {m.logits(), m.logits() + static_cast<int64_t>(ids.size()) * m.config().vocab_size};
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return err / scale;
}

double argmax_agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  const int64_t rows = static_cast<int64_t>(a.size()) / vocab;
  int64_t same = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto ra = a.begin() + r * vocab, rb = b.begin() + r * vocab;
    same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  return static_cast<double>(same) / static_cast<double>(rows);
}

// ---- the container

TEST(Gguf, WriterAndReaderAgreeOnEveryValueKind) {
  const fs::path dir = temp_dir("container");
  gguf::Writer w;
  w.set("a.u32", gguf::Value::u32(4000000000u));
  w.set("a.i32", gguf::Value::i32(-7));
  w.set("a.u64", gguf::Value::u64(uint64_t{1} << 40));
  w.set("a.f32", gguf::Value::f32(0.1f));
  w.set("a.bool", gguf::Value::boolean(true));
  w.set("a.str", gguf::Value::str("naïve"));
  w.set("a.floats", gguf::Value::array(gguf::ValueType::kF32, {1.5, -2.25}));
  w.set("a.strings", gguf::Value::string_array({"x", "", "y z"}));
  const std::vector<float> values = {1, -2, 3.5f, 4, 5, 6};
  w.add_tensor("t.f32", {3, 2}, gguf::TensorType::kF32, [&](std::vector<uint8_t>& out) {
    out.resize(24);
    std::memcpy(out.data(), values.data(), 24);
  });
  w.add_tensor("t.f16", {3}, gguf::TensorType::kF16, [](std::vector<uint8_t>& out) { out.assign(6, 0x3C); });
  const std::string path = (dir / "c.gguf").string();
  w.write(path);
  const gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_uint("a.u32"), 4000000000u);
  EXPECT_EQ(f.get("a.i32").i, -7);
  EXPECT_EQ(f.get_uint("a.u64"), uint64_t{1} << 40);
  EXPECT_EQ(static_cast<float>(f.get_float("a.f32")), 0.1f);
  EXPECT_TRUE(f.get_bool("a.bool"));
  EXPECT_EQ(f.get_string("a.str"), "naïve");
  EXPECT_EQ(f.get_numbers("a.floats"), (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(f.get_strings("a.strings"), (std::vector<std::string>{"x", "", "y z"}));
  EXPECT_EQ(f.keys().front(), "a.u32");  // file order kept
  const gguf::TensorInfo* t = f.find_tensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(gguf::read_tensor_f32(f, *t), values);
  EXPECT_EQ(f.find_tensor("t.f16")->offset % gguf::kAlignment, 0u);
  expect_error([&] { f.get_string("a.u32"); }, {"'a.u32'", "u32", "expected a string"});
  expect_error([&] { f.get_uint("missing.key"); }, {"missing metadata key 'missing.key'"});
}

// A header written byte by byte, to break one field at a time.
struct Header {
  std::string bytes;
  template <typename T>
  Header& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Header& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes += s;
    return *this;
  }
  static Header start(uint32_t version, uint64_t tensors, uint64_t kvs) {
    Header h;
    h.bytes = "GGUF";
    h.put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
    return h;
  }
  // One tensor description: name, dims, type, offset.
  Header& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Header& pad_and_data(size_t data_bytes) {
    bytes.resize((bytes.size() + 31) / 32 * 32, '\0');
    bytes.append(data_bytes, '\x01');
    return *this;
  }
  void expect_refused(const std::vector<std::string>& parts) const {
    expect_error([&] { gguf::File::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "bad.gguf"); },
                 parts);
  }
};

TEST(Gguf, BadHeadersAreRefusedInOneLineNamingTheField) {
  Header h;
  h.bytes = "GGML";
  h.put<uint32_t>(3);
  h.expect_refused({"bad.gguf", "not a GGUF file"});
  Header::start(1, 0, 0).expect_refused({"version 1", "not supported"});
  Header::start(0x03000000, 0, 0).expect_refused({"big-endian"});
  Header::start(3, 0, uint64_t{1} << 60).expect_refused({"claims", "metadata entries"});
  Header::start(3, uint64_t{1} << 60, 0).expect_refused({"claims", "tensors"});
  // A string longer than the file, and an array count past it: refused before allocating.
  Header::start(3, 0, 1).str("k").put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 40).expect_refused(
      {"value of key 'k'", "bytes long"});
  Header::start(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 50).expect_refused(
      {"key 'k'", "array elements"});
  Header::start(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(0).expect_refused(
      {"key 'k'", "array of arrays"});
  Header::start(3, 0, 1).str("k").put<uint32_t>(13).expect_refused({"key 'k'", "unknown value type 13"});
  Header::start(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).expect_refused({"key 'k'", "bool"});
  Header::start(3, 0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(2)
      .expect_refused({"duplicate metadata key 'k'"});
  Header::start(3, 0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(24).expect_refused(
      {"'general.alignment'", "power of two"});
  Header::start(3, 0, 1).str("k").put<uint32_t>(4).put<uint16_t>(1).expect_refused({"truncated header", "key 'k'"});
}

// Tokens and merges become tokenizer.json text, which holds UTF-8 alone: a
// byte sequence that is not UTF-8 is refused in one line (the fuzzer found
// it ending the process from inside the JSON writer).
TEST(Gguf, TokensThatAreNotUtf8AreRefusedInOneLine) {
  const fs::path dir = temp_dir("not_utf8");
  const auto write = [&](const std::vector<std::string>& tokens, const std::vector<std::string>& merges) {
    gguf::Writer w;
    w.set("tokenizer.ggml.model", gguf::Value::str("gpt2"));
    w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
    w.set("tokenizer.ggml.merges", gguf::Value::string_array(merges));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(0));
    const std::string path = (dir / "t.gguf").string();
    w.write(path);
    return gguf::File::open(path);
  };
  const gguf::File good = write({"a", "b", "ab"}, {"a b"});
  EXPECT_NE(gguf::tokenizer_from_gguf(good).tokenizer, nullptr);
  const gguf::File bad_token = write({"a", "b", "a\xff"}, {"a b"});
  expect_error([&] { gguf::tokenizer_from_gguf(bad_token); }, {"t.gguf", "'tokenizer.ggml.tokens' entry 2", "UTF-8"});
  const gguf::File bad_merge = write({"a", "b", "ab"}, {"a \xc3"});
  expect_error([&] { gguf::tokenizer_from_gguf(bad_merge); }, {"t.gguf", "'tokenizer.ggml.merges'", "UTF-8"});
}

TEST(Gguf, BadTensorsAreRefusedInOneLineNamingTheTensor) {
  Header::start(3, 1, 0).tensor("w", {4, 2}, 12, 0).pad_and_data(64).expect_refused(
      {"tensor 'w'", "Q4_K", "F32, F16, BF16, Q8_0, Q4_0"});
  Header::start(3, 1, 0).tensor("w", {4, 2}, 0, 8).pad_and_data(64).expect_refused(
      {"tensor 'w'", "not a multiple of the alignment"});
  Header::start(3, 1, 0).tensor("w", {4, 2}, 0, 0).pad_and_data(31).expect_refused(
      {"tensor 'w'", "runs past the end of the file"});
  Header::start(3, 1, 0).tensor("w", {4, 2}, 0, uint64_t{1} << 62).pad_and_data(64).expect_refused(
      {"tensor 'w'", "runs past the end"});
  Header::start(3, 1, 0).tensor("w", {33, 2}, 8, 0).pad_and_data(128).expect_refused(
      {"tensor 'w'", "Q8_0", "not whole blocks of 32"});
  Header::start(3, 1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad_and_data(64).expect_refused(
      {"tensor 'w'", "5 dimensions"});
  Header::start(3, 1, 0).tensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).pad_and_data(64).expect_refused(
      {"tensor 'w'", "overflows"});
  Header::start(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_and_data(64).expect_refused(
      {"duplicate tensor 'w'"});
  Header::start(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_and_data(96).expect_refused(
      {"tensors 'a' and 'b' overlap"});
  Header::start(3, 1, 0).tensor("", {8}, 0, 0).pad_and_data(64).expect_refused({"empty name"});
}

// ---- models

struct Exported {
  fs::path dir;
  std::unique_ptr<Model> model;
};

// A tiny preset model with a tokenizer, saved as a checkpoint directory.
Exported checkpoint(const std::string& preset, const std::string& name) {
  Exported e;
  e.dir = temp_dir(name);
  ModelConfig cfg = preset_config(preset, Scale::kTiny);
  cfg.vocab_size = 259;
  e.model = std::make_unique<Model>(cfg, false);
  e.model->init(7);
  save_model((e.dir / "ckpt").string(), *e.model);
  make_byte_tokenizer()->save((e.dir / "ckpt" / kTokenizerFile).string());
  return e;
}

const std::vector<int32_t> kIds = {1, 5, 9, 200, 30, 17, 44, 99, 250, 3, 7, 8, 258, 0};

TEST(Gguf, ExportThenImportGivesTheSameLogitsPerArchitectureAndDtype) {
  struct Case {
    const char* preset;
    const char* arch;
  };
  for (const Case c : {Case{"mamba-only", "mamba"}, Case{"transformer-global", "llama"},
                       Case{"hybrid-official", "hymba"}, Case{"transformer-local", "hymba"}}) {
    SCOPED_TRACE(c.preset);
    Exported e = checkpoint(c.preset, c.preset);
    const std::vector<float> want = logits_of(*e.model, kIds);
    // Tolerances: the dtype's rounding on random tiny models (q4 is coarse).
    for (const auto& [dtype, tol] : std::vector<std::pair<gguf::ExportDtype, double>>{
             {gguf::ExportDtype::kF32, 0.0}, {gguf::ExportDtype::kF16, 2e-3},
             {gguf::ExportDtype::kQ8_0, 3e-2}, {gguf::ExportDtype::kQ4_0, 0.4}}) {
      SCOPED_TRACE(gguf::to_string(dtype));
      const std::string path = (e.dir / (std::string(gguf::to_string(dtype)) + ".gguf")).string();
      const gguf::ExportSummary s = gguf::export_gguf(*e.model, (e.dir / "ckpt").string(), path, dtype);
      EXPECT_EQ(s.architecture, c.arch);
      EXPECT_EQ(s.note.find("llama.cpp cannot run") != std::string::npos, std::string(c.arch) == "hymba") << s.note;
      EXPECT_EQ(gguf::File::open(path).get_string("general.architecture"), c.arch);
      auto back = load_model(path, false);
      EXPECT_EQ(back->config().to_json(), gguf::config_from_gguf(gguf::File::open(path)).to_json());
      const std::vector<float> got = logits_of(*back, kIds);
      if (tol == 0.0) {
        EXPECT_EQ(got, want) << "f32 must round-trip exactly";
      } else {
        EXPECT_LT(rel_err(got, want), tol);
      }
      if (dtype != gguf::ExportDtype::kF32) {
        EXPECT_GT(rel_err(got, want), 0.0) << "was the dtype applied?";
      }
      if (std::string(c.arch) == "hymba") {
        EXPECT_EQ(back->config().to_json(), e.model->config().to_json());
      }
    }
    // The dispatcher: the config and the tokenizer come from the same file.
    const std::string f32 = (e.dir / "f32.gguf").string();
    EXPECT_EQ(load_checkpoint_config(f32).vocab_size, 259);
    EXPECT_EQ(load_checkpoint_tokenizer_of(f32).tokenizer->kind(), TokenizerKind::kByte);
    fs::remove_all(e.dir);
  }
}

// Which tensors keep more precision: as llama.cpp's converter and quantizer.
TEST(Gguf, StorageTypesFollowLlamaCpp) {
  using gguf::ExportDtype;
  using gguf::TensorType;
  EXPECT_EQ(gguf::storage_type("blk.0.attn_norm.weight", 1, 64, ExportDtype::kQ4_0, false), TensorType::kF32);
  EXPECT_EQ(gguf::storage_type("blk.0.ssm_conv1d.weight", 2, 4, ExportDtype::kF16, false), TensorType::kF32);
  EXPECT_EQ(gguf::storage_type("blk.0.ssm_a", 2, 16, ExportDtype::kQ8_0, false), TensorType::kF32);
  EXPECT_EQ(gguf::storage_type("blk.0.ssm_dt.bias", 1, 192, ExportDtype::kQ8_0, false), TensorType::kF32);
  EXPECT_EQ(gguf::storage_type("blk.0.ssm_dt.weight", 2, 6, ExportDtype::kQ8_0, false), TensorType::kF16);
  EXPECT_EQ(gguf::storage_type("blk.0.ssm_in.weight", 2, 96, ExportDtype::kQ4_0, false), TensorType::kQ4_0);
  EXPECT_EQ(gguf::storage_type("output.weight", 2, 96, ExportDtype::kQ4_0, true), TensorType::kQ8_0);
  EXPECT_EQ(gguf::storage_type("blk.0.ffn_up.weight", 2, 96, ExportDtype::kF16, false), TensorType::kF16);
  EXPECT_EQ(gguf::storage_type("blk.0.ffn_up.weight", 2, 96, ExportDtype::kF32, false), TensorType::kF32);
}

TEST(Gguf, TokenizersSurviveBothMetadataForms) {
  const std::string tok_dir = std::string(HYMBA_FIXTURES_DIR) + "/tokenizers";
  const std::vector<std::string> texts = {"Hello world, the theory of everything!", "  two  spaces\tand tab\n",
                                          "naïve café 12345", "日本語のテキスト 🎉"};
  struct Case {
    std::string file, name;
  };
  for (const Case& c : {Case{tok_dir + "/gpt2/tokenizer.json", "tokenizer.json"},
                        Case{tok_dir + "/spm_bpe/tokenizer.model", kTokenizerFile}}) {
    SCOPED_TRACE(c.file);
    const fs::path dir = temp_dir("tok");
    fs::copy_file(c.file, dir / c.name);
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::str("none"));
    EXPECT_EQ(gguf::add_tokenizer_metadata(dir.string(), w), "");
    const std::string full = (dir / "full.gguf").string();
    w.write(full);
    // The same metadata without the engine's own copy: llama.cpp's form alone.
    const gguf::File f = gguf::File::open(full);
    gguf::Writer ggml_only;
    for (const std::string& k : f.keys())
      if (k.rfind("hymba.", 0) != 0) ggml_only.set(k, f.get(k));
    const std::string only = (dir / "ggml_only.gguf").string();
    ggml_only.write(only);
    const auto original = load_tokenizer((dir / c.name).string());
    const auto exact = gguf::tokenizer_from_gguf(f).tokenizer;
    EXPECT_EQ(exact->fingerprint(), original->fingerprint());
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), c.name == "tokenizer.json" ? "gpt2" : "llama");
    // Rebuilt from llama.cpp's form alone (gpt2: merges; llama: merges derived from the scores).
    const auto rebuilt = gguf::tokenizer_from_gguf(gguf::File::open(only)).tokenizer;
    for (const std::string& t : texts) EXPECT_EQ(rebuilt->encode(t), original->encode(t)) << t;
    EXPECT_EQ(rebuilt->eos_id(), original->eos_id());
    EXPECT_EQ(rebuilt->decode(original->encode(texts[0])), texts[0]);
    for (const std::string& t : texts) EXPECT_EQ(exact->encode(t), original->encode(t)) << t;
    fs::remove_all(dir);
  }
}

// The commands: export, a notice for the hymba arch, --ckpt FILE.gguf, import, refusals.
TEST(Gguf, CommandsExportImportAndReadGgufDirectly) {
  using test::run_cli;
  Exported e = checkpoint("hybrid-official", "cli");
  const std::string ckpt = (e.dir / "ckpt").string(), file = (e.dir / "h.gguf").string();
  test::CliResult r = run_cli("export --format gguf --dtype q8_0 --ckpt " + ckpt + " --out " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("as GGUF arch hymba, q8_0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hymba: note: llama.cpp cannot run this file (arch hymba): it has meta tokens"),
            std::string::npos) << r.output;
  r = run_cli("generate --ckpt " + file + " --prompt ab --temperature 0 --max-new-tokens 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Nothing is widened: the embedding and the head stay in the file's blocks as the linear layers do.
  EXPECT_EQ(r.output.find("widened to float32"), std::string::npos) << r.output;
  r = run_cli("import --in " + file + " --out " + (e.dir / "back").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("imported GGUF (hymba)"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(e.dir / "back" / kTokenizerFile));
  EXPECT_EQ(load_checkpoint_config((e.dir / "back").string()).to_json(), e.model->config().to_json());
  r = run_cli("export --format gguf --dtype q5_k --ckpt " + ckpt + " --out " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--dtype 'q5_k' is not supported with --format gguf (f32, f16, q8_0 or q4_0)"),
            std::string::npos) << r.output;
  write_text_atomic((e.dir / "bad.gguf").string(), std::string("GGUF\x03\0\0\0", 8) + std::string(8, '\xff'));
  r = run_cli("import --in " + (e.dir / "bad.gguf").string() + " --out " + (e.dir / "x").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("bad.gguf: truncated header"), std::string::npos) << r.output;
  fs::remove_all(e.dir);
}

// ---- files written by gguf-py, with what llama.cpp computed on them

nlohmann::json expected() { return nlohmann::json::parse(read_file(kFixtures + "/expected.json")); }

std::vector<float> flat(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& r : rows)
    for (const auto& v : r) out.push_back(v.get<float>());
  return out;
}

TEST(Gguf, GgufPyLlamaGivesLlamaCppsLogitsAndTokens) {
  const nlohmann::json e = expected();
  const std::string path = kFixtures + "/gguf_py_llama.gguf";
  auto model = load_model(path, false);
  EXPECT_EQ(model->config().num_key_value_heads, 2);
  EXPECT_FALSE(model->config().tie_word_embeddings);
  const std::vector<float> got = logits_of(*model, e["ids"].get<std::vector<int32_t>>());
  EXPECT_LT(rel_err(got, flat(e["logits"]["llama"])), 1e-5) << "F32 weights, llama.cpp with an F32 KV cache";
  const auto tok = load_checkpoint_tokenizer_of(path).tokenizer;
  for (size_t i = 0; i < e["texts"].size(); ++i)
    EXPECT_EQ(tok->encode(e["texts"][i].get<std::string>()), e["text_ids"][i].get<std::vector<int32_t>>())
        << e["texts"][i];
}

TEST(Gguf, GgufPyMambaWithQuantizedTensorsDecodesAsGgufPyDoes) {
  const nlohmann::json e = expected();
  const std::string path = kFixtures + "/gguf_py_mamba.gguf";
  const gguf::File f = gguf::File::open(path);
  int checked = 0;
  for (const auto& [name, values] : e["dequantized"].items()) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    const std::vector<float> got = gguf::read_tensor_f32(f, *t);
    const std::vector<float> want = values.get<std::vector<float>>();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << name << " [" << i << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 9) << "F16, BF16, Q8_0 and Q4_0 tensors";
  auto model = load_model(path, false);
  EXPECT_TRUE(model->config().tie_word_embeddings);
  const std::vector<float> got = logits_of(*model, e["ids"].get<std::vector<int32_t>>());
  const std::vector<float> want = flat(e["logits"]["mamba"]);
  // llama.cpp multiplies quantized weights by q8-quantized activations, the engine by float32 ones.
  EXPECT_LT(rel_err(got, want), 2e-2);
  EXPECT_GE(argmax_agreement(got, want, model->config().vocab_size), 0.75);
}

TEST(Gguf, Q4QuantizerWritesGgufPysBytes) {
  const gguf::File f = gguf::File::open(kFixtures + "/gguf_py_quant_probe.gguf");
  const gguf::TensorInfo& rows = *f.find_tensor("rows.f32");
  const gguf::TensorInfo& q4 = *f.find_tensor("rows.q4_0");
  const std::vector<float> x = gguf::read_tensor_f32(f, rows);
  std::vector<cpu::BlockQ4> mine(static_cast<size_t>(q4.bytes()) / sizeof(cpu::BlockQ4));
  cpu::quantize_q4(mine.data(), x.data(), rows.dims[1], rows.dims[0]);
  EXPECT_EQ(std::memcmp(mine.data(), f.tensor_data(q4), static_cast<size_t>(q4.bytes())), 0);
  // Q8_0: the same blocks. llama.cpp rounds x / d against the unrounded scale d, so its
  // values may miss by half a step plus 127 times the scale's f16 rounding (2^-11): 0.57 steps.
  const std::vector<float> q8 = gguf::read_tensor_f32(f, *f.find_tensor("rows.q8_0"));
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) EXPECT_NEAR(q8[i], x[i], 0.57 * amax / 127) << i;
  }
}

// ---- hostile input: seeded mutations of a real file never crash or hang

TEST(Gguf, SeededMutationsOfARealFileRunClean) {
  Exported e = checkpoint("mamba-only", "mutate");
  const std::string path = (e.dir / "m.gguf").string();
  gguf::export_gguf(*e.model, (e.dir / "ckpt").string(), path, gguf::ExportDtype::kQ4_0);
  const std::string original = read_file(path);
  Rng rng(2024);
  const int kRuns = 1500;
  int refused = 0, loaded = 0;
  for (int run = 0; run < kRuns; ++run) {
    std::string bytes = original;
    const int edits = 1 + static_cast<int>(rng.uniform() * 6);
    for (int k = 0; k < edits; ++k) {
      // Mostly in the header, where the counts and offsets live.
      const double where = rng.uniform() < 0.8 ? rng.uniform() * 4096 : rng.uniform() * static_cast<double>(bytes.size());
      const auto at = std::min(bytes.size() - 1, static_cast<size_t>(where));
      const double kind = rng.uniform();
      if (kind < 0.6) bytes[at] = static_cast<char>(static_cast<uint8_t>(rng.uniform() * 256));
      else if (kind < 0.8) bytes[at] = static_cast<char>(0xFF);
      else bytes.resize(at + 1);  // truncation
    }
    try {
      const gguf::File f = gguf::File::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m");
      const ModelConfig cfg = gguf::config_from_gguf(f);
      if (cfg.hidden_size * cfg.vocab_size > (int64_t{1} << 24)) throw Error("too large for the test");
      Model m(cfg, false);
      gguf::load_gguf_weights(f, m, /*keep_blocks=*/true);
      if (gguf::has_tokenizer(f)) gguf::tokenizer_from_gguf(f);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(refused + loaded, kRuns);
  EXPECT_GT(refused, kRuns / 2) << "the mutations should break most files";
  std::printf("[ gguf mutations ] %d inputs ran clean: %d refused with an error, %d still loaded\n", kRuns, refused,
              loaded);
  fs::remove_all(e.dir);
}

}  // namespace
}  // namespace hymba
