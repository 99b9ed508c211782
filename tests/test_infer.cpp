// Cached decoding: prefill + step-by-step decoding must reproduce the full
// forward's logits for every model family; batches must not mix sequences;
// caches must be the size summary.h predicts; sampling must do what it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "tokenizer/tokenizer.h"
#include "infer/cache.h"
#include "infer/bench.h"
#include "infer/chat_session.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/sampler.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/plan.h"
#include "model/summary.h"
#include "decode_families.h"
#include "test_util.h"

namespace hymba {
namespace {

using nlohmann::json;
using infer::Decoder;
using infer::SequenceCache;
using test::Family;
using test::families;
using test::max_abs;
using test::random_ids;
using test::rel_error;
using test::tiny;

// float32 decode vs float32 full forward: the same math in a different order
// (matrix-vector products, one-token kernels, a polynomial exp), so logits
// agree to rounding, relative to the largest logit of the sequence.
constexpr double kDecodeRelTol = 1e-4;


std::vector<float> full_logits(Model& m, const std::vector<int32_t>& ids) {
  m.forward(ids.data(), nullptr, 1, static_cast<int64_t>(ids.size()));
  return std::vector<float>(m.logits(), m.logits() + ids.size() * m.config().vocab_size);
}

// q8 decode steps (weight_format.h) against the float32 full forward: the
// error is the weights' and the activations' 8-bit blocks, a percent or two
// of the largest logit on these tiny models (measured: see the test output),
// and the q8 path must really run (quantized weights made).
constexpr double kQ8RelTol = 0.05;
// q4 (4-bit weight codes, q8 activations) on these tiny models: rows of 16
// values fill half a block, so the error is large (up to 43 %);
// QuantizedDecodeEqualsTheForwardOfTheDequantizedWeights checks it tightly.
constexpr double kQ4RelTol = 0.6;

// Quantized weights in prefill chunks and decode steps: the logits stay
// within the format's tolerance of the float32 forward, and differ from the
// float32 decoder's (the format did run).
void expect_quantized_decode_close(infer::WeightFormat format, double tol) {
  const int64_t total = 18, prompt_len = 3;
  double worst = 0.0;
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    Model m(c, false);
    m.init(7);
    const int64_t V = c.vocab_size;
    const std::vector<int32_t> ids = random_ids(total, V, 11);
    const std::vector<float> want = full_logits(m, ids);
    const double scale = max_abs(want);
    Decoder q8(m, format), f32(m);
    SequenceCache cache = q8.new_cache(total), cache32 = f32.new_cache(total);
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + prompt_len);
    q8.prefill(cache, prompt);
    f32.prefill(cache32, prompt);
    std::vector<float> logits(static_cast<size_t>(V)), logits32(static_cast<size_t>(V));
    double differs = 0.0;
    for (int64_t t = prompt_len; t < total; ++t) {
      SequenceCache* one[] = {&cache};
      SequenceCache* one32[] = {&cache32};
      const int32_t token[] = {ids[static_cast<size_t>(t)]};
      q8.step(one, token, logits.data());
      f32.step(one32, token, logits32.data());
      const double err = rel_error(logits.data(), want.data() + t * V, V, scale);
      worst = std::max(worst, err);
      ASSERT_LE(err, tol) << "position " << t;
      differs = std::max(differs, rel_error(logits.data(), logits32.data(), V, scale));
    }
    EXPECT_GT(q8.quantized_bytes(), 0);
    EXPECT_EQ(f32.quantized_bytes(), 0);
    EXPECT_GT(differs, 0.0) << "the quantized steps gave the float32 logits bit for bit: they did not run";
  }
  std::printf("%s decode vs float32 forward: worst relative logit error %.4f over %zu families\n",
              infer::to_string(format), worst, families().size());
}

TEST(Decode, Q8StepsStayCloseToTheFullForwardForEveryFamily) {
  expect_quantized_decode_close(infer::WeightFormat::kQ8, kQ8RelTol);
}

TEST(Decode, Q4StepsStayCloseToTheFullForwardForEveryFamily) {
  expect_quantized_decode_close(infer::WeightFormat::kQ4, kQ4RelTol);
}


// The error of a quantized decoder is its weights' rounding plus its
// activations' (q8 blocks per row): against a float32 forward of a model
// whose matrices hold the very values the format stands for, only the
// activations' part is left: a few percent on these tiny models, whose
// 16-wide rows fill half a block (measured: see the test output), against
// q4's 40 % from the float32 weights.
constexpr double kActivationRelTol = 0.08;
// bf16 keeps float32 activations, so against the forward of its rounded
// weights only the summation order differs: float32 rounding.
constexpr double kBf16ActivationRelTol = 1e-4;

