#include "infer/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <span>

#include "core/error.h"
#include "core/rng.h"
#include "core/threading.h"
#include "infer/decoder.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_packed.h"
#include "infer/sampler.h"
#include "model/plan.h"

namespace hymba::infer {

namespace {

using Clock = std::chrono::steady_clock;

// Rounds of decode steps and bandwidth reads (see InferBenchResult).
constexpr int kBandwidthRounds = 5;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int32_t> random_prompt(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  return ids;
}

// Greedy decoding of `steps` tokens for every cache at once, after one
// untimed warm-up step (which sizes the step arena). Returns seconds; `next`
// ends as the tokens the last step chose.
double timed_decode(Decoder& dec, std::span<SequenceCache* const> caches, std::vector<int32_t>& next, int64_t steps) {
  const int64_t V = dec.vocab_size();
  std::vector<float> logits(caches.size() * static_cast<size_t>(V));
  auto one_step = [&] {
    dec.step(caches, next, logits.data());
    for (size_t b = 0; b < caches.size(); ++b) next[b] = argmax(logits.data() + b * V, V);
  };
  one_step();
  const auto t0 = Clock::now();
  for (int64_t s = 0; s < steps; ++s) one_step();
  return seconds_since(t0);
}

}  // namespace

namespace {
// Bytes of a [rows, cols] matrix in `format`.
int64_t matrix_bytes(WeightFormat format, int64_t rows, int64_t cols) {
  switch (format) {
    case WeightFormat::kBF16: return 2 * rows * cols;
    case WeightFormat::kQ8: return rows * cpu::q8_blocks_per_row(cols) * int64_t{sizeof(cpu::BlockQ8)};
    case WeightFormat::kQ4: return rows * cpu::q4_blocks_per_row(cols) * int64_t{sizeof(cpu::BlockQ4)};
    case WeightFormat::kF32: break;
  }
  return 4 * rows * cols;
}
}  // namespace

int64_t decode_weight_bytes(const Model& model, WeightFormat format) {
  const ModelPlan& plan = model.plan();
  const std::vector<int64_t> linear = linear_weight_offsets(plan);
  const std::set<int64_t> linear_offsets(linear.begin(), linear.end());
  const int64_t d = model.config().hidden_size, V = model.config().vocab_size;
  int64_t bytes = 0;
  for (const ParamInfo& p : model.params().rows()) {
    const int64_t n = p.shape.numel();
    const bool lookup = p.offset == plan.embed || p.offset == plan.positions;  // one row read
    if (lookup) bytes += 4 * d;
    if (p.offset == plan.lm_head) {
      bytes += matrix_bytes(head_format_of(format), V, d);
    } else if (linear_offsets.count(p.offset) != 0 && p.shape.rank == 2) {
      bytes += matrix_bytes(format, p.shape[0], p.shape[1]);
    } else if (!lookup) {
      bytes += 4 * n;
    }
  }
  return bytes;
}

ReadBandwidthProbe::ReadBandwidthProbe() {
  // 512 MiB: far past any L3 here, small beside the models it is run with.
  const int64_t n = (int64_t{512} << 20) / int64_t{sizeof(uint64_t)};
  buf_.resize(static_cast<size_t>(n));
  uint64_t* b = buf_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) b[i] = static_cast<uint64_t>(i);
}

double ReadBandwidthProbe::read_once() {
  const auto n = static_cast<int64_t>(buf_.size());
  const uint64_t* b = buf_.data();
  uint64_t sum = 0;
  const auto t0 = Clock::now();
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += b[i];
  const double s = seconds_since(t0);
  // The sum is known (n(n-1)/2): comparing keeps the reads from being dropped.
  HYMBA_CHECK(sum == static_cast<uint64_t>(n) * static_cast<uint64_t>(n - 1) / 2, "read bandwidth: bad sum");
  return static_cast<double>(n) * sizeof(uint64_t) / s / 1e9;
}

double measure_read_bandwidth() {
  ReadBandwidthProbe probe;
  probe.read_once();  // warms up
  double best = 0.0;
  for (int pass = 0; pass < 3; ++pass) best = std::max(best, probe.read_once());
  return best;
}

