// `hymba info`: the build and machine, and a model's size, layers and caches.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/build_info.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "kernels/cpu/gemm_bf16.h"
#include "model/layout.h"
#include "model/summary.h"

namespace hymba::cli {

namespace {

constexpr const char* kDefaultPreset = "hybrid-official";

struct InfoOptions {
  ModelChoice model;
  int64_t seq_len = 8192;
  bool json = false;
};

void print_build(const BuildInfo& b) {
  std::printf("hymba %s (%s build)\n", b.version.c_str(), b.build_type.c_str());
  std::printf("  compiler : %s\n", b.compiler.c_str());
  std::printf("  BLAS     : %s\n", b.blas.c_str());
  std::printf("  kernels  : %s (%s)\n", b.blas_core.c_str(), b.blas_core_choice.c_str());
  std::printf("  threads  : %d of %d hardware threads, OpenMP wait policy %s\n", b.threads, b.hardware_threads,
              b.omp_wait_policy.empty() ? "default" : b.omp_wait_policy.c_str());
  const bool bf16 = cpu::best_bf16_gemm_isa() == cpu::Bf16GemmIsa::kAvx512Bf16;
  std::printf("  bf16     : %s\n", bf16 ? "AVX512-BF16 products (train --precision bf16)"
                                        : "no AVX512-BF16 on this CPU (train --precision bf16 is refused)");
  std::printf("  CUDA     : %s\n", b.cuda_devices.c_str());
  std::printf("  Python   : %s\n", b.python_bindings ? "bindings built (import hymba; docs/python.md)"
                                                     : "not built (needs python3-dev and pybind11-dev)");
}

// Whether MPI is in this build, and the ranks this process runs among.
nlohmann::json mpi_json() {
  const dist::Communicator& w = dist::world();
  return {{"built", dist::mpi_built()}, {"ranks", w.size()}, {"local_ranks", dist::local_ranks()}};
}

void print_mpi() {
  const dist::Communicator& w = dist::world();
  if (!dist::mpi_built())
    std::printf("  MPI      : not built (install libopenmpi-dev; docs/training.md)\n");
  else if (w.size() == 1)
    std::printf("  MPI      : built; one process (mpirun -np N hymba train ... runs N ranks)\n");
  else
    std::printf("  MPI      : built; rank %d of %d (%d on this machine)\n", w.rank(), w.size(), dist::local_ranks());
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void print_model(const std::string& label, const ModelConfig& cfg, const ModelSummary& s) {
  std::printf("\nmodel: %s\n", label.c_str());
  std::printf("  d_model %lld, %lld layers, vocab %lld, %s embeddings\n", static_cast<long long>(cfg.hidden_size),
              static_cast<long long>(cfg.num_hidden_layers), static_cast<long long>(cfg.vocab_size),
              cfg.tie_word_embeddings ? "tied" : "untied");
  std::printf("  parameters: %.3fM (%lld)\n", s.total_params / 1e6, static_cast<long long>(s.total_params));
  for (const auto& [part, n] : s.params_by_part)
    if (n > 0) std::printf("    %-10s %12lld  %5.1f%%\n", part.c_str(), static_cast<long long>(n), 100.0 * n / s.total_params);
  if (s.attn_to_mamba > 0) std::printf("  attention:Mamba parameters = 1:%.2f\n", 1.0 / s.attn_to_mamba);
  std::printf("  layers:\n");
  for (const LayerSummary& l : s.layers) {
    std::printf("    %3lld  %-9s %-12s %s\n", static_cast<long long>(l.index), l.kind.c_str(), l.attention.c_str(),
                l.kv_role.c_str());
  }
  if (cfg.block_layers > 0)
    std::printf("  sequential blocks: %lld of %lld layers, %s link\n",
                static_cast<long long>(cfg.num_hidden_layers / cfg.block_layers),
                static_cast<long long>(cfg.block_layers), to_string(cfg.block_link));
  std::printf("  init: %s\n", describe_init(cfg).c_str());
  if (cfg.num_memory_tokens > 0) std::printf("  meta tokens: %lld\n", static_cast<long long>(cfg.num_memory_tokens));
  if (cfg.norm != NormKind::kRmsNorm || cfg.mlp_activation != MlpActivation::kSwiGlu ||
      cfg.position_embedding == PositionEmbedding::kLearned) {
    std::printf("  norm %s, MLP %s%s, positions %s", to_string(cfg.norm), to_string(cfg.mlp_activation),
                cfg.mlp_bias ? " with biases" : "", to_string(cfg.position_embedding));
    if (cfg.position_embedding == PositionEmbedding::kLearned)
      std::printf(" (%lld, meta tokens first)", static_cast<long long>(cfg.max_position_embeddings));
    std::printf("\n");
  }
  if (cfg.attention_out_bias || cfg.attention_qkv_bias || cfg.attention_scale != AttentionScale::kInvSqrtD)
    std::printf("  attention: logits %s%s%s\n", cfg.attention_scale == AttentionScale::kNone ? "q.k (unscaled)" : "q.k/sqrt(d)",
                cfg.attention_qkv_bias ? ", q/k/v with biases" : "", cfg.attention_out_bias ? ", o_proj with bias" : "");
  bool any_attention = false;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) any_attention = any_attention || cfg.has_attention(l);
  if (any_attention) {
    std::printf("  RoPE: %s", !cfg.rope ? "off" : cfg.rope_ntk ? "ntk" : "default");
    if (cfg.rope) std::printf(", base %.1f", cfg.rope_base());
    if (cfg.sliding_window > 0)
      std::printf("; sliding window %lld: a query sees %lld keys (q - k %s %lld)", static_cast<long long>(cfg.sliding_window),
                  static_cast<long long>(cfg.sliding_window_inclusive ? cfg.sliding_window + 1 : cfg.sliding_window),
                  cfg.sliding_window_inclusive ? "<=" : "<", static_cast<long long>(cfg.sliding_window));
    std::printf("\n");
  }
  std::printf("  cache at %lld tokens: KV %.2f MiB fp16 / %.2f MiB fp32 (%lld positions over producer layers), "
              "Mamba state %.2f MiB fp16 / %.2f MiB fp32, total %.2f MiB fp16\n",
              static_cast<long long>(s.context), mib(s.kv_cache_bytes(2)), mib(s.kv_cache_bytes(4)),
              static_cast<long long>(s.kv_cache_positions), mib(s.mamba_state_bytes(2)), mib(s.mamba_state_bytes(4)),
              mib(s.kv_cache_bytes(2) + s.mamba_state_bytes(2)));
}

}  // namespace

void register_info(CLI::App& app, const GlobalOptions& global) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Show the build and machine, and a model's parameters, layers and cache sizes (default model: " +
                  std::string(kDefaultPreset) + ")");
  add_model_options(cmd, opts->model);
  cmd->add_option("--seq-len", opts->seq_len, "Context length for the cache figures")
      ->check(range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print machine-readable JSON");
  cmd->callback([opts, &global] {
    apply_global_options(global);
    const BuildInfo b = build_info();
    const ModelConfig cfg = resolve_model(opts->model, kDefaultPreset);
    const ModelSummary s = summarize(cfg, opts->seq_len);
    if (opts->json) {
      nlohmann::json build = to_json(b);
      build["mpi"] = mpi_json();
      build["bf16_gemm"] = to_string(cpu::best_bf16_gemm_isa());  // "avx512-bf16" or "portable"
      nlohmann::json out = {{"build", build},
                            {"model", to_json(s)},
                            {"config", cfg.to_json()},
                            {"init", {{"scheme", to_string(cfg.init_scheme)}, {"rules", describe_init(cfg)}}}};
      std::cout << out.dump(2) << "\n";
    } else {
      print_build(b);
      print_mpi();
      print_model(describe(opts->model, kDefaultPreset), cfg, s);
    }
  });
}

}  // namespace hymba::cli
