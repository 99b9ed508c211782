// hymba.cpp as a C++ library: one header for programs that load, run, score
// and fine-tune hybrid attention + Mamba language models. It is a thin layer
// over the engine (the same code the `hymba` command runs), so a result here
// equals the command's for the same inputs. Walk-through: docs/library.md.
//
//   #include "api/hymba.h"
//   hymba::LanguageModel lm = hymba::LanguageModel::load("runs/demo/hymba");
//   hymba::infer::GenerateOptions opt;
//   opt.max_new_tokens = 64;
//   std::cout << lm.generate("Once upon a time", opt).text;
//
// Errors are hymba::Error (core/error.h): one-line messages naming the file,
// field or option (options by their `hymba` flag, e.g. --max-new-tokens for
// GenerateOptions::max_new_tokens). Training also throws hymba::Interrupted
// (train/stop_signal.h) when SIGINT/SIGTERM stops it after a checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "eval/evaluate.h"
#include "infer/generate.h"
#include "infer/weight_format.h"
#include "model/config.h"
#include "model/model.h"
#include "model/presets.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

namespace hymba {

// CPU threads of every kernel, process-wide (0: OMP_NUM_THREADS or all
// cores), as `hymba --threads N`. Results are bit-identical only for the same
// count. Tip: run with OMP_WAIT_POLICY=passive on shared cores (docs/library.md).
void set_threads(int n);

// Scoring of a text or token ids: non-overlapping windows of seq_len + 1
// tokens (seq_len inputs, their next tokens as targets), as `hymba eval`.
struct ScoreOptions {
  int64_t seq_len = 0;      // 0: one window over the whole text
  int64_t batch = 8;        // windows per forward
  int64_t max_windows = 0;  // 0: all
};

// Scoring a corpus exactly as `hymba eval --ckpt DIR` does, defaults included.
struct CorpusScoreOptions {
  std::string data;         // corpus SPEC (data/corpus.h); "": the training run's data
  bool all_tokens = false;  // every token (--split all) instead of the held-out split (--split val)
  bool test_split = false;  // a published test split (--split test: WikiText-103, PG-19)
  int64_t seq_len = 0;      // 0: the training run's, else 256
  int64_t batch = 8;
  int64_t max_windows = 0;  // 0: all
  EvalProgress on_progress;  // optional: windows done / total after each batch
  // Score through the cached decoder even in float32, so that the result's
  // top1 (each position's argmax) is filled: prefill's logits equal the
  // full forward's.
  bool keep_top1 = false;
};
struct CorpusScore {
  EvalResult result;
  std::string data;  // the SPEC scored
  int64_t seq_len = 0;
};

// What a memory refusal of generation tells the user to lower: the
// command's flags by default, a server's request fields when it passes them.
struct GenerationLimitNames {
  std::string new_tokens = "--max-new-tokens";
  std::string sequences = "--batch";
  std::string prompt = "the prompt length";
  std::string action = "generate";  // what needs the memory, as the message says
};

// A language model with its tokenizer. Move-only; not safe to use from
// several threads at once (the kernels are parallel already).
class LanguageModel {
 public:
  // Any directory `hymba generate --ckpt` takes: a training run (its latest
  // checkpoint), a checkpoint of ours, or a published HF Hymba / HF or
  // state-spaces Mamba directory, with tokenizer.model or tokenizer.json.
  // trainable: also allocate gradients and optimizer moments (model().backward()).
  static LanguageModel load(const std::string& dir, bool trainable = false);
  // Loaded for inference in `weights` (set_weight_format(weights)): under
  // q8 / q4 a GGUF file's float (F32 / F16) linear matrices are quantized
  // at load and held, so no float32 copy of them is resident; float work
  // (score, token_logprobs, hidden_states, finetune) is then refused by
  // name, as on a quantized checkpoint.
  static LanguageModel load(const std::string& dir, infer::WeightFormat weights);
  // A freshly initialised model, as `hymba init` / `hymba train` build one:
  // the config's vocab_size becomes the tokenizer's.
  static LanguageModel create(const ModelConfig& config, std::unique_ptr<Tokenizer> tokenizer, uint64_t seed = 1234);
  // The same from a built-in preset (`hymba presets`) with the byte tokenizer.
  static LanguageModel create(const std::string& preset, Scale scale = Scale::kTiny, uint64_t seed = 1234);

  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;
  ~LanguageModel();

