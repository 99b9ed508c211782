// Weights held in bf16 (issue 19): `hymba quantize --weights bf16` writes
// each linear weight matrix as a BF16 tensor; a decoder on the loaded
// checkpoint multiplies those values as mapped (no float32 copy) and computes
// exactly what `--weights bf16` on the float32 checkpoint computes; float32
// work and bad files are one-line errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/float_formats.h"
#include "core/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "decode_families.h"
#include "formats/checkpoint.h"
#include "formats/held_checkpoint.h"
#include "infer/decoder.h"
#include "model/presets.h"
#include "held_test_util.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;
using infer::Decoder;
using infer::SequenceCache;
using infer::WeightFormat;

fs::path temp_dir(const std::string& name) { return test::fresh_temp_dir("hymba_bf16_", name); }
using test::decode_logits;
using test::random_model;
const auto random_ids = test::uniform_ids;

// A float model's copy, held in bf16 and saved as a checkpoint directory.
void save_bf16(const Model& m, const fs::path& dir) {
  Model q(m.config(), false);
  std::memcpy(q.params().values_block(), m.params().values_block(),
              sizeof(float) * static_cast<size_t>(m.params().total_floats()));
  EXPECT_EQ(hold_quantized(q, BlockFormat::kBF16), static_cast<int64_t>(linear_weight_offsets(q.plan()).size()));
  save_model(dir.string(), q);
}

// Overwrites 2 bytes of tensor `name`'s data at element `index` in place.
void poke_bf16(const fs::path& file, const std::string& name, int64_t index, uint16_t value) {
  uint64_t begin = 0, header = 0;
  {
    const SafetensorsFile f = SafetensorsFile::open(file.string());
    begin = f.find(name)->begin;
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(&header), 8);
  }
  std::fstream io(file, std::ios::binary | std::ios::in | std::ios::out);
  io.seekp(static_cast<std::streamoff>(8 + header + begin + 2 * static_cast<uint64_t>(index)));
  io.write(reinterpret_cast<const char*>(&value), 2);
}

TEST(HeldBf16, QuantizeStoresEachWeightRoundedToBf16) {
  const fs::path dir = temp_dir("round");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[3].over));
  auto m = random_model(c, 7);
  save_bf16(*m, dir / "bf16");
  const SafetensorsFile file = SafetensorsFile::open((dir / "bf16" / kWeightsFile).string());
  auto held = load_model((dir / "bf16").string(), false, /*keep_blocks=*/true);
  auto widened = load_model((dir / "bf16").string(), false);
  ASSERT_EQ(held->held().size(), linear_weight_offsets(held->plan()).size());
  EXPECT_EQ(held->held_format(), BlockFormat::kBF16);
  EXPECT_TRUE(widened->held().empty());
  for (const auto& [name, h] : held->held()) {
    SCOPED_TRACE(name);
    const SafetensorsEntry* e = file.find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype, "BF16");  // a plain safetensors tensor of the parameter's shape
    EXPECT_EQ(e->shape_str(), m->params().info(name).shape.str());
    const Tensor original = m->params().value(name);
    const Tensor wide = widened->params().value(name);
    for (int64_t i = 0; i < h.rows * h.cols; ++i) {
      ASSERT_EQ(h.bf16()[i], f32_to_bf16(original.data[i])) << i;
      ASSERT_EQ(wide.data[i], bf16_to_f32(f32_to_bf16(original.data[i]))) << i;
      ASSERT_EQ(held->params().value(name).data[i], 0.0f) << "the float32 row was written";
    }
  }
  // Every other tensor is the float32 original.
  for (const ParamInfo& p : m->params().rows()) {
    if (held->held().count(p.name) != 0) continue;
    EXPECT_EQ(file.find(p.name)->dtype, "F32") << p.name;
    const Tensor a = m->params().value(p.name), b = held->params().value(p.name);
    EXPECT_EQ(std::memcmp(a.data, b.data, sizeof(float) * static_cast<size_t>(p.shape.numel())), 0) << p.name;
  }
  fs::remove_all(dir);
}

