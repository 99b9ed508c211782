// Qwen2-style models (a llama layer with q/k/v biases): a Hugging Face
// Qwen2ForCausalLM directory (tests/fixtures/import/hf_qwen2, written by
// tools/make_import_fixtures.py with an independent float64 reference), the
// same weights as llama.cpp's converter writes them in GGUF (arch qwen2,
// tests/fixtures/gguf/gguf_py_qwen2.gguf by gguf-py, with llama.cpp's logits:
// tools/gguf_fixtures/make_qwen2_fixture.py), the engine's export as qwen2,
// the commands on both (generate, eval, classify train, import, export), and
// refusals naming the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_io.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/hf_import.h"
#include "cli_util.h"
#include "import_reference.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expected;
using test::Logits;
using test::rel_err;
using test::run;

const std::string kHf = std::string(HYMBA_FIXTURES_DIR) + "/import/hf_qwen2";
const std::string kGguf = std::string(HYMBA_FIXTURES_DIR) + "/gguf/gguf_py_qwen2.gguf";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_test_qwen2_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Qwen2, PublishedConfigMapsToALlamaLayerWithQkvBiases) {
  const std::string path = kHf + "/config.json";
  const json j = read_json_file(path);
  ASSERT_EQ(detect_layout(j, path), CheckpointLayout::kHfQwen2);
  const ModelConfig c = config_from_published(j, CheckpointLayout::kHfQwen2, path);
  EXPECT_TRUE(c.attention_qkv_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(gguf::architecture_for(c), "qwen2");
  EXPECT_EQ(detect_layout(json{{"model_type", "qwen2"}}, "x"), CheckpointLayout::kHfQwen2);
}

TEST(Qwen2, HfDirectoryGivesTheFloat64ReferencesLogits) {
  const Logits l = expected(kHf);
  auto model = load_model(kHf, false);
  EXPECT_LT(rel_err(run(*model, l), l.want), 1e-5) << "BF16 weights, float32 arithmetic";
}

TEST(Qwen2, GgufFileGivesLlamaCppsLogitsAndTheReferences) {
  const json e = json::parse(read_file(std::string(HYMBA_FIXTURES_DIR) + "/gguf/expected_qwen2.json"));
  auto model = load_model(kGguf, false);
  EXPECT_TRUE(model->config().attention_qkv_bias);
  const std::vector<int32_t> ids = e["ids"].get<std::vector<int32_t>>();
  model->forward(ids.data(), nullptr, 1, static_cast<int64_t>(ids.size()));
  const int64_t n = static_cast<int64_t>(ids.size()) * model->config().vocab_size;
  const std::vector<float> got(model->logits(), model->logits() + n);
  std::vector<float> llama_cpp;
  for (const auto& row : e["logits"])
    for (const auto& v : row) llama_cpp.push_back(v.get<float>());
  EXPECT_LT(rel_err(got, llama_cpp), 1e-5) << "F32 weights, llama.cpp with an F32 KV cache";
  // The same ids are the reference's first row.
  const Logits l = expected(kHf);
  ASSERT_EQ(std::vector<int32_t>(l.ids.begin(), l.ids.begin() + l.T), ids);
  EXPECT_LT(rel_err(got, std::vector<float>(l.want.begin(), l.want.begin() + n)), 1e-5);
}

// The engine's export of the HF directory is the converter's file: the same
// tensors (names, shapes, values) and qwen2.* keys.
TEST(Qwen2, ExportWritesWhatLlamaCppsConverterWrites) {
  const fs::path dir = temp_dir("export");
  auto model = load_model(kHf, false);
  const std::string out = (dir / "q.gguf").string();
  const gguf::ExportSummary s = gguf::export_gguf(*model, kHf, out, gguf::ExportDtype::kF32);
  EXPECT_EQ(s.architecture, "qwen2");
  const gguf::File a = gguf::File::open(kGguf), b = gguf::File::open(out);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const gguf::TensorInfo& t : a.tensors()) {
    const gguf::TensorInfo* u = b.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->dims, t.dims) << t.name;
    EXPECT_EQ(gguf::read_tensor_f32(b, *u), gguf::read_tensor_f32(a, t)) << t.name;
  }
  for (const char* k : {"qwen2.block_count", "qwen2.embedding_length", "qwen2.feed_forward_length",
                        "qwen2.attention.head_count", "qwen2.attention.head_count_kv"})
    EXPECT_EQ(b.get_uint(k), a.get_uint(k)) << k;
  for (const char* k : {"qwen2.rope.freq_base", "qwen2.attention.layer_norm_rms_epsilon"})
    EXPECT_EQ(b.get(k).f, a.get(k).f) << k;
  // And it reads back with the same logits.
  const Logits l = expected(kHf);
  auto back = load_model(out, false);
  EXPECT_EQ(run(*back, l), run(*model, l));
  fs::remove_all(dir);
}

TEST(Qwen2, CommandsRunBothForms) {
  using test::run_cli;
  const fs::path dir = temp_dir("cli");
  const std::string data = (dir / "text.txt").string();
  write_text_atomic(data, std::string(400, 'a') + " the theory of the world\n");
  for (const std::string& ckpt : {kHf, kGguf}) {
    SCOPED_TRACE(ckpt);
    test::CliResult r = run_cli("generate --ckpt " + ckpt + " --prompt \"the world\" --temperature 0 --max-new-tokens 4");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = run_cli("eval --ckpt " + ckpt + " --data " + data + " --split all --seq-len 16 --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  std::string tsv;
  for (int i = 0; i < 8; ++i) tsv += std::string(i % 2 ? "pos\tthe world is good " : "neg\tthe theory is bad ") + std::to_string(i) + "\n";
  write_text_atomic((dir / "train.tsv").string(), tsv);
  test::CliResult r = run_cli("classify train --backbone " + kGguf + " --data " + (dir / "train.tsv").string() +
                              " --val " + (dir / "train.tsv").string() + " --epochs 1 --out " + (dir / "clf").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("import --in " + kHf + " --out " + (dir / "ckpt").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("export --format gguf --dtype q8_0 --ckpt " + (dir / "ckpt").string() + " --out " + (dir / "q8.gguf").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("as GGUF arch qwen2"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(Qwen2, RefusalsNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{{"hidden_act", "gelu", "hidden_act"},
                                         {"use_sliding_window", true, "use_sliding_window"},
                                         {"rope_scaling", json{{"type", "yarn"}}, "rope_scaling"},
                                         {"num_attention_heads", 3, "num_attention_heads"},
                                         {"model_type", "llama", "model_type"},
                                         {"some_new_key", 1, "some_new_key"}}) {
    SCOPED_TRACE(c.field);
    const fs::path d = temp_dir("bad");
    for (const auto& f : fs::directory_iterator(kHf)) fs::copy(f.path(), d / f.path().filename());
    json j = read_json_file((d / "config.json").string());
    j[c.field] = c.value;
    write_text_atomic((d / "config.json").string(), j.dump(2));
    std::string msg = "(loaded)";
    try {
      load_model(d.string(), false);
    } catch (const Error& err) {
      msg = err.what();
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
    fs::remove_all(d);
  }
}

}  // namespace
}  // namespace hymba