// The worst relative logit error of `format`'s prefill + decode against the
// float32 forward of the same model with every matrix the format made
// replaced by the values it stands for.
double worst_error_against_rounded_weights(infer::WeightFormat format, double tol) {
  const int64_t total = 14, prompt_len = 5;
  double worst = 0.0;
  for (const Family& f : families()) {
    SCOPED_TRACE(std::string(infer::to_string(format)) + " " + f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    Model m(c, false);
    m.init(7);
    const int64_t V = c.vocab_size;
    const std::vector<int32_t> ids = random_ids(total, V, 12);
    Decoder dec(m, format);
    dec.set_head_in_format(false);  // the matrices replaced below are the linears; the head is tested apart
    SequenceCache cache = dec.new_cache(total);
    std::vector<float> got;
    dec.prefill(cache, std::vector<int32_t>(ids.begin(), ids.begin() + prompt_len), &got);
    got.resize(static_cast<size_t>(total * V));
    for (int64_t t = prompt_len; t < total; ++t) {
      SequenceCache* one[] = {&cache};
      const int32_t token[] = {ids[static_cast<size_t>(t)]};
      dec.step(one, token, got.data() + t * V);
    }
    // The same model with every quantized matrix replaced by its values.
    Model dq(c, false);
    const int64_t n = m.params().total_floats();
    std::copy_n(m.params().values_block(), n, dq.params().values_block());
    const auto matrices = dec.linears().quantized_matrices();
    EXPECT_FALSE(matrices.empty());
    for (const auto& [w, OC, C] : matrices) {
      const std::vector<float> values = dec.linears().dequantized(w, OC, C);
      const int64_t offset = w - m.params().values_block();
      EXPECT_TRUE(offset >= 0 && offset + OC * C <= n) << "a matrix outside the parameters: " << offset << " " << OC << "x" << C << " of " << n;
      std::copy(values.begin(), values.end(), dq.params().values_block() + offset);
    }
    const std::vector<float> want = full_logits(dq, ids);
    const double err = rel_error(got.data(), want.data(), total * V, max_abs(want));
    worst = std::max(worst, err);
    EXPECT_LE(err, tol);
  }
  return worst;
}

TEST(Decode, QuantizedDecodeEqualsTheForwardOfTheDequantizedWeights) {
  for (infer::WeightFormat format : {infer::WeightFormat::kQ8, infer::WeightFormat::kQ4})
    std::printf("%s decode vs the float32 forward of its dequantized weights: worst relative error %.4f\n",
                infer::to_string(format), worst_error_against_rounded_weights(format, kActivationRelTol));
}

// bf16: within its rounding of the float32 forward, and tightly equal to the
// forward of its rounded weights.
TEST(Decode, Bf16DecodeIsTheForwardOfItsRoundedWeights) {
  expect_quantized_decode_close(infer::WeightFormat::kBF16, 0.02);
  std::printf("bf16 decode vs the float32 forward of its rounded weights: worst relative error %.2e\n",
              worst_error_against_rounded_weights(infer::WeightFormat::kBF16, kBf16ActivationRelTol));
}

// bf16 prefill chunks of kFloatRows rows or more multiply by the float32
// weights (faster), unless the decoder scores the format itself. q8 and q4
// run every product on their blocks (the many-row block kernels), so a long
// chunk gives exactly the scoring decoder's logits, not float32's.
TEST(Decode, LongPrefillChunksUseTheFloatWeightsOnlyForBf16) {
  const ModelConfig c = ModelConfig::from_json(tiny(families()[8].over));  // no meta tokens: every chunk is long
  ASSERT_EQ(c.num_memory_tokens, 0);
  Model m(c, false);
  m.init(8);
  const std::vector<int32_t> prompt = random_ids(infer::DecoderLinears::kFloatRows + 4, c.vocab_size, 5);
  Decoder f32(m);
  SequenceCache a = f32.new_cache(32);
  std::vector<float> la;
  f32.prefill(a, prompt, &la);
  for (const auto& [format, tol] : {std::pair{infer::WeightFormat::kBF16, 0.02}, std::pair{infer::WeightFormat::kQ8, kQ8RelTol},
                                    std::pair{infer::WeightFormat::kQ4, kQ4RelTol}}) {
    SCOPED_TRACE(infer::to_string(format));
    Decoder plain(m, format), scoring(m, format);
    scoring.set_quantized_prefill(true);
    SequenceCache b = plain.new_cache(32), d = scoring.new_cache(32);
    std::vector<float> lb, ld;
    plain.prefill(b, prompt, &lb);
    scoring.prefill(d, prompt, &ld);
    EXPECT_NE(la, ld);
    if (format == infer::WeightFormat::kBF16) {
      EXPECT_EQ(la, lb);
    } else {
      EXPECT_EQ(lb, ld);
      EXPECT_NE(la, lb);
    }
    EXPECT_LE(rel_error(ld.data(), la.data(), static_cast<int64_t>(la.size()), max_abs(la)), 2 * tol);
  }
}

// The bytes bench infer divides the bandwidth by: every parameter in float32
// except the linear matrices, which count in their format (rows padded to
// whole blocks), the output head, in the head's format (q8 for q4), and the
// embedding, of which a step reads one row (a tied head reads it whole, in
// its format, besides).
TEST(Decode, DecodeWeightBytesCountEachFormat) {
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    Model m(c, false);
    const ModelPlan& plan = m.plan();
    const std::vector<int64_t> linear = linear_weight_offsets(plan);
    const int64_t d = c.hidden_size, V = c.vocab_size;
    int64_t linear_floats = 0, q8 = 0, q4 = 0, lookups = 0, others = 0;
    for (const ParamInfo& p : m.params().rows()) {
      const bool lookup = p.offset == plan.embed || p.offset == plan.positions;
      if (lookup) ++lookups;
      if (p.offset == plan.lm_head) continue;
      if (std::find(linear.begin(), linear.end(), p.offset) != linear.end()) {
        linear_floats += p.shape.numel();
        q8 += p.shape[0] * cpu::q8_blocks_per_row(p.shape[1]) * 34;
        q4 += p.shape[0] * cpu::q4_blocks_per_row(p.shape[1]) * 18;
      } else if (!lookup) {
        others += p.shape.numel();
      }
    }
    ASSERT_GT(linear_floats, 0);
    const int64_t rest = 4 * (others + lookups * d);
    const int64_t head_q8 = V * cpu::q8_blocks_per_row(d) * 34;
    EXPECT_EQ(infer::decode_weight_bytes(m, infer::WeightFormat::kF32), rest + 4 * linear_floats + 4 * V * d);
    EXPECT_EQ(infer::decode_weight_bytes(m, infer::WeightFormat::kBF16), rest + 2 * linear_floats + 2 * V * d);
    EXPECT_EQ(infer::decode_weight_bytes(m, infer::WeightFormat::kQ8), rest + q8 + head_q8);
    EXPECT_EQ(infer::decode_weight_bytes(m, infer::WeightFormat::kQ4), rest + q4 + head_q8);
  }
}

