// Where a training step's time goes (`hymba train --profile`): the gradient
// pass (forward and backward) and the optimizer per step, the linear layers'
// matrix products among them (kernels/cpu/matmul_trace.h), and the same
// products' peak: each shape the steps multiplied, replayed alone in a hot
// loop after training in the run's precision. The share of that peak the
// steps reached says how much faster the products could run as they are
// called; the products' share of the step says how much that matters.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_trace.h"

namespace hymba {

struct StepProfile {
  // The first steps fault in the activation arena's pages and warm the
  // caches: they are left out.
  static constexpr int64_t kSkippedSteps = 2;

  int64_t steps = 0;  // profiled steps
  // Sums over the profiled steps. forward_s is measured where the forward
  // and backward of a micro-batch run apart (not under --grad-shards, whose
  // shards interleave them: then it stays 0).
  double step_s = 0.0, gradients_s = 0.0, forward_s = 0.0, optimizer_s = 0.0;
  cpu::MatmulTrace products;
};

// The profile's figures per step, after replaying each product shape
// `replays` times in `precision` (the fastest run counts) to measure the peak.
// Keys: steps, step_s, gradients_s, forward_s, backward_s, optimizer_s,
// products_s, products_share, products_gflops, peak_gflops, peak_share and
// shapes (one record per shape, slowest first).
nlohmann::json profile_report(const StepProfile& p, cpu::MatmulPrecision precision, int replays = 5);

// The report as lines for a terminal.
std::string profile_text(const nlohmann::json& report);

}  // namespace hymba
