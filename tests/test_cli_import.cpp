// `hymba import`, `hymba export --format hf`, and published directories used
// directly with --ckpt / --config, run as a user would.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "core/safetensors.h"
#include "formats/checkpoint.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using test::count_lines;
using test::run_cli;
const std::string kRoot = std::string(HYMBA_FIXTURES_DIR) + "/import";

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("hymba_cli_import_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(CliImport, InfoOnThePublished15BConfig) {
  const auto r = run_cli("info --config " + kRoot + "/hymba_1_5b_config/config.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(1522797824)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("consumer of 16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("RoPE: ntk, base 74534.8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a query sees 1025 keys (q - k <= 1024)"), std::string::npos) << r.output;
}

TEST(CliImport, ImportGenerateAndExport) {
  const fs::path out = temp_dir("mamba"), hf = temp_dir("mamba_hf");
  auto r = run_cli("import --in " + kRoot + "/hf_mamba --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("HF MambaForCausalLM"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  // generate takes text on the imported directory and on the published one as is
  for (const std::string& ckpt : {out.string(), kRoot + "/hf_mamba"}) {
    r = run_cli("generate --ckpt " + ckpt + " --prompt 'hello world' --max-new-tokens 4 --temperature 0");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.rfind("hello world", 0), 0u) << r.output;
  }
  r = run_cli("export --ckpt " + out.string() + " --format hf --out " + hf.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json cfg = read_json_file((hf / "config.json").string());
  EXPECT_EQ(cfg["architectures"][0], "MambaForCausalLM");
  EXPECT_TRUE(fs::exists(hf / "model.safetensors"));
  EXPECT_TRUE(fs::exists(hf / "tokenizer.json"));
  // the exported directory loads like any checkpoint
  r = run_cli("bench infer --ckpt " + hf.string() + " --prompt-len 4 --new-tokens 2 --contexts 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  fs::remove_all(out);
  fs::remove_all(hf);
}

TEST(CliImport, ExportOfAHymbaImportNamesTheReleasedClass) {
  const fs::path out = temp_dir("hymba"), hf = temp_dir("hymba_hf");
  ASSERT_EQ(run_cli("import --in " + kRoot + "/hf_hymba --out " + out.string()).exit_code, 0);
  const auto r = run_cli("export --ckpt " + out.string() + " --out " + hf.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json cfg = read_json_file((hf / "config.json").string());
  EXPECT_EQ(cfg["architectures"][0], "HymbaForCausalLM");
  EXPECT_EQ(cfg["rope_type"], "ntk");
  EXPECT_EQ(cfg["sliding_window"], 3);
  fs::remove_all(out);
  fs::remove_all(hf);
}

// The released 1.5B model ships a sentencepiece tokenizer.model with
// add_bos_token true: generate then starts every prompt with bos.
TEST(CliImport, SentencepieceTokenizerAndAddBos) {
  const fs::path d = temp_dir("sp");
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kRoot + "/hf_hymba")) fs::copy(e.path(), d / e.path().filename());
  TokenizerTrainOptions opt;
  opt.vocab_size = 280;  // within the fixture's 320-entry vocabulary
  train_tokenizer({"hello world, hello there; the world is here"}, opt)->save((d / "tokenizer.model").string());
  auto prompt_tokens = [&](bool add_bos) {
    write_text_atomic((d / "tokenizer_config.json").string(),
                      add_bos ? R"({"add_bos_token": true})" : R"({"add_bos_token": false})");
    const auto r = run_cli("generate --ckpt " + d.string() + " --prompt 'hello world' --max-new-tokens 2 --temperature 0");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const size_t at = r.output.find("(prefill ");
    EXPECT_NE(at, std::string::npos) << r.output;
    return std::stoi(r.output.substr(at + 9));
  };
  const int plain = prompt_tokens(false);
  EXPECT_GE(plain, 1);
  EXPECT_EQ(prompt_tokens(true), plain + 1);
  fs::remove_all(d);
}

// --dtype bf16 / f16: torch_dtype follows, the weights take half the bytes,
// the export imports back; an f16 overflow and an unknown dtype are refused.
TEST(CliImport, ExportDtypes) {
  const fs::path d = temp_dir("dtype");
  const std::string ckpt = kRoot + "/state_spaces_mamba";
  std::map<std::string, uint64_t> size;
  for (const std::string dtype : {"f32", "bf16", "f16"}) {
    const fs::path hf = d / dtype;
    auto r = run_cli("export --ckpt " + ckpt + " --dtype " + dtype + " --out " + hf.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(", " + dtype + ")"), std::string::npos) << r.output;
    EXPECT_EQ(read_json_file((hf / "config.json").string())["torch_dtype"],
              dtype == "f32" ? "float32" : dtype == "bf16" ? "bfloat16" : "float16");
    const SafetensorsFile st = SafetensorsFile::open((hf / "model.safetensors").string());
    for (const SafetensorsEntry& e : st.entries()) size[dtype] += e.end - e.begin;  // the data buffer's bytes
    r = run_cli("import --in " + hf.string() + " --out " + (d / (dtype + "_back")).string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(2 * size["bf16"], size["f32"]);
  EXPECT_EQ(size["f16"], size["bf16"]);

  auto model = load_model(ckpt, false);
  model->params().for_each([](ParamSlot& slot) {
    if (slot.info.name == "backbone.norm_f.weight") slot.value[1] = 70000.0f;
  });
  save_model((d / "big").string(), *model);
  auto r = run_cli("export --ckpt " + (d / "big").string() + " --dtype f16 --out " + (d / "big_hf").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("'backbone.norm_f.weight' holds 70000 at index 1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(d / "big_hf" / "config.json"));
  EXPECT_EQ(run_cli("export --ckpt " + (d / "big").string() + " --dtype bf16 --out " + (d / "big_hf").string())
                .exit_code,
            0);

  r = run_cli("export --ckpt " + ckpt + " --dtype f64 --out " + (d / "x").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--dtype 'f64'"), std::string::npos) << r.output;
  fs::remove_all(d);
}

TEST(CliImport, BadInputIsOneLineNamingFileAndField) {
  const fs::path d = temp_dir("bad");
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kRoot + "/hf_hymba")) fs::copy(e.path(), d / e.path().filename());
  nlohmann::json j = read_json_file((d / "config.json").string());
  j["kq_norm"] = "perhead-rms";
  write_text_atomic((d / "config.json").string(), j.dump());
  auto r = run_cli("import --in " + d.string() + " --out " + (d / "out").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find((d / "config.json").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'kq_norm'"), std::string::npos) << r.output;

  r = run_cli("import --in " + d.string() + " --out " + d.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
  r = run_cli("export --ckpt " + kRoot + "/hf_hymba --format onnx --out " + (d / "x").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--format 'onnx' is not supported (hf or gguf)"), std::string::npos) << r.output;

  j["kq_norm"] = "none";
  write_text_atomic((d / "config.json").string(), j.dump());
  fs::remove(d / "model.safetensors");
  r = run_cli("forward --ckpt " + d.string() + " --ids 1,2 --out " + (d / "f.safetensors").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find(d.string() + ": no model.safetensors"), std::string::npos) << r.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace hymba
