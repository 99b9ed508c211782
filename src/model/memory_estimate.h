// What a command will allocate, estimated before it allocates: parameters,
// gradients, AdamW moments, the activation arena and inference caches. The
// commands compare the total with available_memory_bytes() and refuse, naming
// the figure and what to lower, rather than die in std::bad_alloc midway.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/params.h"
#include "model/config.h"

namespace hymba {

struct MemoryEstimate {
  struct Part {
    std::string what;   // "parameters", "activations for --batch 8 x --seq-len 128"
    double bytes = 0;   // double: absurd sizes must not wrap around
    std::string lower;  // the flag or field that shrinks it
  };
  std::vector<Part> parts;

  double total() const;
  void add(std::string what, double bytes, std::string lower);
  void add(const MemoryEstimate& other);
  // Throws hymba::Error when the total exceeds the memory available:
  // "ACTION needs about 9.3 GiB (parameters 1.2 GiB, ...) but 4.0 GiB is
  //  available; lower LOWER" (LOWER: that of the largest part).
  void require_available(const std::string& action) const;
};

// Parameter values, plus gradients and the two AdamW moments when training,
// of a declared (not necessarily allocated) table.
MemoryEstimate parameter_memory(const ParamTable& table, bool training);
// The number of floats declare_parameters() would declare for a resolved
// config, computed from its dimensions alone (a double: no overflow) in
// O(layers) without building the table. Equal to the declared table's
// total_floats() (tests check every preset).
double parameter_floats(const ModelConfig& cfg);
// parameter_memory() from the config alone, so that a config whose weights
// cannot fit is refused before any table is declared or allocated.
MemoryEstimate parameter_memory(const ModelConfig& cfg, bool training);
// The activation arena's high-water mark for one forward on [B, T] tokens,
// plus the backward when training (what Model::activation_bytes() reports),
// exactly: the arena's own plan (model/arena_plan.h) run on a sizing arena.
// Training forwards use dropout when the config has it; inference ones keep
// the final SSM state (the decoder's prefill). With recompute (training only,
// ForwardOptions::recompute) the kept layer inputs and gradients plus the
// largest layer's activations and temporaries. Runs too large for any
// machine (over 2^40 rows) get a lower bound instead.
double activation_bytes(const ModelConfig& cfg, int64_t B, int64_t T, bool training, bool recompute = false);
// Parameters and arena of a training or evaluation run at [B, T]; `flags`
// names the batch and length flags in messages ("--batch", "--seq-len").
MemoryEstimate model_run_memory(const ModelConfig& cfg, int64_t B, int64_t T, bool training,
                                const std::string& batch_flag = "--batch", const std::string& len_flag = "--seq-len",
                                bool recompute = false);

}  // namespace hymba
