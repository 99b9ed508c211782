// Sequence caches (infer/cache.h): their bytes against the summary formula,
// full and while global layers grow in pages with the tokens decoded.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "infer/cache.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "model/model.h"
#include "model/summary.h"
#include "decode_families.h"

namespace hymba {
namespace {

using nlohmann::json;
using infer::Decoder;
using infer::KvLayerCache;
using infer::SequenceCache;
using test::Family;
using test::families;
using test::random_ids;
using test::tiny;

TEST(Cache, BytesEqualTheSummaryFormula) {
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    for (int64_t n : {1, 2, 3, 5, 40}) {
      const ModelSummary s = summarize(c, n);
      SequenceCache cache(c, n);
      cache.reserve(n);  // full: every row the formula counts
      EXPECT_EQ(static_cast<int64_t>(cache.kv_bytes()), s.kv_cache_bytes(4)) << n << " tokens";
      EXPECT_EQ(static_cast<int64_t>(cache.mamba_bytes()), s.mamba_state_bytes(4)) << n << " tokens";
      EXPECT_EQ(static_cast<int64_t>(cache.bytes()), infer::expected_cache_bytes(c, n));
    }
  }
}

TEST(Cache, GenerationFillsTheFormulaExactlyWhenItRunsToItsLimit) {
  const ModelConfig c = ModelConfig::from_json(tiny(json{{"vocab_size", 259}, {"num_memory_tokens", 2},
                                                          {"sliding_window", 4}, {"global_attn_idx", {0}}}));
  Model m(c, false);
  m.init(2);
  Decoder dec(m);
  SequenceCache cache = dec.new_cache(30);
  EXPECT_LT(static_cast<int64_t>(cache.bytes()), infer::expected_cache_bytes(c, 30)) << "global rows come with tokens";
  dec.prefill(cache, random_ids(11, 259, 1));
  std::vector<float> logits(259);
  SequenceCache* one[] = {&cache};
  for (int i = 0; i < 19; ++i) {
    const int32_t token[] = {static_cast<int32_t>(i)};
    dec.step(one, token, logits.data());
  }
  EXPECT_EQ(static_cast<int64_t>(cache.bytes()), infer::expected_cache_bytes(c, 30));

  const auto tok = make_byte_tokenizer();
  infer::GenerateOptions opt;
  opt.max_new_tokens = 5;
  infer::GenerateStats st;
  const std::vector<std::vector<int32_t>> prompts = {tok->encode("ab"), tok->encode("abcdefg")};
  infer::generate(dec, *tok, prompts, opt, {}, &st);
  EXPECT_EQ(st.kv_cache_bytes + st.mamba_state_bytes,
            infer::expected_cache_bytes(c, 2 + 5) + infer::expected_cache_bytes(c, 7 + 5));
  EXPECT_GT(dec.step_activation_bytes(), 0u);
}

// A cache sized for 16M tokens holds pages for the tokens it has seen: the
// bytes of a cache of its allocated rows, those rows at most half again the
// tokens plus a page, and decoding across a growth equals decoding in a cache
// allocated whole.
TEST(Cache, AHugeCacheGrowsInPagesWithItsTokens) {
  const ModelConfig c = ModelConfig::from_json(tiny(json{{"vocab_size", 259}, {"num_memory_tokens", 2},
                                                          {"sliding_window", 4}, {"global_attn_idx", {0}}}));
  Model m(c, false);
  m.init(3);
  Decoder dec(m);
  SequenceCache huge = dec.new_cache(int64_t{1} << 24), whole = dec.new_cache(700);
  whole.reserve(700);
  const std::vector<int32_t> prompt = random_ids(200, 259, 4);
  std::vector<float> a = dec.prefill(huge, prompt), b = dec.prefill(whole, prompt);
  EXPECT_EQ(a, b);
  SequenceCache* one[] = {&huge};
  SequenceCache* other[] = {&whole};
  for (int i = 0; i < 500; ++i) {
    const int32_t token[] = {static_cast<int32_t>((i * 37) % 259)};
    dec.step(one, token, a.data());
    dec.step(other, token, b.data());
    ASSERT_EQ(a, b) << "step " << i;
    const int64_t slots = huge.kv(0).allocated_token_slots();
    ASSERT_GE(slots, huge.tokens());
    ASSERT_LE(slots, huge.tokens() + huge.tokens() / 2 + KvLayerCache::kPageTokens);
    ASSERT_EQ(static_cast<int64_t>(huge.bytes()), infer::expected_cache_bytes(c, slots));
  }
  EXPECT_LT(huge.bytes(), size_t{1} << 20) << "700 tokens, not 16M";
}

}  // namespace
}  // namespace hymba
