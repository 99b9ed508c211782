// `hymba generate`: text from a checkpoint with the cached decoder.
// `hymba bench infer`: prefill/decode throughput, cache and activation memory.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/hymba.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "chat/chat_template.h"
#include "infer/bench.h"
#include "infer/generate.h"
#include "formats/checkpoint.h"
#include "model/memory_estimate.h"
#include "train/run_state.h"

namespace hymba::cli {

namespace {

// One prompt per non-blank line (a trailing '\r' is dropped); "-" reads stdin.
std::vector<std::string> read_prompt_file(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path, std::ios::binary);
    HYMBA_CHECK(file.good(), "--prompt-file ", path, ": cannot read the file");
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  HYMBA_CHECK(!prompts.empty(), "--prompt-file ", path == "-" ? "- (stdin)" : path,
              ": no prompts (the file has no non-blank line)");
  return prompts;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void write_now(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void register_generate(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, prompt, prompt_file, system;
    int64_t batch = 1;
    bool json = false;
    bool chat = false;
    infer::GenerateOptions gen;
    infer::WeightFormat weights = infer::WeightFormat::kF32;
  };
  auto opts = std::make_shared<Options>();
  infer::GenerateOptions& g = opts->gen;
  CLI::App* cmd = app.add_subcommand("generate", "Continue text with a checkpoint (cached decoding)");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint directory (with tokenizer.model or tokenizer.json; published HF/state-spaces layouts too) or training run directory")
      ->required();
  auto* prompt = cmd->add_option("--prompt", opts->prompt, "Text to continue");
  auto* prompt_file =
      cmd->add_option("--prompt-file", opts->prompt_file, "File with one prompt per line ('-' reads stdin)");
  prompt->excludes(prompt_file);
  cmd->add_option("--batch", opts->batch, "Sequences per prompt, each with its own sampling stream")
      ->check(range(int64_t{1}, int64_t{4096}))->capture_default_str();
  cmd->add_option("--max-new-tokens", g.max_new_tokens, "Tokens to generate at most per sequence")
      ->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--temperature", g.sampling.temperature, "Softmax temperature (0 = greedy)")
      ->check(range(0.0, 1e6))->capture_default_str();
  cmd->add_option("--top-k", g.sampling.top_k, "Sample among the k most likely tokens (0 = all)")
      ->check(range(int64_t{0}, int64_t{1} << 30))->capture_default_str();
  // 0 keeps no token at all, so the range is (0, 1] in the help and in the check.
  const auto top_p_range = [](std::string& text) -> std::string {
    double v = 0.0;
    try {
      size_t used = 0;
      v = std::stod(text, &used);
      if (used != text.size()) return "'" + text + "' is not a number";
    } catch (const std::exception&) {
      return "'" + text + "' is not a number";
    }
    return v > 0.0 && v <= 1.0 ? std::string() : "Value " + text + " not in range (0 - 1]";
  };
  cmd->add_option("--top-p", g.sampling.top_p, "Nucleus: the most likely tokens holding this probability (1 = all)")
      ->check(CLI::Validator(top_p_range, "(0 - 1]", "top-p range"))->capture_default_str();
  add_sampling_extras(cmd, g.sampling);
  cmd->add_option("--seed", g.sampling.seed, "Sampling seed (sequence i draws from stream i)")->capture_default_str();
  cmd->add_option("--stop", g.stop, "Stop a sequence when its text contains STR (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--chat", opts->chat,
                "Each prompt is one user message, formatted by the checkpoint's chat template (docs/serve.md)");
  cmd->add_option("--system", opts->system, "With --chat: a system message before each prompt");
  cmd->add_flag("--json", opts->json,
                "One JSON object per line and sequence, in prompt order: ids, text, finish reason, timings");
  add_weights_option(cmd, opts->weights);
  cmd->callback([opts, prompt, &global] {
    apply_global_options(global);
    infer::validate(opts->gen);
    std::vector<std::string> texts;
    if (!opts->prompt_file.empty()) {
      texts = read_prompt_file(opts->prompt_file);
    } else {
      HYMBA_USAGE_CHECK(prompt->count() > 0, "--prompt: give the text to continue (or --prompt-file FILE)");
      HYMBA_USAGE_CHECK(!opts->prompt.empty(), "--prompt: the prompt is empty");
      texts.push_back(opts->prompt);
    }
    HYMBA_USAGE_CHECK(opts->chat || opts->system.empty(), "--system: only with --chat");
    LanguageModel lm = LanguageModel::load(opts->ckpt, opts->weights);
    check_logit_bias(opts->gen.sampling, lm.config().vocab_size);
    // --chat: the model continues the rendered conversation, and only its
    // reply is printed (no echo of the prompt).
    std::vector<std::string> inputs = texts;
    if (opts->chat) {
      const ChatTemplate chat_template = ChatTemplate::for_checkpoint(lm.source());
      for (std::string& input : inputs) {
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        if (!opts->system.empty()) messages.push_back({{"role", "system"}, {"content", opts->system}});
        messages.push_back({{"role", "user"}, {"content", input}});
        input = chat_template.render_prompt(messages, lm.adds_bos());
      }
    }
    const auto echo = [&](size_t i) { return opts->chat ? std::string() : texts[i]; };
    std::vector<std::string> prompts;  // --batch copies of each input
    std::vector<size_t> source;        // which text each sequence continues
    for (size_t i = 0; i < inputs.size(); ++i)
      for (int64_t k = 0; k < opts->batch; ++k) {
        prompts.push_back(inputs[i]);
        source.push_back(i);
      }

    // One sequence streams as it goes, its prompt echoed with the first text
    // so errors found before any token print alone; several sequences (or
    // --json) print in prompt order once all are done.
    const bool stream = prompts.size() == 1 && !opts->json;
    bool echoed = false;
    infer::TextCallback on_text;
    if (stream) {
      on_text = [&](int64_t, std::string_view text) {
        if (!echoed) write_now(echo(0));
        echoed = true;
        write_now(text);
      };
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> finished_after(prompts.size(), 0.0);  // seconds from the start, per sequence
    const infer::DoneCallback on_done = [&](int64_t i, const infer::Generation&) {
      finished_after[static_cast<size_t>(i)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    infer::GenerateStats stats;
    const std::vector<infer::Generation> out = lm.generate_batch(prompts, opts->gen, on_text, on_done, &stats);
    if (stream) {
      if (!echoed) write_now(echo(0));
      write_now("\n");
    }
    for (size_t i = 0; i < out.size() && !stream; ++i) {
      const infer::Generation& done = out[i];
      const size_t from = source[i];
      if (opts->json) {
        nlohmann::json line = {{"sequence", i},
                                     {"prompt_index", from},
                                     {"prompt", texts[from]},
                                     {"prompt_ids", done.prompt},
                                     {"ids", done.tokens},
                                     {"text", done.text},
                                     {"finish_reason", infer::to_string(done.finish)},
                                     {"seconds", finished_after[i]},
                                     {"batch_prefill_seconds", stats.prefill_seconds},
                                     {"batch_decode_seconds", stats.decode_seconds}};
        if (opts->chat) line["chat_prompt"] = inputs[from];  // the rendered conversation the model continued
        write_now(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        continue;
      }
      std::printf("=== sequence %zu/%zu (prompt %zu, %zu tokens, finished: %s) ===\n", i + 1, prompts.size(),
                  from + 1, done.tokens.size(), infer::to_string(done.finish));
      write_now(echo(from));
      write_now(done.text);
      write_now("\n");
    }
    std::fprintf(stderr,
                 "%lld new tokens in %.2f s: %.1f tok/s (prefill %lld prompt tokens at %.0f tok/s, decode %.1f tok/s "
                 "with %zu sequence%s); cache %s\n",
                 static_cast<long long>(stats.new_tokens), stats.prefill_seconds + stats.decode_seconds,
                 stats.tokens_per_second(), static_cast<long long>(stats.prompt_tokens),
                 stats.prefill_tokens_per_second(), stats.decode_tokens_per_second(), out.size(),
                 out.size() == 1 ? "" : "s",
                 mib(stats.kv_cache_bytes + stats.mamba_state_bytes).c_str());
  });
}

void register_bench_infer(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    ModelChoice model;
    std::string ckpt;
    uint64_t init_seed = 1234;
    infer::InferBenchOptions bench;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  // `bench` may already hold other benchmarks.
  CLI::App* bench = nullptr;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == "bench") bench = sub;
  if (bench == nullptr) {
    bench = app.add_subcommand("bench", "Benchmarks of whole-model workloads");
    bench->require_subcommand(1);
  }
  CLI::App* cmd =
      bench->add_subcommand("infer", "Prefill/decode speed, cache and activation memory of cached decoding");
  add_model_options(cmd, opts->model);
  auto* ckpt = cmd->add_option("--ckpt", opts->ckpt, "Checkpoint or run directory (instead of --preset/--config)");
  ckpt->excludes("--preset")->excludes("--config")->excludes("--init-scheme");
  infer::InferBenchOptions& b = opts->bench;
  cmd->add_option("--prompt-len", b.prompt_len, "Prompt tokens per sequence")
      ->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--new-tokens", b.new_tokens, "Decode steps timed")
      ->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--batch", b.batch, "Sequences decoded together")
      ->check(range(int64_t{1}, int64_t{4096}))->capture_default_str();
  cmd->add_option("--contexts", b.contexts, "Contexts for the per-token decode time, e.g. 256,1024,4096")
      ->delimiter(',')->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--seed", opts->init_seed, "Initialisation seed for --preset/--config")->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print JSON");
  add_weights_option(cmd, b.weights);
  cmd->callback([opts, &global] {
    apply_global_options(global);
    std::unique_ptr<Model> model;
    std::string what;
    const auto load_start = std::chrono::steady_clock::now();
    if (!opts->ckpt.empty()) {
      what = resolve_checkpoint(opts->ckpt);
      model = load_model(what, false, /*keep_blocks=*/true, infer::block_format_of(opts->bench.weights));
    } else {
      model = std::make_unique<Model>(resolve_model(opts->model), false);
      model->init(opts->init_seed);
      what = describe(opts->model);
    }
    const double load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    {
      // The weights are allocated; the caches and the longest prefill are not.
      const infer::InferBenchOptions& o = opts->bench;
      const ModelConfig& cfg = model->config();
      int64_t longest = o.prompt_len;
      double context_cache = 0;
      for (int64_t c : o.contexts) {
        longest = std::max(longest, c);
        context_cache = std::max(context_cache,
                                 static_cast<double>(infer::expected_cache_bytes(cfg, c + o.new_tokens + 1)));
      }
      MemoryEstimate need;
      need.add("caches for --batch " + std::to_string(o.batch),
               static_cast<double>(o.batch) *
                   static_cast<double>(infer::expected_cache_bytes(cfg, o.prompt_len + o.new_tokens + 1)),
               "--batch, --prompt-len or --new-tokens");
      need.add("the largest --contexts cache", context_cache, "--contexts");
      need.add("prefill activations", activation_bytes(cfg, 1, longest, false), "--prompt-len or --contexts");
      need.require_available("bench infer");
    }
    infer::InferBenchResult r = infer::run_infer_bench(*model, opts->bench);
    r.load_seconds = load_seconds;
    if (opts->json) {
      nlohmann::json j = r.to_json();
      j["model"] = what;
      std::cout << j.dump(2) << "\n";
      return;
    }
    const infer::InferBenchOptions& o = r.options;
    std::printf("model: %s, %.3fM params, %d threads, --weights %s", what.c_str(), static_cast<double>(r.params) / 1e6,
                r.threads, to_string(o.weights));
    if (model->held_format())
      std::printf(" (%s of %s weights held in blocks: the checkpoint's, or its float ones quantized at load)",
                  mib(r.quantized_weight_bytes).c_str(), to_string(o.weights));
    else if (r.quantized_weight_bytes > 0)
      std::printf(" (%s of %s weights%s)", mib(r.quantized_weight_bytes).c_str(), to_string(o.weights),
                  o.weights == infer::WeightFormat::kBF16 ? "; prefill chunks on the float32 ones" : "");
    std::printf("\n");
    std::printf("load: %.2f s (%s); peak RSS %.2f GB\n", r.load_seconds,
                opts->ckpt.empty() ? "random init" : "checkpoint", static_cast<double>(r.peak_rss_bytes) / 1e9);
    std::printf("prefill: %.0f tok/s (prompts of %lld tokens, one at a time, from the meta prefix", r.prefill_tokens_per_second,
                static_cast<long long>(o.prompt_len));
    if (r.meta_prefix_seconds > 0)
      std::printf(" computed once in %.3f s", r.meta_prefix_seconds);
    std::printf(")\n");
    std::printf("decode: batch 1 %.1f tok/s (%.2f ms/token, settled on %d thread%s); batch %lld %.1f tok/s (%.2f ms/step)\n",
                r.decode_tokens_per_second_batch1, r.decode_ms_per_step_batch1, r.decode_threads_batch1,
                r.decode_threads_batch1 == 1 ? "" : "s", static_cast<long long>(o.batch),
                r.decode_tokens_per_second_batch, r.decode_ms_per_step_batch);
    std::printf("cache: KV %s + Mamba state %s for %lld sequences of %lld tokens (formula %s)\n",
                mib(r.kv_cache_bytes).c_str(), mib(r.mamba_state_bytes).c_str(), static_cast<long long>(o.batch),
                static_cast<long long>(o.prompt_len + o.new_tokens + 1), mib(r.formula_cache_bytes).c_str());
    std::printf("activations: prefill peak %s, decode step peak %s\n", mib(r.prefill_activation_bytes).c_str(),
                mib(r.decode_activation_bytes).c_str());
    std::printf("bandwidth: decode reads %.3f GB per token; streaming read %.1f GB/s on %d threads allows %.1f "
                "tok/s; batch-1 decode runs at %.0f %% of it\n",
                static_cast<double>(r.decode_bytes_per_token) / 1e9, r.read_gb_per_second, r.threads,
                r.bandwidth_limit_tokens_per_second(), 100.0 * r.decode_share_of_bandwidth());
    std::printf("products: prefill runs %.1f GOP/s of linear layers and head; [256, %lld] x [%lld, %lld] peaks in "
                "this run: float32 (sgemm) %.1f, q8 blocks %.1f, q4 blocks %.1f GOP/s (%s)\n",
                r.prefill_gops(), static_cast<long long>(model->config().hidden_size),
                static_cast<long long>(model->config().hidden_size), static_cast<long long>(model->config().hidden_size),
                r.gemm_f32_gops, r.gemm_q8_gops, r.gemm_q4_gops, r.product_isa);
    std::printf("%9s %11s %15s %17s %12s\n", "context", "prefill s", "prefill tok/s", "decode ms/token", "cache");
    for (const infer::ContextTiming& c : r.contexts)
      std::printf("%9lld %11.3f %15.1f %17.3f %12s\n", static_cast<long long>(c.context), c.prefill_seconds,
                  c.prefill_tokens_per_second(), c.decode_ms_per_token, mib(c.cache_bytes).c_str());
  });
}

}  // namespace hymba::cli