int64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

namespace {

// GOP/s of product(), the best of three timed calls after one untimed.
template <typename Product>
double best_gops(double ops, Product product) {
  product();
  double best = 0.0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    product();
    best = std::max(best, ops / seconds_since(t0) / 1e9);
  }
  return best;
}

// The float32 and block products' peaks at [256, d] x [d, d] (see InferBenchResult).
void measure_product_peaks(InferBenchResult& r, int64_t d) {
  constexpr int64_t R = 256;
  Rng rng(7);
  std::vector<float> x(static_cast<size_t>(R * d)), w(static_cast<size_t>(d * d)), out(static_cast<size_t>(R * d));
  for (float& v : x) v = static_cast<float>(rng.uniform()) - 0.5f;
  for (float& v : w) v = static_cast<float>(rng.uniform()) - 0.5f;
  const double ops = 2.0 * static_cast<double>(R * d * d);
  r.gemm_f32_gops = best_gops(ops, [&] { cpu::matmul_forward(out.data(), x.data(), w.data(), nullptr, R, d, d); });
  const int64_t nb = cpu::q8_blocks_per_row(d);
  std::vector<cpu::BlockQ8> b8(static_cast<size_t>(d * nb));
  std::vector<cpu::BlockQ4> b4(b8.size());
  cpu::quantize_q8(b8.data(), w.data(), d, d);
  cpu::quantize_q4(b4.data(), w.data(), d, d);
  std::vector<cpu::PackedQ8> p8(static_cast<size_t>(cpu::packed_groups(d) * nb));
  std::vector<cpu::PackedQ4> p4(p8.size());
  cpu::pack_q8(p8.data(), b8.data(), d, d);
  cpu::pack_q4(p4.data(), b4.data(), d, d);
  r.gemm_q8_gops =
      best_gops(ops, [&] { cpu::gemm_packed_q8(out.data(), d, x.data(), d, p8.data(), nullptr, R, d, d); });
  r.gemm_q4_gops =
      best_gops(ops, [&] { cpu::gemm_packed_q4(out.data(), d, x.data(), d, p4.data(), nullptr, R, d, d); });
  r.product_isa = cpu::to_string(cpu::best_q8_isa());
}

}  // namespace

