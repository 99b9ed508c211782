// `hymba serve`: OpenAI-style completions over HTTP (docs/serve.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "api/hymba.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "formats/checkpoint.h"
#include "serve/server.h"
#include "train/stop_signal.h"

namespace hymba::cli {

void register_serve(CLI::App& app, const GlobalOptions& global) {
  struct Options {
    std::string ckpt, name;
    serve::ServeOptions serve;
    int threads = -1;  // -1: the global --threads
    infer::WeightFormat weights = infer::WeightFormat::kF32;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a checkpoint over HTTP: OpenAI-style /v1/completions, /v1/chat/completions, /v1/embeddings, and Ollama's /api/*");
  cmd->add_option("--ckpt", opts->ckpt, "Checkpoint or training run directory (as `hymba generate --ckpt`)")
      ->required();
  cmd->add_option("--host", opts->serve.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opts->serve.port, "TCP port (0 = any free port)")
      ->check(range(0, 65535))->capture_default_str();
  cmd->add_option("--max-batch", opts->serve.max_batch, "Sequences decoded together at most (across requests)")
      ->check(range(int64_t{1}, int64_t{4096}))->capture_default_str();
  cmd->add_option("--prefill-chunk", opts->serve.prefill_chunk,
                  "Prompt tokens prefilled between two decode steps: a long prompt is fed in chunks this size, "
                  "interleaved with the other sequences' decoding")
      ->check(range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--context", opts->serve.context,
                  "Tokens one sequence may hold, prompt and completion together; a request asking for more gets "
                  "HTTP 400 (0: the model's context: max_position_embeddings less meta tokens, else 16384)")
      ->check(range(int64_t{0}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--max-prompt-tokens", opts->serve.max_prompt_tokens,
                  "Longest prompt accepted, in tokens (longer: HTTP 400)")
      ->check(range(int64_t{1}, int64_t{1} << 24))->capture_default_str();
  cmd->add_option("--max-sequences-per-request", opts->serve.max_sequences_per_request,
                  "Most sequences (prompts x n) one request may ask for (more: HTTP 400)")
      ->check(range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--max-queue", opts->serve.max_queue,
                  "Sequences that may wait for a decode slot; a request arriving past it gets HTTP 429")
      ->check(range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  cmd->add_option("--max-concurrent-requests", opts->serve.max_concurrent_requests,
                  "Completions (streamed or not) served at once; one arriving past it gets HTTP 429")
      ->check(range(int64_t{1}, int64_t{4096}))->capture_default_str();
  cmd->add_option("--cors-origin", opts->serve.cors_origin,
                  "Send Access-Control-Allow-Origin with this value (e.g. '*') and answer OPTIONS preflights");
  cmd->add_option("--threads", opts->threads, "CPU threads for kernels (default: the global --threads)")
      ->check(range(0, 4096));
  add_weights_option(cmd, opts->weights);
  cmd->add_option_function<std::string>(
         "--embedding-pooling",
         [opts](const std::string& v) { opts->serve.embedding_mean = v == "mean"; },
         "/v1/embeddings: average the tokens' final hidden states (mean) or take the last token's (last)")
      ->check(CLI::IsMember({"mean", "last"}))->default_str("mean");
  cmd->add_option("--model-name", opts->name, "Model id in /v1/models and responses (default: the directory's name)");
  cmd->callback([opts, &global] {
    GlobalOptions g = global;
    if (opts->threads >= 0) g.threads = opts->threads;
    apply_global_options(g);
    HYMBA_CHECK(std::filesystem::is_directory(opts->ckpt) || is_gguf_file(opts->ckpt), "--ckpt ", opts->ckpt,
                ": no such directory or .gguf file");
    LanguageModel lm = LanguageModel::load(opts->ckpt);
    lm.set_weight_format(opts->weights);
    serve::ServeOptions so = opts->serve;
    so.model_name = opts->name;
    if (so.model_name.empty()) so.model_name = serve::default_model_name(opts->ckpt);
    so.log = true;
    serve::Server server(lm, so);
    if (!server.chat_template_error().empty())  // completions are still served
      std::fprintf(stderr, "hymba serve: warning: /v1/chat/completions is unavailable: %s\n",
                   server.chat_template_error().c_str());
    const int port = server.bind();
    // The one line scripts wait for: the address, then the model.
    std::printf("hymba serve: listening on http://%s:%d (model %s, max batch %lld, context %lld)\n", so.host.c_str(),
                port, so.model_name.c_str(), static_cast<long long>(so.max_batch),
                static_cast<long long>(server.options().context));
    std::fflush(stdout);
    StopSignals signals;
    std::thread listener([&] { server.listen(); });
    while (StopSignals::received() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::fprintf(stderr, "hymba serve: signal %d, shutting down\n", StopSignals::received());
    server.stop();
    listener.join();
  });
}

}  // namespace hymba::cli