// The output head runs in the format (q8 for q4) at decode steps and short
// chunks; its copy counts in quantized_bytes; head_in_format(false) keeps it
// float32, and the logits then differ by the head's rounding alone.
TEST(Decode, TheHeadRunsInTheFormatUnlessAskedNotTo) {
  const ModelConfig c = ModelConfig::from_json(tiny(families()[3].over));
  Model m(c, false);
  m.init(5);
  const int64_t V = c.vocab_size, d = c.hidden_size;
  const std::vector<int32_t> ids = random_ids(6, V, 3);
  for (infer::WeightFormat format : {infer::WeightFormat::kBF16, infer::WeightFormat::kQ8, infer::WeightFormat::kQ4}) {
    SCOPED_TRACE(infer::to_string(format));
    Decoder with(m, format), without(m, format);
    without.set_head_in_format(false);
    EXPECT_EQ(with.linears().head_format(), infer::head_format_of(format));
    EXPECT_EQ(without.linears().head_format(), infer::WeightFormat::kF32);
    SequenceCache a = with.new_cache(8), b = without.new_cache(8);
    const std::vector<float> la = with.prefill(a, ids), lb = without.prefill(b, ids);
    EXPECT_NE(la, lb) << "the head ran in float32 both times";
    // q8's rows are packed 8 at a time (kernels/cpu/quant_packed.h), the last group zero-padded.
    const int64_t head_bytes =
        format == infer::WeightFormat::kBF16
            ? 2 * V * d
            : cpu::packed_groups(V) * cpu::q8_blocks_per_row(d) * static_cast<int64_t>(sizeof(cpu::PackedQ8));
    EXPECT_EQ(with.quantized_bytes() - without.quantized_bytes(), head_bytes);
    EXPECT_LE(rel_error(la.data(), lb.data(), V, max_abs(lb)), format == infer::WeightFormat::kBF16 ? 0.01 : 0.05);
  }
  EXPECT_EQ(infer::head_format_of(infer::WeightFormat::kF32), infer::WeightFormat::kF32);
}

TEST(Decode, WeightFormatNames) {
  EXPECT_EQ(infer::parse_weight_format("q8"), infer::WeightFormat::kQ8);
  EXPECT_EQ(infer::parse_weight_format("f32"), infer::WeightFormat::kF32);
  EXPECT_EQ(infer::parse_weight_format("q4"), infer::WeightFormat::kQ4);
  EXPECT_EQ(infer::parse_weight_format("bf16"), infer::WeightFormat::kBF16);
  EXPECT_STREQ(infer::to_string(infer::WeightFormat::kBF16), "bf16");
  EXPECT_STREQ(infer::to_string(infer::WeightFormat::kQ4), "q4");
  EXPECT_FALSE(infer::parse_weight_format("q5").has_value());
  EXPECT_FALSE(infer::parse_weight_format("Q8").has_value());
  EXPECT_STREQ(infer::to_string(infer::WeightFormat::kQ8), "q8");
}

