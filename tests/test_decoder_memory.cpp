// Activation memory of the decoder (issue 19): a prefill chunk and a decode
// step keep only what crosses layers, and a long prompt is run in chunks of
// prefill_chunk() positions, so neither the layer count nor the prompt's
// length makes the peak grow.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "decode_families.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "model/model.h"

namespace hymba {
namespace {

// A prefill chunk and a decode step keep the residual stream (a linked
// block's input, a step's new key and value rows), not every layer's
// activations: their peaks do not grow with the layer count (they grew in
// proportion when each layer's were kept to the chunk's or step's end).
TEST(Decoder, PrefillAndStepMemoryDoNotGrowWithLayers) {
  const auto peaks = [](int layers) {
    const ModelConfig c = ModelConfig::from_json(test::tiny(
        {{"num_hidden_layers", layers}, {"sliding_window", 3}, {"global_attn_idx", {0}}, {"num_memory_tokens", 2}}));
    Model m(c, false);
    m.init(3);
    infer::Decoder dec(m);
    std::vector<infer::SequenceCache> caches;
    std::vector<infer::SequenceCache*> ptrs;
    for (int b = 0; b < 4; ++b) caches.push_back(dec.new_cache(49));
    std::vector<int32_t> prompt(48);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % 29);
    for (infer::SequenceCache& sc : caches) {
      (void)dec.prefill(sc, prompt);
      ptrs.push_back(&sc);
    }
    const std::vector<int32_t> tokens = {4, 5, 6, 7};
    std::vector<float> logits(static_cast<size_t>(4 * c.vocab_size));
    dec.step(ptrs, tokens, logits.data());
    return std::pair<double, double>(static_cast<double>(dec.prefill_activation_bytes()),
                                     static_cast<double>(dec.step_activation_bytes()));
  };
  const auto [two_prefill, two_step] = peaks(2);
  const auto [twelve_prefill, twelve_step] = peaks(12);
  EXPECT_LT(twelve_prefill, 1.3 * two_prefill);
  EXPECT_LT(twelve_step, 1.5 * two_step);
}

// A prompt of ten chunks peaks where a prompt of one chunk does; run as one
// chunk it would need about ten times the memory (what the bound saves).
TEST(Decoder, PrefillMemoryDoesNotGrowWithThePromptLength) {
  const ModelConfig c = ModelConfig::from_json(test::tiny(
      {{"num_hidden_layers", 2}, {"sliding_window", 8}, {"global_attn_idx", {0}}, {"num_memory_tokens", 2}}));
  Model m(c, false);
  m.init(5);
  const auto peak = [&](int64_t chunk, int64_t prompt_len) {
    infer::Decoder dec(m);
    dec.set_prefill_chunk(chunk);
    infer::SequenceCache sc = dec.new_cache(prompt_len + 1);
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7) % 29);
    (void)dec.prefill(sc, prompt);
    return static_cast<double>(dec.prefill_activation_bytes());
  };
  const double one_chunk = peak(24, 24), ten_chunks = peak(24, 240), as_one = peak(240, 240);
  EXPECT_LT(ten_chunks, 1.2 * one_chunk);
  EXPECT_GT(as_one, 5 * ten_chunks);
}

}  // namespace
}  // namespace hymba
