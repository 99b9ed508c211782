// Regression tests for the defects the sanitizers and the fuzzers found in
// the parsers of untrusted files (issue 25, docs/security.md): checked size
// arithmetic, bounded JSON and pickle nesting, allocations bounded by the
// file, bounded model dimensions checked before anything is declared, and
// one-line messages that name the file and field and quote at most ~80 bytes
// of a value. Each case has an input in fuzz/corpus/ too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/checkpoint.h"
#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/json_io.h"
#include "core/params.h"
#include "core/safetensors.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "model/config.h"
#include "formats/hf_import.h"
#include "model/layout.h"
#include "model/limits.h"
#include "model/memory_estimate.h"
#include "model/model.h"
#include "model/presets.h"
#include "formats/torch_checkpoint.h"
#include "serve/completions.h"
#include "stored_zip.h"
#include "test_util.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_error;
using namespace std::string_literals;  // "\x00"s: pickles hold NUL bytes

const std::string kImport = std::string(HYMBA_FIXTURES_DIR) + "/import";

class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hymba_sec_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(path(name), std::ios::binary | std::ios::trunc) << bytes;
    return path(name);
  }
  fs::path dir_;
};

// The message of the hymba::Error fn throws ("" and a test failure if none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a hymba::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

// A one-line message short enough to read (the rule: quote at most ~80 bytes).
void expect_short(const std::string& msg, size_t limit = 300) {
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_LE(msg.size(), limit) << msg.substr(0, 400);
}

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

// ---------------------------------------------------------------- helpers

TEST(Excerpt, CutsEscapesAndKeepsUtf8Whole) {
  EXPECT_EQ(excerpt("short"), "short");
  EXPECT_EQ(excerpt("a\nb\x01"), "a\\nb\\x01");
  EXPECT_EQ(excerpt("ck\xFF\xC3\xA9"), "ck\\xFF\xC3\xA9");  // a stray byte escaped, a character kept
  const std::string long_text(100000, 'x');
  const std::string e = excerpt(long_text);
  EXPECT_LE(e.size(), 110u);
  EXPECT_NE(e.find("(100000 bytes)"), std::string::npos) << e;
  // 79 ASCII bytes then a 2-byte character: kept whole, never cut inside.
  const std::string utf8 = std::string(79, 'a') + "\xC3\xA9" + std::string(50, 'b');
  const std::string cut = excerpt(utf8);
  EXPECT_EQ(cut.substr(0, 82), std::string(79, 'a') + "\xC3\xA9.") << cut;
}

TEST(JsonExcerpt, NeverSerialisesALargeValue) {
  json big = json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(std::string(50, 'v'));
  const std::string e = json_excerpt(big);
  EXPECT_LE(e.size(), 90u) << e;
  EXPECT_EQ(e.rfind("[\"vvv", 0), 0u) << e;
  EXPECT_EQ(json_excerpt(json(3)), "3");
  EXPECT_EQ(json_excerpt(json("\xFF")), "\"\xEF\xBF\xBD\"");  // invalid UTF-8 replaced, never a throw
}

// ------------------------------------------------------------- JSON depth