TEST(Decode, PrefillPlusStepsEqualFullForwardForEveryFamily) {
  const int64_t total = 18;
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    EXPECT_EQ(uses_hf_mamba_names(c), std::string(f.name) == "pure_mamba_hf");
    Model m(c, false);
    m.init(7);
    const int64_t V = c.vocab_size;
    const std::vector<int32_t> ids = random_ids(total, V, 11);
    const std::vector<float> want = full_logits(m, ids);
    const double scale = max_abs(want);
    Decoder dec(m);
    for (int64_t prompt_len : {1, 2, 7}) {
      SCOPED_TRACE("prompt of " + std::to_string(prompt_len));
      SequenceCache cache = dec.new_cache(total);
      std::vector<float> prompt_logits;
      const std::vector<int32_t> prompt(ids.begin(), ids.begin() + prompt_len);
      const std::vector<float> last = dec.prefill(cache, prompt, &prompt_logits);
      ASSERT_EQ(static_cast<int64_t>(prompt_logits.size()), prompt_len * V);
      EXPECT_LE(rel_error(prompt_logits.data(), want.data(), prompt_len * V, scale), kDecodeRelTol);
      EXPECT_EQ(last, std::vector<float>(prompt_logits.end() - V, prompt_logits.end()));
      std::vector<float> logits(static_cast<size_t>(V));
      for (int64_t t = prompt_len; t < total; ++t) {
        SequenceCache* one[] = {&cache};
        const int32_t token[] = {ids[static_cast<size_t>(t)]};
        dec.step(one, token, logits.data());
        ASSERT_LE(rel_error(logits.data(), want.data() + t * V, V, scale), kDecodeRelTol) << "position " << t;
      }
      EXPECT_EQ(cache.tokens(), total);
    }
  }
}

// Prefill by chunks continues each chunk from the cache (K/V of the meta
// rows and of the tokens a window still sees, conv and SSM states): any
// chunk size, and a prompt fed in several extend calls, must give the full
// forward's logits at every position, then decode on from there.
TEST(Decode, ChunkedPrefillAndExtendEqualFullForwardForEveryFamily) {
  const int64_t total = 18;
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const ModelConfig c = ModelConfig::from_json(tiny(f.over));
    Model m(c, false);
    m.init(5);
    const int64_t V = c.vocab_size;
    const std::vector<int32_t> ids = random_ids(total, V, 23);
    const std::vector<float> want = full_logits(m, ids);
    const double scale = max_abs(want);
    for (int64_t chunk : {1, 3, 5, 64}) {
      SCOPED_TRACE("chunk of " + std::to_string(chunk));
      Decoder dec(m);
      dec.set_prefill_chunk(chunk);
      SequenceCache cache = dec.new_cache(total);
      std::vector<float> got;
      dec.prefill(cache, std::vector<int32_t>(ids.begin(), ids.begin() + 4), &got);
      EXPECT_LE(rel_error(got.data(), want.data(), 4 * V, scale), kDecodeRelTol);
      // Two more pieces through extend, then decode steps to the end.
      for (auto [from, to] : {std::pair<int64_t, int64_t>{4, 11}, {11, 14}}) {
        const std::vector<float> last =
            dec.extend(cache, std::vector<int32_t>(ids.begin() + from, ids.begin() + to), &got);
        ASSERT_EQ(static_cast<int64_t>(got.size()), (to - from) * V);
        EXPECT_LE(rel_error(got.data(), want.data() + from * V, (to - from) * V, scale), kDecodeRelTol)
            << "tokens " << from << ".." << to;
        EXPECT_EQ(last, std::vector<float>(got.end() - V, got.end()));
      }
      std::vector<float> logits(static_cast<size_t>(V));
      for (int64_t t = 14; t < total; ++t) {
        SequenceCache* one[] = {&cache};
        const int32_t token[] = {ids[static_cast<size_t>(t)]};
        dec.step(one, token, logits.data());
        ASSERT_LE(rel_error(logits.data(), want.data() + t * V, V, scale), kDecodeRelTol) << "position " << t;
      }
      std::vector<int32_t> more(1, 0);
      EXPECT_THROW(dec.extend(cache, more), Error);  // the cache is full
    }
  }
}

