// `hymba bench infer`: prefill and decode throughput of the cached decoder,
// cache and activation memory, and the per-token decode time as the context
// grows (flat for sliding-window and Mamba layers, linear for global ones).
// Prompts are random token ids; decoding is greedy so runs are repeatable.
#pragma once

#include <cstdint>
#include <vector>

#include "infer/weight_format.h"

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace hymba::infer {

struct InferBenchOptions {
  int64_t prompt_len = 256;
  int64_t new_tokens = 64;
  int64_t batch = 16;
  std::vector<int64_t> contexts = {256, 1024, 4096};
  uint64_t seed = 1234;  // prompt ids
  WeightFormat weights = WeightFormat::kF32;  // the decode steps' linear layers (--weights)
};

struct ContextTiming {
  int64_t context = 0;
  double prefill_seconds = 0.0;  // one prompt of `context` tokens
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? context / prefill_seconds : 0.0; }
  double decode_ms_per_token = 0.0;  // batch 1, averaged over new_tokens steps
  int64_t cache_bytes = 0;           // this sequence's cache (sized for context + new_tokens)
};

struct InferBenchResult {
  InferBenchOptions options;
  int threads = 0;
  int64_t params = 0;
  int64_t quantized_weight_bytes = 0;  // the decoder's q8 copies of its linear weights (0 for f32)
  double prefill_tokens_per_second = 0.0;        // one prompt at a time (how generation prefills)
  // The meta tokens through every layer, once per decoder (before the timed
  // prefills, which start from the stored prefix); 0 without meta tokens.
  double meta_prefix_seconds = 0.0;
  double decode_tokens_per_second_batch1 = 0.0;
  // The threads batch-1 steps settled on (Decoder::step_threads; 0: still timing).
  int decode_threads_batch1 = 0;
  double decode_tokens_per_second_batch = 0.0;   // options.batch sequences per step
  double decode_ms_per_step_batch1 = 0.0, decode_ms_per_step_batch = 0.0;
  int64_t kv_cache_bytes = 0;      // measured: allocated by the batch run's caches
  int64_t mamba_state_bytes = 0;
  int64_t formula_cache_bytes = 0; // summary.h's formula for the same caches
  int64_t prefill_activation_bytes = 0, decode_activation_bytes = 0;
  std::vector<ContextTiming> contexts;

  // The bandwidth bar: bytes a batch-1 decode step reads (every weight in
  // its format, the head in its own, the embedding's one row, the
  // sequence's cache), the machine's streaming read speed with the same
  // threads, and the tokens per second that speed allows.
  //
  // A shared machine's read speed drifts by a third within a minute, so the
  // share is taken in rounds that alternate batch-1 decode steps with reads
  // of the bandwidth buffer: each round's decode speed against the speed
  // read next to it, and the median round is reported (read_gb_per_second
  // is the median round's read).
  struct BandwidthRound {
    double decode_tokens_per_second = 0.0;
    double read_gb_per_second = 0.0;
    double share = 0.0;  // decode against the limit this round's read allows
  };
  std::vector<BandwidthRound> bandwidth_rounds;
  int64_t decode_bytes_per_token = 0;
  double read_gb_per_second = 0.0;
  double decode_share = 0.0;
  double bandwidth_limit_tokens_per_second() const {
    return decode_bytes_per_token > 0 ? read_gb_per_second * 1e9 / static_cast<double>(decode_bytes_per_token) : 0.0;
  }
  double decode_share_of_bandwidth() const { return decode_share; }
  // The products prefill runs, beside what the kernels reach in the same run:
  // GOP/s (2 x rows x C x OC per second) of a [256, d] x [d, d] product with
  // d the model's hidden size, on float32 weights (sgemm) and on packed q8 /
  // q4 blocks (the many-row block kernels, kernels/cpu/quant_gemm.cpp, on
  // product_isa), the best of three after a warm-up; and the operations of
  // the linear layers and head per prefilled token (2 x their weights), so
  // prefill_gops() is prefill's rate in the same unit.
  double gemm_f32_gops = 0.0, gemm_q8_gops = 0.0, gemm_q4_gops = 0.0;
  const char* product_isa = "";
  int64_t linear_ops_per_token = 0;
  double prefill_gops() const { return prefill_tokens_per_second * static_cast<double>(linear_ops_per_token) / 1e9; }
  // The process's peak resident memory at the end of the timed runs (model,
  // caches, activations), and the load (or init) time, set by the caller.
  int64_t peak_rss_bytes = 0;
  double load_seconds = 0.0;

  nlohmann::json to_json() const;
};

// Bytes a batch-1 decode step reads from memory with `dec`'s weight format:
// what bench infer compares decode with.
int64_t decode_weight_bytes(const Model& model, WeightFormat format);

// The machine's streaming read speed in GB/s, on the current thread count:
// sums over a buffer far larger than the caches.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe();  // fills the 512 MiB buffer (every page touched)
  double read_once();    // one timed pass; checks its sum
 private:
  std::vector<uint64_t> buf_;
};

// The best of three passes after a warm-up one.
double measure_read_bandwidth();

// This process's peak resident memory so far (0 where unknown).
int64_t peak_rss_bytes();

InferBenchResult run_infer_bench(Model& model, const InferBenchOptions& opt);

}  // namespace hymba::infer