TEST(HeldBf16, ACheckpointDecodesExactlyAsBf16OnTheFly) {
  const fs::path dir = temp_dir("exact");
  const int64_t n = infer::DecoderLinears::kFloatRows + 1;
  for (const test::Family& f : test::families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(test::tiny(f.over));
    auto m = random_model(c, 5);
    const std::vector<int32_t> ids = random_ids(12, c.vocab_size, 6);
    Decoder fly(*m, WeightFormat::kBF16);
    fly.set_quantized_prefill(true);
    save_bf16(*m, dir / f.name);
    auto held = load_model((dir / f.name).string(), false, /*keep_blocks=*/true);
    Decoder dec(*held);  // no --weights: the checkpoint's own format
    EXPECT_EQ(dec.weight_format(), WeightFormat::kBF16);
    EXPECT_GT(dec.quantized_bytes(), 0);
    EXPECT_EQ(decode_logits(dec, ids), decode_logits(fly, ids));

    // A long chunk runs sgemm on the bf16 values widened a tile at a time:
    // the float32 decoder of the widened checkpoint up to summation order.
    if (c.num_memory_tokens > 0) continue;  // a meta prefix shorter than kFloatRows runs the bf16 kernel
    auto widened = load_model((dir / f.name).string(), false);
    const std::vector<int32_t> prompt = random_ids(n, c.vocab_size, 22);
    Decoder long_dec(*held), scoring(*held), f32(*widened);
    scoring.set_quantized_prefill(true);
    SequenceCache a = long_dec.new_cache(n), b = scoring.new_cache(n), w = f32.new_cache(n);
    std::vector<float> la, lb, lw;
    long_dec.prefill(a, prompt, &la);
    scoring.prefill(b, prompt, &lb);
    f32.prefill(w, prompt, &lw);
    ASSERT_EQ(la.size(), lw.size());
    double scale = 1e-6, err = 0;
    for (size_t i = 0; i < la.size(); ++i) {
      scale = std::max(scale, std::fabs(double{lw[i]}));
      err = std::max(err, std::fabs(double{la[i]} - lw[i]));
    }
    EXPECT_LE(err / scale, 1e-5);
    EXPECT_NE(la, lb) << "the long chunk ran the bf16 kernel";
  }
  fs::remove_all(dir);
}

TEST(HeldBf16, FloatWorkIsRefusedByName) {
  const fs::path dir = temp_dir("refuse");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[3].over));
  auto m = random_model(c, 9);
  save_bf16(*m, dir / "bf16");
  auto held = load_model((dir / "bf16").string(), false, true);
  const std::vector<int32_t> ids = random_ids(6, c.vocab_size, 2);
  test::expect_error([&] { held->forward(ids.data(), nullptr, 1, 6); }, {"full-graph forward", "in bf16", "float32"});
  test::expect_error([&] { held->init(1); }, {"initialising", "bf16"});
  test::expect_error([&] { Decoder d(*held, WeightFormat::kQ8); }, {"--weights q8", "bf16"});
  Decoder same(*held, WeightFormat::kBF16);  // asking for its own format is fine
  EXPECT_EQ(same.weight_format(), WeightFormat::kBF16);
  // Training widens; a held model saves as BF16 again, byte for byte.
  auto trainable = load_model((dir / "bf16").string(), true, true);
  EXPECT_TRUE(trainable->held().empty());
  save_model((dir / "again").string(), *held);
  const SafetensorsFile a = SafetensorsFile::open((dir / "bf16" / kWeightsFile).string());
  const SafetensorsFile b = SafetensorsFile::open((dir / "again" / kWeightsFile).string());
  for (const auto& [name, h] : held->held()) {
    EXPECT_EQ(b.find(name)->dtype, "BF16");
    EXPECT_EQ(std::memcmp(a.map_bytes(name).get(), b.map_bytes(name).get(), static_cast<size_t>(h.bytes())), 0);
  }
  fs::remove_all(dir);
}

