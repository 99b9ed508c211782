// Float32 checkpoints loaded by mapping (issue 19): save_model lays
// model.safetensors out as the parameter block, page-aligned, and load_model
// maps it copy-on-write as the block instead of reading it. The values are
// the read path's bit for bit; the block is the file's pages until written;
// writes (training) never reach the file; files of other writers are read.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/system_memory.h"
#include "formats/held_checkpoint.h"
#include "infer/decoder.h"
#include "decode_families.h"
#include "formats/checkpoint.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("hymba_mapped_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::unique_ptr<Model> random_model(const ModelConfig& c, uint64_t seed, bool training = false) {
  auto m = std::make_unique<Model>(c, training);
  m->init(seed);
  return m;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What backs address p in this process, from /proc/self/maps: the mapped
// file's path, "" for anonymous memory (nullopt: no mapping found).
std::optional<std::string> backing_of(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, path);
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (a >= lo && a < hi) return path;
  }
  return std::nullopt;
}

bool same_values(const Model& a, const Model& b) {
  for (const ParamInfo& p : a.params().rows()) {
    const Tensor x = a.params().value(p.name), y = b.params().value(p.name);
    if (std::memcmp(x.data, y.data, sizeof(float) * static_cast<size_t>(p.shape.numel())) != 0) return false;
  }
  return true;
}

TEST(MappedCheckpoint, AMappedLoadIsTheReadLoadBitForBitAndTheBlockIsTheFile) {
  const fs::path dir = temp_dir("same");
  for (const test::Family& f : test::families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(test::tiny(f.over));
    auto m = random_model(c, 17);
    const fs::path ckpt = dir / f.name;
    save_model(ckpt.string(), *m);
    const fs::path weights = fs::canonical(ckpt / kWeightsFile);
    auto mapped = load_model(ckpt.string(), false);
    Model read(c, false);
    load_params(SafetensorsFile::open(weights.string()), read.params(), {});
    EXPECT_TRUE(same_values(*mapped, *m));
    EXPECT_TRUE(same_values(read, *m));
    // Not copied: the block is the file's mapping; the read one is anonymous.
    EXPECT_EQ(backing_of(mapped->params().values_block()).value_or("?"), weights.string());
    EXPECT_NE(backing_of(read.params().values_block()).value_or("?"), weights.string());
    // The data buffer starts on a page and each row sits at its block offset.
    const SafetensorsFile file = SafetensorsFile::open(weights.string());
    for (const ParamInfo& p : m->params().rows())
      EXPECT_EQ(file.find(p.name)->begin, static_cast<uint64_t>(p.offset) * sizeof(float)) << p.name;
  }
  fs::remove_all(dir);
}

TEST(MappedCheckpoint, WritesAfterAMappedLoadNeverReachTheFile) {
  const fs::path dir = temp_dir("cow");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[3].over));
  auto m = random_model(c, 23);
  save_model((dir / "ckpt").string(), *m);
  const fs::path weights = dir / "ckpt" / kWeightsFile;
  const std::string before = file_bytes(weights);
  auto trained = load_model((dir / "ckpt").string(), /*training=*/true);
  ASSERT_EQ(backing_of(trained->params().values_block()).value_or("?"), fs::canonical(weights).string());
  // A training step's worth of writes: a forward and backward, then every weight moved.
  std::vector<int32_t> ids(8), targets(8);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 7) % static_cast<size_t>(c.vocab_size));
    targets[i] = static_cast<int32_t>((i * 5 + 1) % static_cast<size_t>(c.vocab_size));
  }
  (void)trained->forward(ids.data(), targets.data(), 1, 8);
  trained->backward();
  trained->params().for_each([](ParamSlot& s) {
    for (int64_t i = 0; i < s.numel(); ++i) s.value[i] -= 0.5f * s.grad[i] + 0.25f;
  });
  EXPECT_EQ(file_bytes(weights), before) << "a write to the mapped block reached the file";
  EXPECT_FALSE(same_values(*trained, *m));
  // Saving over the checkpoint replaces the file atomically; the mapped
  // model keeps its own values and the new file holds them.
  const Tensor probe = trained->params().value(trained->params().rows().front().name);
  const float first = probe.data[0];
  save_model((dir / "ckpt").string(), *trained);
  EXPECT_EQ(probe.data[0], first);
  auto again = load_model((dir / "ckpt").string(), false);
  EXPECT_TRUE(same_values(*again, *trained));
  EXPECT_TRUE(same_values(*load_model((dir / "ckpt").string(), true), *trained));
  fs::remove_all(dir);
}

TEST(MappedCheckpoint, FilesOfOtherWritersAreRead) {
  const fs::path dir = temp_dir("other");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[0].over));
  auto m = random_model(c, 29);
  save_model((dir / "ckpt").string(), *m);
  // The plain layout (no padding tensors, 8-byte aligned), as other tools write it.
  const fs::path weights = dir / "ckpt" / kWeightsFile;
  save_params(weights.string(), m->params(), {{"format", "pt"}});
  Model probe(c, false);
  EXPECT_FALSE(map_params(SafetensorsFile::open(weights.string()), probe.params()));
  auto loaded = load_model((dir / "ckpt").string(), false);
  EXPECT_TRUE(same_values(*loaded, *m));
  EXPECT_NE(backing_of(loaded->params().values_block()).value_or("?"), fs::canonical(weights).string());
  fs::remove_all(dir);
}