// The meta tokens run once per decoder, not once per prompt, and a sequence
// started from the stored prefix gets bit-identical logits to one whose
// decoder has just computed it.
TEST(Decode, MetaPrefixRunsOncePerDecoderAndIsBitIdentical) {
  const ModelConfig c = ModelConfig::from_json(tiny(families()[6].over));  // 2 meta tokens, everything on
  ASSERT_EQ(c.num_memory_tokens, 2);
  Model m(c, false);
  m.init(9);
  const int64_t V = c.vocab_size;
  const std::vector<int32_t> a = random_ids(6, V, 1), b = random_ids(4, V, 2);
  Decoder reused(m);
  SequenceCache cache = reused.new_cache(8);
  reused.prefill(cache, a);
  const std::vector<float> second = reused.prefill(cache, b);
  EXPECT_EQ(reused.chunk_positions_run(), 2 + 6 + 4);
  Decoder fresh(m);
  SequenceCache other = fresh.new_cache(8);
  EXPECT_EQ(fresh.prefill(other, b), second);
  EXPECT_EQ(fresh.chunk_positions_run(), 2 + 4);
}

// A chat session feeds each turn only what its cache lacks: after a reply,
// the conversation so far (the reply's last token aside, never fed); when
// the reply comes back as other tokens, the previous prompt; else nothing.
// Replies equal generating each conversation from scratch.
TEST(ChatSession, ContinuesTheCacheThatHoldsAPrefixOfTheTurn) {
  json over = families()[6].over;  // hybrid with everything, 2 meta tokens
  over["vocab_size"] = 259;
  over["initializer_range"] = 0.3;
  const ModelConfig big = ModelConfig::from_json(tiny(over));
  Model model(big, false);
  model.init(4);
  const auto tok_ptr = make_byte_tokenizer();
  const Tokenizer& tok = *tok_ptr;
  infer::Decoder dec(model);
  infer::ChatSession session(dec, 64);
  infer::GenerateOptions greedy;
  greedy.sampling.temperature = 0;
  greedy.stop_at_eos = false;
  greedy.max_new_tokens = 4;
  auto alone = [&](const std::vector<int32_t>& ids) {
    infer::Decoder fresh(model);
    return infer::generate(fresh, tok, {ids}, greedy)[0].tokens;
  };
  std::vector<int32_t> conv = random_ids(9, big.vocab_size, 31);
  infer::Generation r = session.reply(tok, conv, greedy);
  EXPECT_EQ(session.reused_tokens(), 0);
  EXPECT_EQ(r.tokens, alone(conv));
  // The reply written back as generated, then a new message.
  const size_t first_prompt = conv.size();
  conv.insert(conv.end(), r.tokens.begin(), r.tokens.end());
  for (int32_t t : random_ids(5, big.vocab_size, 32)) conv.push_back(t);
  r = session.reply(tok, conv, greedy);
  EXPECT_EQ(session.reused_tokens(), static_cast<int64_t>(first_prompt + 3));  // 4 generated, 3 fed
  EXPECT_EQ(r.tokens, alone(conv));
  // The reply written back differently: only the prompt's cache still fits.
  const size_t second_prompt = conv.size();
  std::vector<int32_t> rewritten(conv);
  for (size_t i = 0; i < 4; ++i) rewritten.push_back((r.tokens[i] + 1) % static_cast<int32_t>(big.vocab_size));
  rewritten.push_back(7);
  r = session.reply(tok, rewritten, greedy);
  EXPECT_EQ(session.reused_tokens(), static_cast<int64_t>(second_prompt));
  EXPECT_EQ(r.tokens, alone(rewritten));
  // Another conversation starts over; one too long is refused and the next turn still works.
  const std::vector<int32_t> other = random_ids(6, big.vocab_size, 33);
  r = session.reply(tok, other, greedy);
  EXPECT_EQ(session.reused_tokens(), 0);
  EXPECT_EQ(r.tokens, alone(other));
  EXPECT_THROW(session.reply(tok, random_ids(61, big.vocab_size, 34), greedy), Error);
  std::vector<int32_t> more(other);
  more.push_back(3);
  r = session.reply(tok, more, greedy);
  EXPECT_EQ(r.tokens, alone(more));
}