TEST_F(Security, DeeplyNestedJsonIsRefusedCleanlyInEveryReader) {
  const std::string deep = nested_arrays(100000);
  // config.json (any layout), tokenizer_config.json, train_state.json.
  const std::string cfg = write("config.json", R"({"hidden_size": )" + deep + "}");
  std::string msg = error_of([&] { load_config_file(cfg); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deeper than 128 levels"), std::string::npos) << msg;
  expect_short(msg);

  msg = error_of([&] { check_train_state("train_state.json", R"({"run": {"lr": )" + deep + "}}", TrainOptions{}); });
  EXPECT_NE(msg.find("train_state.json"), std::string::npos) << msg;
  expect_short(msg);

  write("tok/tokenizer_config.json", R"({"eos_token": )" + deep + "}");
  fs::copy_file(kImport + "/hf_mamba/tokenizer.json", path("tok/tokenizer.json"), fs::copy_options::overwrite_existing);
  msg = error_of([&] { load_checkpoint_tokenizer(path("tok")); });
  EXPECT_NE(msg.find("tokenizer_config.json"), std::string::npos) << msg;
  expect_short(msg);

  // A safetensors header nests three levels; deeper is refused while parsing.
  const std::string st = write("model.safetensors", safetensors_bytes(R"({"a": )" + nested_arrays(10000) + "}"));
  msg = error_of([&] { SafetensorsFile::open(st); });
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  expect_short(msg);

  // The server's request body.
  try {
    serve::parse_completion_request(R"({"prompt": )" + deep + "}");
    ADD_FAILURE() << "accepted";
  } catch (const serve::BadRequest& e) {
    EXPECT_EQ(e.field(), "body");
    expect_short(e.what());
  }
}

TEST(JsonDepth, ModerateNestingIsStillRead) {
  const json j = parse_json(nested_arrays(kMaxJsonDepth), "ok.json");
  EXPECT_TRUE(j.is_array());
  expect_error([] { parse_json(nested_arrays(kMaxJsonDepth + 1), "deep.json"); }, {"deep.json", "deeper than 128"});
}

// ------------------------------------------------- values quoted in errors

TEST_F(Security, ErrorsQuoteAtMostAFewDozenBytesOfAValue) {
  const std::string huge(600000, 'q');
  struct Case {
    json config;
    const char* field;
  };
  const std::vector<Case> cases = {
      {{{"hidden_size", huge}}, "hidden_size"},
      {{{"layer_types", huge}}, "layer_types"},
      {{{"fusion", huge}}, "fusion"},
      {{{huge, 1}}, "unknown field"},
      {{{"hidden_size", json::array({huge, huge, huge})}}, "hidden_size"},
      {{{"architectures", json::array({huge})}}, "architectures"},
      {{{"architectures", {"MambaForCausalLM"}}, {"hidden_act", huge}}, "hidden_act"},
  };
  for (const Case& c : cases) {
    const std::string p = write("config.json", c.config.dump());
    const std::string msg = error_of([&] { load_config_file(p); });
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg.substr(0, 300);
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg.substr(0, 300);
    expect_short(msg);
  }
  // A special token named in tokenizer_config.json that the vocabulary lacks
  // (the campaign's finding: the whole name was echoed), and BPE dropout.
  fs::create_directories(path("tok"));
  fs::copy_file(kImport + "/hf_mamba/tokenizer.json", path("tok/tokenizer.json"));
  write("tok/tokenizer_config.json", json{{"unk_token", huge}}.dump());
  std::string msg = error_of([&] { load_checkpoint_tokenizer(path("tok")); });
  EXPECT_NE(msg.find("unk_token"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg, 400);  // two long temporary paths and an 80-byte excerpt
  json tj = read_json_file(kImport + "/hf_mamba/tokenizer.json");
  tj["model"]["dropout"] = huge;
  const std::string tj_path = write("dropout/tokenizer.json", tj.dump());
  msg = error_of([&] { load_tokenizer(tj_path); });
  EXPECT_NE(msg.find("dropout"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg);
  // A merge naming a piece not in the vocabulary, and a byte tokenizer's header.
  tj = read_json_file(kImport + "/hf_mamba/tokenizer.json");
  tj["model"]["merges"][0] = huge + " b";
  const std::string merges_path = write("merges/tokenizer.json", tj.dump());
  msg = error_of([&] { load_tokenizer(merges_path); });
  EXPECT_NE(msg.find("merges"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg);
  tj = read_json_file(kImport + "/hf_mamba/tokenizer.json");
  tj["model"]["type"] = huge;
  const std::string type_path = write("type/tokenizer.json", tj.dump());
  msg = error_of([&] { load_tokenizer(type_path); });
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg, 400);  // a long temporary path, 80 bytes of the type and the supported list
  const std::string byte_path = write("byte/tokenizer.model", "hymba-byte-tokenizer " + huge + "\n");
  msg = error_of([&] { load_tokenizer(byte_path); });
  EXPECT_NE(msg.find("byte tokenizer format"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg);
}

// ------------------------------------------------------ size arithmetic

TEST_F(Security, SafetensorsElementCountMustFitEvenWhenZeroBytes) {
  // [2^31, 2^32, 2]: the element count overflows (numel() once multiplied it unchecked);
  // [2^31, 2^32, 0] holds no elements and is read as such.
  const std::string p = write(
      "a.safetensors",
      safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2147483648,4294967296,2],"data_offsets":[0,0]}})"));
  expect_error([&] { SafetensorsFile::open(p); }, {"a.safetensors", "'t'", "overflows"});
  const std::string q = write(
      "b.safetensors",
      safetensors_bytes(R"({"t":{"dtype":"U8","shape":[2147483648,4294967296,0],"data_offsets":[0,0]}})"));
  const SafetensorsFile f = SafetensorsFile::open(q);  // an empty tensor of a huge-but-representable shape
  EXPECT_EQ(f.entries().at(0).numel(), 0);
}

TEST(ConfigArithmetic, RatiosHeadsAndWidthsNeverOverflow) {
  json base = {{"vocab_size", 64}, {"hidden_size", 64}, {"num_hidden_layers", 2}, {"layer_types", "hybrid"},
               {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"proj_style", "separate"},
               {"fusion", "mean"}};
  {  // [1e308, 1e308]: an even split, computed without overflowing to infinity
    json j = base;
    j["attn_mamba_ratio"] = {1e308, 1e308};
    const ModelConfig c = ModelConfig::from_json(j, "ratio.json");
    EXPECT_EQ(c.mamba_width(), 32);
    EXPECT_EQ(c.qk_head_dim, 8);
  }
  for (const json& ratio : {json{1e308, 5e-324}, json{5e-324, 1e308}, json{1.7e308, 1.7e308}}) {
    json j = base;
    j["attn_mamba_ratio"] = ratio;
    try {  // accepted or refused by name; never undefined arithmetic (UBSan)
      ModelConfig::from_json(j, "ratio.json");
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attn_mamba_ratio"), std::string::npos) << e.what();
    }
  }
  {
    json j = base;
    j["attn_mamba_ratio"] = {1, 1};
    j["num_attention_heads"] = int64_t{1} << 62;
    expect_error([&] { ModelConfig::from_json(j, "heads.json"); }, {"heads.json", "num_attention_heads", "<="});
  }
  for (const char* field : {"hidden_size", "vocab_size", "intermediate_size", "qk_head_dim", "num_memory_tokens",
                            "sliding_window", "mamba_expand", "mamba_d_state", "mamba_d_conv", "block_layers"}) {
    for (int64_t v : {std::numeric_limits<int64_t>::max(), int64_t{1} << 62}) {
      json j = base;
      j[field] = v;
      SCOPED_TRACE(std::string(field) + " = " + std::to_string(v));
      expect_error([&] { ModelConfig::from_json(j, "big.json"); }, {"big.json", field});
    }
  }
  json j = base;
  j["hidden_size"] = std::numeric_limits<uint64_t>::max();
  expect_error([&] { ModelConfig::from_json(j, "u.json"); }, {"u.json", "'hidden_size'", "integer"});
}

TEST(ConfigArithmetic, PublishedLayoutsCheckTheirOwnArithmetic) {
  const int64_t big = int64_t{1} << 62, max = std::numeric_limits<int64_t>::max();
  // HF Mamba: expand x hidden_size for the legacy intermediate_size key.
  json m = {{"architectures", {"MambaForCausalLM"}}, {"hidden_size", big}, {"expand", 4}, {"intermediate_size", 8},
            {"num_hidden_layers", 1}, {"vocab_size", 16}};
  expect_error([&] { config_from_published(m, CheckpointLayout::kHfMamba, "m.json"); }, {"m.json", "expand"});
  // state-spaces: the vocabulary rounded up to a multiple of 8.
  json s = {{"d_model", 8}, {"n_layer", 1}, {"vocab_size", max}, {"pad_vocab_size_multiple", 8}};
  expect_error([&] { config_from_published(s, CheckpointLayout::kStateSpacesMamba, "s.json"); },
               {"s.json", "vocab_size"});
  s["vocab_size"] = 50;
  s["pad_vocab_size_multiple"] = max;
  expect_error([&] { config_from_published(s, CheckpointLayout::kStateSpacesMamba, "s.json"); },
               {"s.json", "pad_vocab_size_multiple"});
  // HF Hymba: conv_dim against mamba_expand x hidden_size.
  json h = read_json_file(kImport + "/hf_hymba/config.json");
  h["mamba_expand"] = big;
  h["conv_dim"] = {{"0", 8}};
  expect_error([&] { config_from_published(h, CheckpointLayout::kHfHymba, "h.json"); }, {"h.json"});
  h = read_json_file(kImport + "/hf_hymba/config.json");
  h["num_attention_heads"] = 0;
  expect_error([&] { config_from_published(h, CheckpointLayout::kHfHymba, "h.json"); },
               {"h.json", "num_attention_heads"});
  h["num_attention_heads"] = -1;
  h["hidden_size"] = std::numeric_limits<int64_t>::min();
  expect_error([&] { config_from_published(h, CheckpointLayout::kHfHymba, "h.json"); }, {"h.json"});
}

// ------------------------------------------------------------- pickles

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// data.pkl and one storage, zipped as torch.save writes them.
std::string torch_zip(const std::string& pickle, const std::string& storage = std::string(64, '\0')) {
  return test::stored_zip({{"archive/data.pkl", pickle}, {"archive/data/0", storage}});
}

std::string binunicode(const std::string& s) {
  std::string out = "X";
  put(out, s.size(), 4);
  return out + s;
}

// {"w": _rebuild_tensor_v2(storage "0" of float, offset 0, sizes, strides)}
std::string tensor_pickle(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  auto ints = [](const std::vector<int64_t>& v) {
    std::string t = "(";
    for (int64_t x : v) {
      t += "\x8a\x08";
      put(t, static_cast<uint64_t>(x), 8);
    }
    return t + "t";
  };
  std::string p = "\x80\x02}(" + binunicode("w");
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(" + binunicode("storage") + "ctorch\nFloatStorage\n" + binunicode("0") + binunicode("cpu") + "K\x10tQ";
  p += "K\x00"s + ints(sizes) + ints(strides) + "\x89}tR";
  return p + "u.";
}

TEST_F(Security, PickleTensorSizeAndStrideProductsAreChecked) {
  const std::string ok = write("ok/pytorch_model.bin", torch_zip(tensor_pickle({4, 4}, {4, 1})));
  EXPECT_EQ(TorchCheckpoint::open(ok).entries().at(0).numel(), 16);
  const std::string big = write("big/pytorch_model.bin",
                                torch_zip(tensor_pickle({int64_t{1} << 62, 4}, {4, 1})));
  expect_error([&] { TorchCheckpoint::open(big); }, {"pytorch_model.bin"});
  const std::string neg = write("neg/pytorch_model.bin", torch_zip(tensor_pickle({-4, 4}, {4, 1})));
  expect_error([&] { TorchCheckpoint::open(neg); }, {"pytorch_model.bin"});
  const std::string wrap = write("wrap/pytorch_model.bin",
                                 torch_zip(tensor_pickle({int64_t{1} << 32, int64_t{1} << 32, 1}, {1, 1, 1})));
  expect_error([&] { TorchCheckpoint::open(wrap); }, {"pytorch_model.bin"});
}

TEST_F(Security, DeepAndCyclicPicklesAreFreedWithoutRecursion) {
  // 1,000,000 nested 1-tuples: destroying the result recursed once per level.
  std::string deep = "\x80\x02)";
  deep += std::string(1000000, '\x85');
  deep += ".";
  const std::string p = write("deep/pytorch_model.bin", torch_zip(deep));
  expect_error([&] { TorchCheckpoint::open(p); }, {"pytorch_model.bin", "not a dict of tensors"});
  // A list appended to itself through the memo: a cycle (leaked with shared_ptr).
  const std::string cyc = write("cyc/pytorch_model.bin", torch_zip("\x80\x02]q\x00h\x00a."s));
  expect_error([&] { TorchCheckpoint::open(cyc); }, {"pytorch_model.bin"});
  // Millions of one-byte objects: bounded, not gigabytes of them.
  const std::string many = write("many/pytorch_model.bin", torch_zip("\x80\x02(" + std::string(4000000, 'N') + "t."));
  expect_error([&] { TorchCheckpoint::open(many); }, {"pytorch_model.bin", "too many"});
  // A hostile GLOBAL name is quoted, not echoed whole.
  const std::string glob = write("glob/pytorch_model.bin",
                                 torch_zip("\x80\x02" "c" + std::string(200, 'm') + "\n" + std::string(200, 'n') + "\n."));
  expect_short(error_of([&] { TorchCheckpoint::open(glob); }));
}

// ---------------------------------------------------------- tokenizers

std::string mamba_tokenizer() { return read_file(kImport + "/hf_mamba/tokenizer.json"); }

TEST_F(Security, TokenizerIdsAreBoundedByTheEntriesTheFileDefines) {
  // Ids past the pipeline's bound (2^22) are refused naming the entry; a gapped
  // vocabulary below it is legal (Hugging Face allows it) and loads at once.
  for (const char* id : {"8589934592", "1073741823"}) {
    json j = json::parse(mamba_tokenizer());
    j["model"]["vocab"]["<far>"] = json::parse(id);
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { load_hf_tokenizer_json("tok.json", j.dump()); }, {"tok.json", "'model.vocab'", "<far>"});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << id;
  }
  json j = json::parse(mamba_tokenizer());
  j["model"]["vocab"]["<gap>"] = 100000;
  // An added token's id in the file is not trusted: it takes the id Hugging Face
  // assigns, so 2^29 sizes nothing.
  j["added_tokens"].push_back({{"id", int64_t{1} << 29}, {"content", "<big>"}, {"special", true}});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(load_hf_tokenizer_json("tok.json", j.dump()));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(Security, TokenizerJsonTypeErrorsNameTheField) {
  struct Case {
    std::function<void(json&)> edit;
    const char* field;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["pre_tokenizer"]["add_prefix_space"] = 1; }, "'pre_tokenizer.add_prefix_space'"},
      {[](json& j) { j["pre_tokenizer"]["use_regex"] = "yes"; }, "'pre_tokenizer.use_regex'"},
      {[](json& j) { j["pre_tokenizer"]["type"] = 7; }, "'pre_tokenizer'"},
      {[](json& j) { j["model"]["byte_fallback"] = 1; }, "'model.byte_fallback'"},
      {[](json& j) { j["model"]["type"] = 5; }, "'model'"},
      {[](json& j) { j["added_tokens"][0]["special"] = "yes"; }, "special"},
  };
  for (const Case& c : cases) {
    json j = json::parse(mamba_tokenizer());
    c.edit(j);
    SCOPED_TRACE(c.field);
    expect_error([&] { load_hf_tokenizer_json("tok.json", j.dump()); }, {"tok.json", c.field});
  }
}

TEST_F(Security, TokenizerLargerThanTheModelIsRefusedAtLoadNamingBoth) {
  // The hf_mamba checkpoint (vocab 320) with a model of 200 rows.
  fs::copy(kImport + "/hf_mamba", path("ck"), fs::copy_options::recursive);
  json cfg = read_json_file(path("ck/config.json"));
  cfg["vocab_size"] = 200;
  write("ck/config.json", cfg.dump());
  const std::string msg = error_of([&] { load_checkpoint(path("ck"), false); });
  for (const char* part : {"tokenizer.json", "272 tokens", "200", "config.json"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
}

// ----------------------------------------------- model size before allocation

TEST(ModelBounds, ParameterEstimateEqualsTheDeclaredTable) {
  for (const Preset& p : all_presets())
    for (Scale scale : {Scale::kTiny, Scale::kSmall, Scale::kSeed}) {
      const std::string& name = p.name;
      const ModelConfig cfg = preset_config(name, scale);
      ParamTable t;
      declare_parameters(cfg, t);
      EXPECT_EQ(parameter_floats(cfg), static_cast<double>(t.num_params())) << name << " " << to_string(scale);
    }
  for (const char* dir : {"hf_hymba", "hf_mamba", "state_spaces_mamba", "hymba_1_5b_config"}) {
    const ModelConfig cfg = load_config_file(kImport + "/" + dir + "/config.json");
    ParamTable t;
    declare_parameters(cfg, t);
    EXPECT_EQ(parameter_floats(cfg), static_cast<double>(t.num_params())) << dir;
  }
}

TEST_F(Security, HugeModelsFailFastBeforeDeclaringParameters) {
  json j = {{"vocab_size", 64}, {"hidden_size", 64}, {"num_hidden_layers", 200000}, {"layer_types", "mamba"},
            {"num_attention_heads", 0}};
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { ModelConfig::from_json(j, "deep.json"); }, {"deep.json", "num_hidden_layers", "4096"});
  // The most layers allowed, each too wide for the memory: refused from the
  // config's dimensions, before a table is declared or allocated.
  j["num_hidden_layers"] = kMaxLayers;
  j["hidden_size"] = 8192;
  const ModelConfig cfg = ModelConfig::from_json(j, "wide.json");
  ::setenv("HYMBA_MAX_MEMORY", "3G", 1);
  const std::string msg = error_of([&] { Model m(cfg, false); });
  ::unsetenv("HYMBA_MAX_MEMORY");
  EXPECT_NE(msg.find("the model needs about"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3.00 GiB"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// -------------------------------------------------- paths from hostile files

TEST_F(Security, OverlongNamesInRunAndIndexFilesAreCleanErrors) {
  // A run directory whose `latest` names a checkpoint with a 10,000-byte name.
  fs::create_directories(path("run"));
  write("run/latest", std::string(10000, 'c') + "\n");
  std::string msg = error_of([&] { resolve_checkpoint(path("run")); });
  EXPECT_NE(msg.find("latest"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg, 400);
  write("run/latest", "../../etc\n");
  expect_error([&] { resolve_checkpoint(path("run")); }, {"latest", "../../etc"});

  // A shard index naming a 10,000-byte file.
  fs::copy(kImport + "/hf_mamba", path("ck"), fs::copy_options::recursive);
  json index = read_json_file(path("ck/model.safetensors.index.json"));
  index["weight_map"].begin().value() = std::string(10000, 's') + ".safetensors";
  write("ck/model.safetensors.index.json", index.dump());
  msg = error_of([&] { load_checkpoint(path("ck"), false); });
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg.substr(0, 300);
  expect_short(msg, 400);
}

TEST_F(Security, CliNeverReportsAnInternalErrorForAHostilePath) {
  const std::string long_dir = path(std::string(5000, 'd'));
  const test::CliResult r = test::run_cli("generate --ckpt " + long_dir + " --prompt hi");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hymba: error:"), std::string::npos) << r.output;
  EXPECT_LE(r.output.size(), 500u) << r.output;
}

}  // namespace
}  // namespace hymba
