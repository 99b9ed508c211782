#include "api/hymba.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "classify/head.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/excerpt.h"
#include "core/json_io.h"
#include "core/threading.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "infer/cache.h"
#include "model/memory_estimate.h"
#include "train/run_state.h"

namespace hymba {

namespace fs = std::filesystem;

namespace {

// Refuses, with the figure and what to lower, a forward whose activations
// would not fit (the weights are loaded already: only the arena is left).
void require_activation_memory(const ModelConfig& config, int64_t batch, int64_t tokens, const std::string& what,
                               const char* lower, const char* operation) {
  MemoryEstimate need;
  need.add("activations for " + what, activation_bytes(config, batch, tokens, false), lower);
  need.require_available(operation);
}

}  // namespace

void set_threads(int n) {
  HYMBA_CHECK(n >= 0, "--threads must be >= 0 (got ", n, ")");
  set_num_threads(n);
}

LanguageModel::LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;
LanguageModel& LanguageModel::operator=(LanguageModel&&) noexcept = default;

namespace {

// Errors raised while a checkpoint loads or its model runs (a model too large
// for memory, non-finite logits or loss from weights that overflow float32)
// come from the checkpoint: name it, where the message does not already.
template <class Fn>
auto naming_source(const std::string& source, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    // Already named (in full, or as an excerpt of a very long path): as is.
    const std::string what = e.what();
    if (source.empty() || what.find(source.substr(0, 60)) != std::string::npos) throw;
    throw Error(excerpt(source, 200) + ": " + what);
  }
}

}  // namespace

LanguageModel::~LanguageModel() = default;

LanguageModel LanguageModel::load_as(const std::string& dir, bool trainable,
                                     std::optional<BlockFormat> hold_floats_as) {
  // Inference keeps weights stored in blocks as blocks (no float32 copy).
  LoadedCheckpoint c =
      naming_source(dir, [&] { return load_checkpoint(dir, trainable, !trainable, hold_floats_as); });
  LanguageModel lm;
  lm.model_ = std::move(c.model);
  lm.tokenizer_ = std::move(c.tokenizer);
  lm.add_bos_ = c.add_bos;
  lm.source_ = c.dir;
  return lm;
}

LanguageModel LanguageModel::load(const std::string& dir, bool trainable) {
  return load_as(dir, trainable, std::nullopt);
}

LanguageModel LanguageModel::load(const std::string& dir, infer::WeightFormat weights) {
  LanguageModel lm = load_as(dir, false, infer::block_format_of(weights));
  lm.set_weight_format(weights);
  return lm;
}

LanguageModel LanguageModel::create(const ModelConfig& config, std::unique_ptr<Tokenizer> tokenizer, uint64_t seed) {
  HYMBA_CHECK(tokenizer != nullptr, "create: no tokenizer given");
  nlohmann::json j = config.to_json();
  j["vocab_size"] = tokenizer->vocab_size();
  LanguageModel lm;
  lm.model_ = std::make_unique<Model>(ModelConfig::from_json(j, "model config"), false);
  lm.model_->init(seed);
  lm.tokenizer_ = std::move(tokenizer);
  return lm;
}

LanguageModel LanguageModel::create(const std::string& preset, Scale scale, uint64_t seed) {
  return create(preset_config(preset, scale), make_byte_tokenizer(), seed);
}

const ModelConfig& LanguageModel::config() const { return model_->config(); }
int64_t LanguageModel::num_params() const { return model_->params().num_params(); }

std::vector<int32_t> LanguageModel::encode(std::string_view text) const { return tokenizer_->encode(text); }
std::string LanguageModel::decode(const std::vector<int32_t>& ids) const { return tokenizer_->decode(ids); }

infer::Generation LanguageModel::generate(const std::string& prompt, const infer::GenerateOptions& options,
                                          const infer::TextCallback& on_text) {
  return generate_batch({prompt}, options, on_text).front();
}

std::vector<int32_t> LanguageModel::encode_prompt(std::string_view text) const {
  std::vector<int32_t> ids = tokenizer_->encode(text);
  HYMBA_CHECK(!ids.empty(), "--prompt: the prompt encodes to no tokens");
  if (add_bos_) ids.insert(ids.begin(), tokenizer_->bos_id());
  return ids;
}