TEST(HeldBf16, BadFilesAreOneLineErrorsNamingTheTensor) {
  const fs::path dir = temp_dir("bad");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[0].over));
  auto m = random_model(c, 4);
  const std::string first = param_name_at(*m, linear_weight_offsets(m->plan()).front());
  // A NaN weight.
  save_bf16(*m, dir / "nan");
  poke_bf16(dir / "nan" / kWeightsFile, first, 3, 0x7FC0);
  test::expect_error([&] { (void)load_model((dir / "nan").string(), false, true); },
                     {"model.safetensors", first, "value 3", "NaN or infinite"});
  // An infinite one.
  save_bf16(*m, dir / "inf");
  poke_bf16(dir / "inf" / kWeightsFile, first, 0, 0x7F80);
  test::expect_error([&] { (void)load_model((dir / "inf").string(), false, true); }, {first, "value 0"});
  // The metadata says bf16, the tensor is q8 blocks.
  {
    Model q(m->config(), false);
    std::memcpy(q.params().values_block(), m->params().values_block(),
                sizeof(float) * static_cast<size_t>(m->params().total_floats()));
    hold_quantized(q, BlockFormat::kQ8);
    save_model((dir / "mislabelled").string(), q);
    const std::string path = (dir / "mislabelled" / kWeightsFile).string();
    std::vector<NamedTensor> tensors;
    std::vector<std::vector<uint8_t>> bytes;
    std::map<std::string, std::string> meta;
    {
      const SafetensorsFile f = SafetensorsFile::open(path);
      meta = f.metadata();
      for (const SafetensorsEntry& e : f.entries()) {
        const auto mapped = f.map_bytes(e.name);
        bytes.emplace_back(mapped.get(), mapped.get() + (e.end - e.begin));
      }
      for (size_t i = 0; i < f.entries().size(); ++i) {
        const SafetensorsEntry& e = f.entries()[i];
        NamedTensor t{e.name, Shape(), nullptr, nullptr};
        t.shape.rank = static_cast<int>(e.shape.size());
        for (size_t d = 0; d < e.shape.size(); ++d) t.shape.dims[d] = e.shape[d];
        if (e.dtype == "U8")
          t.bytes = bytes[i].data();
        else
          t.data = reinterpret_cast<const float*>(bytes[i].data());
        tensors.push_back(t);
      }
    }
    meta[kBlocksMetadataKey] = "{\"" + first + "\": \"bf16\"}";
    meta.erase("format");
    save_safetensors(path, tensors, meta);
    test::expect_error([&] { (void)load_model((dir / "mislabelled").string(), false, true); },
                       {first, "dtype U8", "expected BF16"});
  }
  // Truncated: the header promises bytes the file lacks.
  save_bf16(*m, dir / "truncated");
  const fs::path weights = dir / "truncated" / kWeightsFile;
  fs::resize_file(weights, fs::file_size(weights) - 100);
  test::expect_error([&] { (void)load_model((dir / "truncated").string(), false, true); }, {"model.safetensors"});
  fs::remove_all(dir);
}

TEST(HeldBf16, QuantizeCommandWritesACheckpointThatGeneratesAsWeightsBf16) {
  const fs::path dir = temp_dir("cli");
  test::save_tiny_byte_checkpoint(dir, 13);
  const std::string f32 = (dir / "f32").string(), bf16 = (dir / "bf16").string();
  const test::CliResult q = test::run_cli("quantize --ckpt " + f32 + " --weights bf16 --out " + bf16);
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("to bf16 ("), std::string::npos) << q.output;
  // A prompt under 16 tokens: both prefills multiply by bf16 values.
  const std::string gen = " --prompt 'To be' --max-new-tokens 12 --temperature 0";
  const test::CliResult a = test::run_cli("generate --ckpt " + f32 + " --weights bf16" + gen);
  const test::CliResult b = test::run_cli("generate --ckpt " + bf16 + gen);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto text = [](const std::string& out) { return out.substr(0, out.find(" new tokens in ")); };
  EXPECT_EQ(text(a.output), text(b.output));
  EXPECT_NE(text(a.output).find("To be"), std::string::npos) << a.output;
  const test::CliResult bad = test::run_cli("generate --ckpt " + bf16 + " --weights q4" + gen);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(test::count_lines(bad.output), 1) << bad.output;
  EXPECT_NE(bad.output.find("bf16"), std::string::npos) << bad.output;
  const test::CliResult bench = test::run_cli("bench infer --ckpt " + bf16 +
                                              " --prompt-len 4 --new-tokens 2 --batch 2 --contexts 8 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find("\"weights\": \"bf16\""), std::string::npos) << bench.output;
  // GGUF export widens the bf16 values to the dtype asked for.
  const test::CliResult gguf = test::run_cli("export --ckpt " + bf16 + " --format gguf --dtype f16 --out " +
                                             (dir / "m.gguf").string());
  EXPECT_EQ(gguf.exit_code, 0) << gguf.output;
  EXPECT_TRUE(fs::exists(dir / "m.gguf"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hymba
