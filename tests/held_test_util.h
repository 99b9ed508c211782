// What the held-weights tests share (test_held_weights.cpp for q8 / q4,
// test_held_bf16.cpp for bf16): scratch directories, random prompts, random
// models (and a saved tiny one for the commands) and every position's logits
// through prefill plus steps.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "formats/checkpoint.h"
#include "infer/decoder.h"
#include "model/model.h"
#include "model/presets.h"
#include "tokenizer/tokenizer.h"

namespace hymba::test {

// A fresh directory under the system's temp folder, unique to this process.
inline std::filesystem::path fresh_temp_dir(const std::string& prefix, const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline std::vector<int32_t> uniform_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = static_cast<int32_t>(rng.uniform() * static_cast<double>(vocab)) % static_cast<int32_t>(vocab);
  return ids;
}

// Every position's logits: a 5-token prefill, then one step per token.
inline std::vector<float> decode_logits(infer::Decoder& dec, const std::vector<int32_t>& ids) {
  const int64_t V = dec.vocab_size(), total = static_cast<int64_t>(ids.size()), prompt = 5;
  infer::SequenceCache cache = dec.new_cache(total);
  std::vector<float> out;
  dec.prefill(cache, std::vector<int32_t>(ids.begin(), ids.begin() + prompt), &out);
  out.resize(static_cast<size_t>(total * V));
  for (int64_t t = prompt; t < total; ++t) {
    infer::SequenceCache* one[] = {&cache};
    const int32_t token[] = {ids[static_cast<size_t>(t)]};
    dec.step(one, token, out.data() + t * V);
  }
  return out;
}

inline std::unique_ptr<Model> random_model(const ModelConfig& c, uint64_t seed) {
  auto m = std::make_unique<Model>(c, false);
  m->init(seed);
  return m;
}

// A random tiny hybrid-official model over bytes, saved with its byte
// tokenizer as the float32 checkpoint dir/f32: what the commands load.
inline std::unique_ptr<Model> save_tiny_byte_checkpoint(const std::filesystem::path& dir, uint64_t seed) {
  ModelConfig cfg = preset_config("hybrid-official", Scale::kTiny);
  cfg.vocab_size = 259;
  auto m = random_model(cfg, seed);
  save_model((dir / "f32").string(), *m);
  make_byte_tokenizer()->save((dir / "f32" / kTokenizerFile).string());
  return m;
}

}  // namespace hymba::test