TEST(Decode, BatchOfDifferentLengthsMatchesEachSequenceAlone) {
  const ModelConfig c = ModelConfig::from_json(tiny(families()[6].over));  // hybrid with everything
  Model m(c, false);
  m.init(3);
  const int64_t V = c.vocab_size, total = 16;
  const std::vector<int64_t> prompt_lens = {1, 9, 4};
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> want;
  for (size_t b = 0; b < prompt_lens.size(); ++b) {
    seqs.push_back(random_ids(total, V, 100 + b));
    want.push_back(full_logits(m, seqs.back()));
  }
  Decoder dec(m);
  std::vector<SequenceCache> caches;
  for (size_t b = 0; b < prompt_lens.size(); ++b) {
    caches.push_back(dec.new_cache(total));
    dec.prefill(caches[b], std::vector<int32_t>(seqs[b].begin(), seqs[b].begin() + prompt_lens[b]));
  }
  // Each step feeds every unfinished sequence its own next token at its own position.
  std::vector<float> logits;
  for (;;) {
    std::vector<SequenceCache*> batch;
    std::vector<int32_t> feed;
    std::vector<size_t> which;
    for (size_t b = 0; b < caches.size(); ++b) {
      if (caches[b].tokens() == total) continue;
      batch.push_back(&caches[b]);
      feed.push_back(seqs[b][static_cast<size_t>(caches[b].tokens())]);
      which.push_back(b);
    }
    if (batch.empty()) break;
    const std::vector<int64_t> positions = [&] {
      std::vector<int64_t> p;
      for (SequenceCache* sc : batch) p.push_back(sc->tokens());
      return p;
    }();
    logits.resize(batch.size() * V);
    dec.step(batch, feed, logits.data());
    for (size_t j = 0; j < batch.size(); ++j) {
      const size_t b = which[j];
      ASSERT_LE(rel_error(logits.data() + j * V, want[b].data() + positions[j] * V, V, max_abs(want[b])),
                kDecodeRelTol)
          << "sequence " << b << " position " << positions[j];
    }
  }
}

TEST(Decode, BatchGivesTheSameGreedyTokensAsEachPromptAlone) {
  const ModelConfig c = ModelConfig::from_json(tiny(json{{"vocab_size", 259}, {"num_memory_tokens", 2},
                                                          {"sliding_window", 3}, {"global_attn_idx", {0}},
                                                          {"kv_reuse_group", "auto"}, {"initializer_range", 0.3}}));
  Model m(c, false);
  m.init(5);
  const auto tok = make_byte_tokenizer();
  Decoder dec(m);
  infer::GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling.temperature = 0.0;
  const std::vector<std::vector<int32_t>> prompts = {tok->encode("a"), tok->encode("Hello there"),
                                                     tok->encode("xyz")};
  const auto together = infer::generate(dec, *tok, prompts, opt);
  ASSERT_EQ(together.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = infer::generate(dec, *tok, {prompts[i]}, opt);
    EXPECT_EQ(alone[0].tokens, together[i].tokens) << "prompt " << i;
    EXPECT_EQ(alone[0].finish, together[i].finish);
  }
}

TEST(Decode, MisuseIsAnError) {
  const ModelConfig c = ModelConfig::from_json(tiny(json::object()));
  Model m(c, false);
  m.init(1);
  Decoder dec(m);
  SequenceCache cache = dec.new_cache(3);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  SequenceCache* one[] = {&cache};
  const int32_t token[] = {1};
  EXPECT_THROW(dec.step(one, token, logits.data()), Error);  // not prefilled
  EXPECT_THROW(dec.prefill(cache, std::vector<int32_t>{1, 2, 3, 4}), Error);  // does not fit
  dec.prefill(cache, std::vector<int32_t>{1, 2});
  dec.step(one, token, logits.data());
  EXPECT_THROW(dec.step(one, token, logits.data()), Error);  // full
  SequenceCache other = dec.new_cache(4);
  dec.prefill(other, std::vector<int32_t>{1});
  SequenceCache* twice[] = {&other, &other};
  const int32_t tokens[] = {1, 2};
  std::vector<float> two(2 * logits.size());
  EXPECT_THROW(dec.step(twice, tokens, two.data()), Error);
}