InferBenchResult run_infer_bench(Model& model, const InferBenchOptions& opt) {
  HYMBA_CHECK(opt.prompt_len >= 1, "--prompt-len must be >= 1, got ", opt.prompt_len);
  HYMBA_CHECK(opt.new_tokens >= 1, "--new-tokens must be >= 1, got ", opt.new_tokens);
  HYMBA_CHECK(opt.batch >= 1, "--batch must be >= 1, got ", opt.batch);
  for (int64_t c : opt.contexts) HYMBA_CHECK(c >= 1, "--contexts: every context must be >= 1, got ", c);
  const ModelConfig& cfg = model.config();
  Decoder dec(model, opt.weights);
  Rng rng(opt.seed);
  const int64_t V = cfg.vocab_size;
  // Room for the prompt, the warm-up step and the timed steps.
  const int64_t capacity = opt.prompt_len + opt.new_tokens + 1;

  InferBenchResult r;
  r.options = opt;
  r.options.weights = dec.weight_format();  // a checkpoint holding blocks runs them
  r.threads = num_threads();
  r.params = model.params().num_params();
  double prefill_seconds = 0.0;
  int64_t prefill_tokens = 0;
  {
    const auto t0 = Clock::now();
    dec.meta_prefix();
    r.meta_prefix_seconds = cfg.num_memory_tokens > 0 ? seconds_since(t0) : 0.0;
  }

  // One untimed prefill first, as decode takes one untimed step: the first
  // prefill of a decoder sizes its arenas and first touches their pages
  // (hymba-1.5b f32: 37 tok/s for the first 256-token prompt, 48 for later
  // ones, in one run).
  {
    SequenceCache warm = dec.new_cache(opt.prompt_len);
    dec.prefill(warm, random_prompt(rng, opt.prompt_len, V));
  }

  // Batch 1. The sequence is kept, with room for the bandwidth rounds' steps.
  const int64_t round_steps = std::max<int64_t>(2, opt.new_tokens / 8);
  SequenceCache single = dec.new_cache(capacity + kBandwidthRounds * (round_steps + 1));
  SequenceCache* const kept[] = {&single};
  std::vector<int32_t> single_next;
  {
    const std::vector<int32_t> prompt = random_prompt(rng, opt.prompt_len, V);
    const auto t0 = Clock::now();
    const std::vector<float> logits = dec.prefill(single, prompt);
    prefill_seconds += seconds_since(t0);
    prefill_tokens += opt.prompt_len;
    single_next = {argmax(logits.data(), V)};
    const double s = timed_decode(dec, kept, single_next, opt.new_tokens);
    r.decode_tokens_per_second_batch1 = static_cast<double>(opt.new_tokens) / s;
    r.decode_threads_batch1 = dec.step_threads(1);
    r.decode_ms_per_step_batch1 = 1e3 * s / static_cast<double>(opt.new_tokens);
  }

  // opt.batch sequences decoded together.
  {
    std::vector<SequenceCache> caches;
    caches.reserve(static_cast<size_t>(opt.batch));
    std::vector<SequenceCache*> ptrs;
    std::vector<int32_t> next;
    for (int64_t b = 0; b < opt.batch; ++b) {
      caches.push_back(dec.new_cache(capacity));
      const std::vector<int32_t> prompt = random_prompt(rng, opt.prompt_len, V);
      const auto t0 = Clock::now();
      const std::vector<float> logits = dec.prefill(caches.back(), prompt);
      prefill_seconds += seconds_since(t0);
      prefill_tokens += opt.prompt_len;
      next.push_back(argmax(logits.data(), V));
    }
    for (SequenceCache& c : caches) ptrs.push_back(&c);
    const double s = timed_decode(dec, ptrs, next, opt.new_tokens);
    r.decode_tokens_per_second_batch = static_cast<double>(opt.batch * opt.new_tokens) / s;
    r.decode_ms_per_step_batch = 1e3 * s / static_cast<double>(opt.new_tokens);
    for (const SequenceCache& c : caches) {
      r.kv_cache_bytes += static_cast<int64_t>(c.kv_bytes());
      r.mamba_state_bytes += static_cast<int64_t>(c.mamba_bytes());
    }
    r.formula_cache_bytes = opt.batch * expected_cache_bytes(cfg, capacity);
  }
  r.prefill_tokens_per_second = static_cast<double>(prefill_tokens) / prefill_seconds;
  r.prefill_activation_bytes = static_cast<int64_t>(dec.prefill_activation_bytes());
  r.decode_activation_bytes = static_cast<int64_t>(dec.step_activation_bytes());

  // Per-token decode time as the context grows (batch 1).
  for (int64_t context : opt.contexts) {
    ContextTiming ct;
    ct.context = context;
    SequenceCache cache = dec.new_cache(context + opt.new_tokens + 1);
    const std::vector<int32_t> prompt = random_prompt(rng, context, V);
    const auto t0 = Clock::now();
    const std::vector<float> logits = dec.prefill(cache, prompt);
    ct.prefill_seconds = seconds_since(t0);
    SequenceCache* one[] = {&cache};
    std::vector<int32_t> next = {argmax(logits.data(), V)};
    ct.decode_ms_per_token = 1e3 * timed_decode(dec, one, next, opt.new_tokens) / static_cast<double>(opt.new_tokens);
    ct.cache_bytes = static_cast<int64_t>(cache.bytes());
    r.contexts.push_back(ct);
  }
  r.quantized_weight_bytes = dec.quantized_bytes();
  // The bytes of the batch-1 step at the bench's first context: weights plus
  // the cache of one sequence of prompt + steps.
  r.decode_bytes_per_token = decode_weight_bytes(model, r.options.weights) + expected_cache_bytes(cfg, capacity);
  r.peak_rss_bytes = peak_rss_bytes();  // before the bandwidth buffer adds its own

  // The bandwidth rounds: decode steps of the kept sequence, then a read of
  // the buffer, so that both meet the machine in the same state.
  ReadBandwidthProbe probe;
  probe.read_once();  // warms up
  for (int round = 0; round < kBandwidthRounds; ++round) {
    InferBenchResult::BandwidthRound br;
    br.decode_tokens_per_second = static_cast<double>(round_steps) / timed_decode(dec, kept, single_next, round_steps);
    br.read_gb_per_second = probe.read_once();
    br.share = br.decode_tokens_per_second * static_cast<double>(r.decode_bytes_per_token) /
               (br.read_gb_per_second * 1e9);
    r.bandwidth_rounds.push_back(br);
  }
  std::vector<InferBenchResult::BandwidthRound> by_share = r.bandwidth_rounds;
  std::sort(by_share.begin(), by_share.end(), [](const auto& a, const auto& b) { return a.share < b.share; });
  const InferBenchResult::BandwidthRound& median = by_share[by_share.size() / 2];
  r.read_gb_per_second = median.read_gb_per_second;
  r.decode_share = median.share;
  for (const int64_t offset : linear_weight_offsets(model.plan()))
    for (const ParamInfo& p : model.params().rows())
      if (p.offset == offset) r.linear_ops_per_token += 2 * p.shape.numel();
  r.linear_ops_per_token += 2 * cfg.vocab_size * cfg.hidden_size;  // the head
  measure_product_peaks(r, cfg.hidden_size);
  return r;
}