  const ModelConfig& config() const;
  int64_t num_params() const;
  // The checkpoint directory it was loaded from or last saved to ("" for a
  // created model not saved yet).
  const std::string& source() const { return source_; }
  // The engine objects, for what this header does not wrap. generate()
  // keeps a decoder between calls (its meta prefix and quantized weights are
  // computed once); model() drops it, so weights changed through the
  // reference it returns show in the next generate() when model() is
  // called again after the change.
  Model& model() {
    decoder_.reset();
    return *model_;
  }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Prompts start with the tokenizer's bos (tokenizer_config.json add_bos_token).
  bool adds_bos() const { return add_bos_; }

  // Plain text to ids and back (no bos/eos added; special tokens decode to nothing).
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  // Continues the prompt as `hymba generate --prompt TEXT` does (same
  // options, same seed, same text). on_text receives the text as soon as it
  // is final, a token or a few at a time.
  infer::Generation generate(const std::string& prompt, const infer::GenerateOptions& options = {},
                             const infer::TextCallback& on_text = {});
  // Continues every prompt, decoding them together; sequence i samples from
  // stream i of options.sampling.seed, so a seed reproduces each sequence
  // whatever the batch. Caches are sized up front and refused, with the
  // figure, when they would not fit in memory. on_done gets each sequence as
  // soon as it finishes; stats (optional) receives timings and cache sizes.
  std::vector<infer::Generation> generate_batch(const std::vector<std::string>& prompts,
                                                const infer::GenerateOptions& options = {},
                                                const infer::TextCallback& on_text = {},
                                                const infer::DoneCallback& on_done = {},
                                                infer::GenerateStats* stats = nullptr);

  // The weight format generate(), score_corpus() and the server use for
  // their linear layers (`--weights`): f32 (the default), q8 or q4
  // (infer/weight_format.h). score_corpus() runs a quantized format through
  // the cached decoder, window by window.
  void set_weight_format(infer::WeightFormat format) {
    if (format != weight_format_) decoder_.reset();
    weight_format_ = format;
  }
  infer::WeightFormat weight_format() const { return weight_format_; }

  // A prompt's ids as generate() feeds them: encoded, with the bos first when
  // adds_bos(). Throws when the text encodes to no tokens.
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  // Throws, with the figure, when caches for these prompts plus
  // max_new_tokens each (and the longest prefill) would not fit in memory.
  void require_generation_memory(const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens,
                                 const GenerationLimitNames& names = {}) const;

  // Loss (nats per token), perplexity and next-token accuracy of a text.
  EvalResult score(std::string_view text, const ScoreOptions& options = {});
  EvalResult score_ids(std::span<const int32_t> ids, const ScoreOptions& options = {});
  // log p(ids[i + 1] | ids[0..i]) for every i: ids.size() - 1 values, from
  // one forward over the whole sequence (at least two ids).
  std::vector<double> token_logprobs(std::span<const int32_t> ids);
  // An embedding of ids (at least one): the final-norm hidden states of the
  // token positions averaged (mean) or the last token's (as `classify`
  // pools), hidden_size floats. Meta tokens are never pooled.
  enum class Pooling { kMean, kLast };
  std::vector<float> embedding(std::span<const int32_t> ids, Pooling pooling = Pooling::kMean);
  // `hymba eval --ckpt DIR [--data SPEC] [--split val|all] ...`.
  CorpusScore score_corpus(const CorpusScoreOptions& options = {});

  // Fine-tunes from source() (save() a created model first) as
  // `hymba train --init SOURCE --out options.out_dir`: a new training run with
  // its checkpoints, metrics and summary; then this object holds the result
  // (the run's latest checkpoint). With options.resume it continues the run
  // in out_dir instead, from that run's own checkpoint and starting point.
  TrainSummary finetune(const TrainOptions& options);

  // Writes config.json, model.safetensors and the tokenizer to dir, which
  // becomes source(); load(dir) and every `--ckpt` flag read it.
  void save(const std::string& dir);

 private:
  LanguageModel();
  // load() of either kind (formats/checkpoint.h's hold_floats_as).
  static LanguageModel load_as(const std::string& dir, bool trainable, std::optional<BlockFormat> hold_floats_as);
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  bool add_bos_ = false;
  std::string source_;
  infer::WeightFormat weight_format_ = infer::WeightFormat::kF32;
  std::unique_ptr<infer::Decoder> decoder_;  // generate()'s, built on first use
};

// Fine-tuning without loading first: a new run in options.out_dir from the
// weights and tokenizer of `from` (any directory LanguageModel::load reads).
// With options.resume, continues that run (`from` may then be "": the run's).
// Training from scratch, or resuming such a run: hymba::train (train/trainer.h).
TrainSummary finetune(const std::string& from, TrainOptions options);

}  // namespace hymba