TEST(MappedCheckpoint, BadMappableFilesAreOneLineErrors) {
  const fs::path dir = temp_dir("bad");
  const ModelConfig c = ModelConfig::from_json(test::tiny(test::families()[0].over));
  auto m = random_model(c, 31);
  const ParamInfo& last = m->params().rows().back();
  // A NaN weight: named with its tensor and index, nothing mapped.
  save_model((dir / "nan").string(), *m);
  const fs::path nan_file = dir / "nan" / kWeightsFile;
  {
    // The data buffer is the file's last total_floats() floats.
    const uint64_t data_start =
        fs::file_size(nan_file) - static_cast<uint64_t>(m->params().total_floats()) * sizeof(float);
    ASSERT_EQ(data_start % 4096, 0u);
    std::fstream io(nan_file, std::ios::binary | std::ios::in | std::ios::out);
    const float nan = std::nanf("");
    io.seekp(static_cast<std::streamoff>(data_start + (static_cast<uint64_t>(last.offset) + 1) * sizeof(float)));
    io.write(reinterpret_cast<const char*>(&nan), sizeof(float));
  }
  test::expect_error([&] { (void)load_model((dir / "nan").string(), false); },
                     {"model.safetensors", last.name, "index 1"});
  // Truncated: the header promises bytes the file lacks.
  save_model((dir / "short").string(), *m);
  const fs::path short_file = dir / "short" / kWeightsFile;
  fs::resize_file(short_file, fs::file_size(short_file) - 64);
  test::expect_error([&] { (void)load_model((dir / "short").string(), false); }, {"model.safetensors"});
  fs::remove_all(dir);
}

// A checkpoint holding blocks (hymba quantize) keeps its large float32 rows
// (the embedding) in the file as in the block: they load as copy-on-write
// file pages, not resident until read, and leave the resident set again once
// the decoder has made its head copy; a written page is the process's own
// and is never dropped, and never reaches the file.
TEST(MappedCheckpoint, HeldCheckpointsMapTheirEmbeddingUntilWritten) {
  const fs::path dir = temp_dir("held");
  nlohmann::json over = test::families()[0].over;
  over["hidden_size"] = 128;
  over["vocab_size"] = 4096;  // an embedding of 2 MiB: over the size that is mapped
  const ModelConfig c = ModelConfig::from_json(test::tiny(over));
  auto m = random_model(c, 37);
  hold_quantized(*m, BlockFormat::kQ8);
  save_model((dir / "q8").string(), *m);
  const fs::path weights = fs::canonical(dir / "q8" / kWeightsFile);
  auto held = load_model((dir / "q8").string(), false, /*keep_blocks=*/true);
  const ParamInfo& embed = held->params().rows().front();
  ASSERT_EQ(embed.shape.numel(), c.vocab_size * c.hidden_size) << embed.name;
  float* values = held->params().values_block() + embed.offset;
  const auto bytes = static_cast<int64_t>(embed.shape.numel() * sizeof(float));
  EXPECT_EQ(resident_file_bytes(values, bytes), 0) << "dropped once loaded";
  EXPECT_EQ(backing_of(values + 2048).value_or("?"), weights.string());
  EXPECT_EQ(std::memcmp(values, m->params().values_block() + embed.offset, static_cast<size_t>(bytes)), 0);
  EXPECT_GT(resident_file_bytes(values, bytes), bytes / 2) << "read back from the file";
  held->params().drop_file_pages();
  EXPECT_EQ(resident_file_bytes(values, bytes), 0) << "the table knows its file rows";
  EXPECT_EQ(std::memcmp(values, m->params().values_block() + embed.offset, static_cast<size_t>(bytes)), 0);
  // A decoder step makes the q8 head copy (the head is tied) and drops the pages again.
  infer::Decoder dec(*held, infer::WeightFormat::kQ8);
  infer::SequenceCache cache = dec.new_cache(8);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const std::vector<float> logits = dec.prefill(cache, prompt);
  EXPECT_TRUE(std::isfinite(logits.front()));
  EXPECT_LT(resident_file_bytes(values, bytes), bytes / 2);
  // A written page is the process's own: never dropped, never in the file.
  const float was = values[5000];
  values[5000] = was + 1.0f;
  held->params().drop_file_pages();
  EXPECT_EQ(values[5000], was + 1.0f);
  EXPECT_EQ(std::memcmp(values, m->params().values_block() + embed.offset, 5000 * sizeof(float)), 0);
  auto again = load_model((dir / "q8").string(), false, true);
  EXPECT_EQ(again->params().values_block()[embed.offset + 5000], was);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hymba