nlohmann::json InferBenchResult::to_json() const {
  nlohmann::json by_context = nlohmann::json::array();
  for (const ContextTiming& c : contexts)
    by_context.push_back({{"context", c.context},
                          {"decode_ms_per_token", c.decode_ms_per_token},
                          {"prefill_s", c.prefill_seconds},
                          {"prefill_tokens_per_s", c.prefill_tokens_per_second()},
                          {"cache_bytes", c.cache_bytes}});
  nlohmann::json rounds = nlohmann::json::array();
  for (const BandwidthRound& b : bandwidth_rounds)
    rounds.push_back({{"decode_tokens_per_s", b.decode_tokens_per_second},
                      {"read_gb_per_s", b.read_gb_per_second},
                      {"share", b.share}});
  return {{"threads", threads},
          {"params", params},
          {"weights", to_string(options.weights)},
          {"quantized_weight_bytes", quantized_weight_bytes},
          {"prompt_len", options.prompt_len},
          {"new_tokens", options.new_tokens},
          {"batch", options.batch},
          {"prefill_tokens_per_s", prefill_tokens_per_second},
          {"meta_prefix_s", meta_prefix_seconds},
          {"decode_tokens_per_s_batch1", decode_tokens_per_second_batch1},
          {"decode_threads_batch1", decode_threads_batch1},
          {"decode_tokens_per_s_batch", decode_tokens_per_second_batch},
          {"decode_ms_per_step_batch1", decode_ms_per_step_batch1},
          {"decode_ms_per_step_batch", decode_ms_per_step_batch},
          {"cache_bytes",
           {{"kv", kv_cache_bytes},
            {"mamba", mamba_state_bytes},
            {"total", kv_cache_bytes + mamba_state_bytes},
            {"formula", formula_cache_bytes},
            {"sequences", options.batch},
            {"tokens_per_sequence", options.prompt_len + options.new_tokens + 1}}},
          {"activation_bytes", {{"prefill", prefill_activation_bytes}, {"decode", decode_activation_bytes}}},
          {"contexts", by_context},
          {"decode_bytes_per_token", decode_bytes_per_token},
          {"read_gb_per_s", read_gb_per_second},
          {"bandwidth_limit_tokens_per_s", bandwidth_limit_tokens_per_second()},
          {"decode_share_of_bandwidth", decode_share_of_bandwidth()},
          {"bandwidth_rounds", rounds},
          {"products",
           {{"isa", product_isa},
            {"gemm_f32_gops", gemm_f32_gops},
            {"gemm_q8_gops", gemm_q8_gops},
            {"gemm_q4_gops", gemm_q4_gops},
            {"linear_ops_per_token", linear_ops_per_token},
            {"prefill_gops", prefill_gops()}}},
          {"load_s", load_seconds},
          {"peak_rss_bytes", peak_rss_bytes}};
}

}  // namespace hymba::infer