void LanguageModel::require_generation_memory(const std::vector<std::vector<int32_t>>& prompts,
                                              int64_t max_new_tokens, const GenerationLimitNames& names) const {
  // Caches grow to prompt + max_new_tokens tokens when a sequence runs to
  // its limit: refuse now, with the figure, rather than fail midway.
  MemoryEstimate need;
  double cache_bytes = 0;
  int64_t longest = 0;
  for (const auto& p : prompts) {
    const int64_t len = static_cast<int64_t>(p.size());
    cache_bytes += static_cast<double>(infer::expected_cache_bytes(config(), len + max_new_tokens));
    longest = std::max(longest, len);
  }
  need.add("caches of " + std::to_string(prompts.size()) + " sequence(s) x (prompt + " + names.new_tokens + " " +
               std::to_string(max_new_tokens) + ")",
           cache_bytes, names.new_tokens + " or " + names.sequences);
  need.add("prefill activations", activation_bytes(config(), 1, longest, false), names.prompt);
  need.require_available(names.action);
}


std::vector<infer::Generation> LanguageModel::generate_batch(const std::vector<std::string>& texts,
                                                             const infer::GenerateOptions& options,
                                                             const infer::TextCallback& on_text,
                                                             const infer::DoneCallback& on_done,
                                                             infer::GenerateStats* stats) {
  infer::validate(options);
  HYMBA_CHECK(!texts.empty(), "generate: no prompts given");
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < texts.size(); ++i) {
    HYMBA_CHECK(!texts[i].empty(), "--prompt: prompt ", i + 1, " is empty");
    prompts.push_back(encode_prompt(texts[i]));
  }
  require_generation_memory(prompts, options.max_new_tokens);
  if (!decoder_) decoder_ = std::make_unique<infer::Decoder>(*model_, weight_format_);
  return naming_source(source_, [&] {
    return infer::generate(*decoder_, *tokenizer_, prompts, options, on_text, stats, on_done);
  });
}

EvalResult LanguageModel::score(std::string_view text, const ScoreOptions& options) {
  const std::vector<int32_t> ids = tokenizer_->encode(text);
  return score_ids(ids, options);
}

EvalResult LanguageModel::score_ids(std::span<const int32_t> ids, const ScoreOptions& options) {
  HYMBA_CHECK(ids.size() >= 2, "score: ", ids.size(), " token(s); at least two are needed (one to predict)");
  HYMBA_CHECK(options.seq_len >= 0 && options.batch >= 1 && options.max_windows >= 0,
              "score: seq_len and max_windows must be >= 0 and batch >= 1");
  const int64_t seq_len = options.seq_len > 0 ? options.seq_len : static_cast<int64_t>(ids.size()) - 1;
  const int64_t batch = options.seq_len > 0 ? options.batch : 1;
  require_activation_memory(config(), batch, seq_len,
                            "batch " + std::to_string(batch) + " x seq_len " + std::to_string(seq_len),
                            "seq_len or batch", "score");
  return naming_source(source_, [&] { return evaluate(*model_, ids, seq_len, batch, options.max_windows); });
}

std::vector<double> LanguageModel::token_logprobs(std::span<const int32_t> ids) {
  HYMBA_CHECK(ids.size() >= 2, "token_logprobs: ", ids.size(), " token(s); at least two are needed");
  const int64_t T = static_cast<int64_t>(ids.size()) - 1, V = config().vocab_size;
  for (int32_t id : ids) HYMBA_CHECK(id >= 0 && id < V, "token_logprobs: id ", id, " is outside the vocabulary of ", V);
  require_activation_memory(config(), 1, T, std::to_string(T) + " tokens", "the number of ids", "token_logprobs");
  model_->forward(ids.data(), nullptr, 1, T);
  std::vector<double> out(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = model_->logits() + t * V;
    const double top = *std::max_element(row, row + V);
    double sum = 0.0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
    out[static_cast<size_t>(t)] = static_cast<double>(row[ids[static_cast<size_t>(t + 1)]]) - top - std::log(sum);
  }
  return out;
}

std::vector<float> LanguageModel::embedding(std::span<const int32_t> ids, Pooling pooling) {
  HYMBA_CHECK(!ids.empty(), "embedding: no token ids");
  const int64_t T = static_cast<int64_t>(ids.size()), V = config().vocab_size;
  for (int32_t id : ids) HYMBA_CHECK(id >= 0 && id < V, "embedding: id ", id, " is outside the vocabulary of ", V);
  require_activation_memory(config(), 1, T, std::to_string(T) + " tokens", "the number of ids", "embedding");
  ForwardOptions fo;
  fo.hidden_only = true;
  model_->forward(ids.data(), nullptr, 1, T, fo);
  const int64_t M = config().num_memory_tokens, d = config().hidden_size;
  std::vector<float> out(static_cast<size_t>(d));
  classify::pool_forward(out.data(), model_->hidden(), 1, M + T, M, d, &T,
                         pooling == Pooling::kMean ? classify::Pooling::kMean : classify::Pooling::kLast);
  return out;
}