// The two masks that read later tokens train and evaluate but never decode,
// nor does a K/V pair of two windows ("all_pairs"): the decoder refuses them
// in one line naming the field; where the leaks act on no layer (no window,
// no meta tokens) the model decodes as usual.
TEST(Decode, RefusesMasksThatReadLaterTokensAndPairsOfTwoWindows) {
  struct Case {
    json over;
    const char* field;  // nullptr: decodes
  };
  const std::vector<Case> cases = {
      {{{"sliding_window", 3}, {"global_attn_idx", {0}}, {"sliding_window_symmetric", true}}, "sliding_window_symmetric"},
      {{{"num_memory_tokens", 2}, {"meta_tokens_see_all", true}}, "meta_tokens_see_all"},
      {{{"sliding_window", 0}, {"sliding_window_symmetric", true}}, nullptr},
      {{{"num_memory_tokens", 0}, {"meta_tokens_see_all", true}}, nullptr},
      {{{"sliding_window", 3}, {"global_attn_idx", {0}}, {"kv_reuse_group", "all_pairs"}}, "kv_reuse_group"},
  };
  for (const Case& c : cases) {
    Model m(ModelConfig::from_json(tiny(c.over)), false);
    m.init(1);
    if (c.field == nullptr) {
      EXPECT_NO_THROW(Decoder{m}) << c.over.dump();
      continue;
    }
    try {
      Decoder dec(m);
      ADD_FAILURE() << c.field << " decoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

// --- sampling

std::vector<float> random_vec(size_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

TEST(Sampling, GreedyAndTopKOneAreArgmax) {
  Rng rng(3);
  infer::SamplingOptions greedy;
  greedy.temperature = 0.0;
  infer::SamplingOptions top1;
  top1.temperature = 1.0;
  top1.top_k = 1;
  top1.top_p = 1.0;
  infer::Sampler a(greedy, 0), b(top1, 0);
  for (int trial = 0; trial < 20; ++trial) {
    const auto logits = random_vec(50, rng, -3.0f, 3.0f);
    const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(infer::argmax(logits.data(), 50), best);
    EXPECT_EQ(a.sample(logits.data(), 50), best);
    EXPECT_EQ(b.sample(logits.data(), 50), best);
  }
}

TEST(Sampling, TemperatureTowardZeroIsGreedy) {
  Rng rng(4);
  infer::SamplingOptions cold;
  cold.temperature = 1e-6;
  cold.top_p = 1.0;
  infer::Sampler s(cold, 0);
  for (int trial = 0; trial < 20; ++trial) {
    const auto logits = random_vec(40, rng, -3.0f, 3.0f);
    EXPECT_EQ(s.sample(logits.data(), 40), infer::argmax(logits.data(), 40));
    EXPECT_NEAR(s.distribution(logits.data(), 40).front().second, 1.0, 1e-9);
  }
}

// Logit biases move the greedy choice; the penalties act on what was seen:
// presence once, frequency per appearance (generated tokens only), the
// repetition penalty on prompt and generated tokens (dividing a positive
// logit, multiplying a negative one).
TEST(Sampling, LogitBiasAndPenaltiesMoveTheChoice) {
  const std::vector<float> logits = {2.0f, 1.9f, 1.0f, -0.5f};
  infer::SamplingOptions o;
  o.temperature = 0.0;
  o.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(infer::Sampler(o, 0).sample(logits.data(), 4), 1);
  o.logit_bias = {{3, 3.0f}};
  EXPECT_EQ(infer::Sampler(o, 0).sample(logits.data(), 4), 3);

  o.logit_bias.clear();
  o.presence_penalty = 0.2;  // token 0 at 1.8 after it appeared once: 1 (1.9) wins
  infer::Sampler presence(o, 0);
  EXPECT_EQ(presence.sample(logits.data(), 4), 0);
  EXPECT_EQ(presence.sample(logits.data(), 4), 1);
  o.presence_penalty = 0.0;
  o.frequency_penalty = 0.06;  // 2.0 - 0.06 k against 1.9 - 0.06 k': 0, 0, then 1
  infer::Sampler frequency(o, 0);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(frequency.sample(logits.data(), 4));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 1, 0}));
  o.frequency_penalty = 0.0;
  o.repetition_penalty = 1.1;  // 2.0 / 1.1 = 1.82 < 1.9
  infer::Sampler repetition(o, 0);
  repetition.set_prompt({0});
  EXPECT_EQ(repetition.sample(logits.data(), 4), 1);
  infer::SamplingOptions bad_repetition, bad_presence, bad_bias;
  bad_repetition.repetition_penalty = 0.0;
  EXPECT_THROW(infer::Sampler(bad_repetition, 0), Error);
  bad_presence.presence_penalty = 2.5;
  EXPECT_THROW(infer::Sampler(bad_presence, 0), Error);
  bad_bias.logit_bias = {{1, 101.0f}};
  EXPECT_THROW(infer::Sampler(bad_bias, 0), Error);
}

TEST(Sampling, MinPDropsTokensBelowItsShareOfTheBest) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: min_p 0.25 keeps p >= 0.125.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  infer::SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 1.0;
  o.min_p = 0.25;
  const auto d = infer::Sampler(o, 0).distribution(logits.data(), 4);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NEAR(d[0].second, 0.5 / 0.95, 1e-6);
  EXPECT_EQ(d[2].first, 2);
  o.min_p = 2.0;
  EXPECT_THROW(infer::Sampler(o, 0), Error);
}

TEST(Sampling, FixedSeedIsReproducibleAndStreamsDiffer) {
  Rng rng(5);
  const auto logits = random_vec(30, rng, -1.0f, 1.0f);
  infer::SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 1.0;
  o.seed = 77;
  auto draws = [&](uint64_t stream) {
    infer::Sampler s(o, stream);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits.data(), 30));
    return out;
  };
  EXPECT_EQ(draws(0), draws(0));
  EXPECT_NE(draws(0), draws(1));
}