CorpusScore LanguageModel::score_corpus(const CorpusScoreOptions& options) {
  CorpusScore out;
  out.data = options.data;
  out.seq_len = options.seq_len;
  // The run's recipe decides the split (seed, fraction, chunks); a
  // checkpoint without one is split as `hymba train` does by default.
  TrainOptions recipe;
  recipe.seq_len = 0;
  const std::string state_path = run_state_for_checkpoint(source_);
  if (!state_path.empty()) {
    const nlohmann::json state = read_json_file(state_path);
    const JsonFields run = JsonFields(state, state_path).object("run");
    if (out.data.empty()) out.data = run.str("data");
    recipe.seq_len = run.i64("seq_len");
    recipe.val_fraction = run.f64("val_fraction");
    recipe.seed = run.u64("seed");
    if (run.has("data_split")) recipe.data_split = parse_data_split(run.str("data_split"), run.where("data_split"));
    recipe.chunk_last_eos = run.has("chunk_last_target") && run.str("chunk_last_target") == "eos";
  }
  if (out.seq_len == 0) out.seq_len = recipe.seq_len;
  HYMBA_CHECK(!out.data.empty(), "--data: give the text to evaluate on (the checkpoint has no training run record)");
  if (out.seq_len == 0) out.seq_len = 256;
  HYMBA_CHECK(recipe.data_split != DataSplit::kChunksShuffled || out.seq_len == recipe.seq_len, "--seq-len ",
              out.seq_len, ": the run's data_split chunks-shuffled cut chunks of ", recipe.seq_len,
              " tokens; evaluate with --seq-len ", recipe.seq_len);
  DatasetOptions dopt = dataset_options(recipe);
  dopt.with_test = options.test_split;
  const TokenDataset ds = TokenDataset::build(out.data, *tokenizer_, dopt);
  std::vector<int32_t> all;
  std::span<const int32_t> tokens = options.test_split ? ds.test() : ds.val();
  if (options.all_tokens) {
    all.assign(ds.train().begin(), ds.train().end());
    all.insert(all.end(), ds.val().begin(), ds.val().end());
    tokens = all;
  }
  const int64_t stride = ds.window_stride();
  require_activation_memory(config(), options.batch, out.seq_len,
                            "--batch " + std::to_string(options.batch) + " x --seq-len " + std::to_string(out.seq_len),
                            "--batch or --seq-len", "eval");
  out.result = naming_source(source_, [&] {
    if (weight_format_ == infer::WeightFormat::kF32 && !model_->held_format() && !options.keep_top1)
      return evaluate(*model_, tokens, out.seq_len, options.batch, options.max_windows, options.on_progress, stride);
    // Quantized weights (made from float32 or held by the checkpoint) live
    // in the decoder: each window is one prefill of its inputs, every
    // position's logits kept.
    infer::Decoder decoder(*model_, weight_format_);
    decoder.set_quantized_prefill(true);
    infer::SequenceCache cache = decoder.new_cache(out.seq_len);
    return evaluate_logits(
        tokens, out.seq_len, options.max_windows, config().vocab_size,
        [&](std::span<const int32_t> ids, std::vector<float>& logits) { decoder.prefill(cache, ids, &logits); },
        options.on_progress, stride);
  });
  return out;
}

TrainSummary LanguageModel::finetune(const TrainOptions& options) {
  HYMBA_CHECK(options.resume || !source_.empty(),
              "finetune: the model has no checkpoint directory yet; save() it first");
  // A resume continues the run in out_dir from its own checkpoint and --init.
  const TrainSummary summary = hymba::finetune(options.resume ? std::string() : source_, options);
  *this = load(options.out_dir);
  return summary;
}

void LanguageModel::save(const std::string& dir) {
  save_inference_checkpoint(dir, *model_, *tokenizer_);
  // add_bos_token (and an HF tokenizer's special tokens) travel with the tokenizer.
  const fs::path tokenizer_config = fs::path(source_) / "tokenizer_config.json";
  if (!source_.empty() && fs::exists(tokenizer_config) && fs::weakly_canonical(source_) != fs::weakly_canonical(dir))
    write_text_atomic((fs::path(dir) / "tokenizer_config.json").string(), read_file(tokenizer_config.string()));
  source_ = dir;
}

TrainSummary finetune(const std::string& from, TrainOptions options) {
  HYMBA_CHECK(!from.empty() || options.resume, "--init: give the checkpoint to fine-tune");
  options.init_from = from;
  // Keep the thread count chosen with set_threads() (train() applies its own).
  if (options.threads == 0) options.threads = num_threads();
  return train(ModelConfig{}, options);
}

}  // namespace hymba