TEST(Sampling, TopPKeepsTheNucleusAndTopKTheKBest) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1, shuffled ids.
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  infer::SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 0.8;  // 0.5 + 0.3 reach it: {1, 3}
  infer::Sampler nucleus(o, 0);
  auto d = nucleus.distribution(logits.data(), 4);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_EQ(d[1].first, 3);
  EXPECT_NEAR(d[0].second, 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(d[1].second, 0.3 / 0.8, 1e-6);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 4000; ++i) ++seen[nucleus.sample(logits.data(), 4)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_NEAR(seen[1] / 4000.0, 0.625, 0.03);

  o.top_p = 0.85;  // needs the third token too
  EXPECT_EQ(infer::Sampler(o, 0).distribution(logits.data(), 4).size(), 3u);
  o.top_p = 1.0;
  o.top_k = 2;
  d = infer::Sampler(o, 0).distribution(logits.data(), 4);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_EQ(d[1].first, 3);
  o.top_k = 0;
  o.temperature = 2.0;  // flattens: p ~ sqrt(q)
  d = infer::Sampler(o, 0).distribution(logits.data(), 4);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_NEAR(d[0].second, std::sqrt(0.5) / (std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05)),
              1e-6);
}

TEST(Sampling, BadOptionsNameTheFlag) {
  infer::SamplingOptions o;
  o.temperature = -1.0;
  try {
    infer::Sampler s(o, 0);
    FAIL() << "accepted a negative temperature";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--temperature"), std::string::npos);
  }
  o.temperature = 1.0;
  o.top_p = 0.0;
  EXPECT_THROW(infer::Sampler(o, 0), Error);
}

// --- stopping

// The byte tokenizer with a chosen eos id, to make a greedy run stop on EOS.
class EosTokenizer : public Tokenizer {
 public:
  explicit EosTokenizer(int32_t eos) : base_(make_byte_tokenizer()), eos_(eos) {}
  TokenizerKind kind() const override { return base_->kind(); }
  int32_t vocab_size() const override { return base_->vocab_size(); }
  std::vector<int32_t> encode(std::string_view t) const override { return base_->encode(t); }
  std::string decode(const std::vector<int32_t>& ids) const override { return base_->decode(ids); }
  int32_t bos_id() const override { return base_->bos_id(); }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return base_->pad_id(); }
  int32_t unk_id() const override { return -1; }
  std::string fingerprint() const override { return "test"; }
  void save(const std::string&) const override {}

 private:
  std::unique_ptr<Tokenizer> base_;
  int32_t eos_;
};

class Stopping : public ::testing::Test {
 protected:
  Stopping()
      : model_(ModelConfig::from_json(tiny(json{{"vocab_size", 259}, {"initializer_range", 0.3},
                                                {"sliding_window", 4}, {"global_attn_idx", {0}}})),
               false) {
    model_.init(21);
  }
  std::vector<infer::Generation> run(const Tokenizer& tok, const infer::GenerateOptions& opt, std::string* streamed) {
    Decoder dec(model_);
    return infer::generate(dec, tok, {tok.encode("The cat")}, opt,
                           [streamed](int64_t, std::string_view s) { streamed->append(s); });
  }
  Model model_;
};

TEST_F(Stopping, StopStringCutsTheTextAndIsNeverStreamed) {
  const auto tok = make_byte_tokenizer();
  infer::GenerateOptions opt;
  opt.max_new_tokens = 24;
  opt.sampling.temperature = 0.0;
  opt.stop_at_eos = false;
  std::string streamed;
  const auto free_run = run(*tok, opt, &streamed);
  EXPECT_EQ(streamed, free_run[0].text);
  EXPECT_EQ(free_run[0].finish, infer::FinishReason::kLength);
  EXPECT_EQ(free_run[0].tokens.size(), 24u);
  const std::string& text = free_run[0].text;
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(4, 2);
  opt.stop = {"\x01never\x02", stop};
  streamed.clear();
  const auto stopped = run(*tok, opt, &streamed);
  EXPECT_EQ(stopped[0].finish, infer::FinishReason::kStop);
  EXPECT_EQ(stopped[0].text, text.substr(0, text.find(stop)));
  EXPECT_EQ(streamed, stopped[0].text);
}

TEST_F(Stopping, EosEndsTheSequenceAndIsNotIncluded) {
  const auto tok = make_byte_tokenizer();
  infer::GenerateOptions opt;
  opt.max_new_tokens = 16;
  opt.sampling.temperature = 0.0;
  opt.stop_at_eos = false;
  std::string streamed;
  const std::vector<int32_t> greedy = run(*tok, opt, &streamed)[0].tokens;
  // The first token that did not occur before it becomes the eos.
  size_t k = 0;
  for (size_t i = 1; i < greedy.size() && k == 0; ++i)
    if (std::find(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(i), greedy[i]) ==
        greedy.begin() + static_cast<std::ptrdiff_t>(i))
      k = i;
  const EosTokenizer eos_tok(greedy[k]);
  opt.stop_at_eos = true;
  streamed.clear();
  const auto out = run(eos_tok, opt, &streamed);
  EXPECT_EQ(out[0].finish, infer::FinishReason::kEos);
  EXPECT_EQ(out[0].tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(k)));
}

}  // namespace
}  // namespace hymba
