#include "train/run_recipe.h"
#include "tokenizer/train/train_tokenizer.h"

#include <algorithm>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threading.h"
#include "tokenizer/tokenizer_files.h"

namespace hymba {

using nlohmann::json;

namespace {

// The command-line spelling of a recipe key, for messages.
std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

}  // namespace

// The whole recipe: every option that changes the weights a run produces.
// It is stored in each checkpoint's train_state.json ("run"), and a resume
// that would change any of it is refused by name. Not in it: --steps and
// --epochs (a run may be extended), the log/eval/save intervals and eval
// windows (they do not touch the weights), the thread count (see
// resume_checks()) and a --tokenizer file's path (its content is compared).
json run_recipe(const TrainOptions& o, double dropout) {
  json j = recipe_core_json(o);
  // A tokenizer given as a file, or brought by --init, is not built by the recipe.
  const bool builds_tokenizer = o.tokenizer_path.empty() && o.init_from.empty();
  j.update(json{{"data", o.data},
                {"init", o.init_from},
                {"tokenizer_type", builds_tokenizer ? o.tokenizer_type : std::string()},
                {"tokenizer_vocab", builds_tokenizer && o.tokenizer_type != "byte" ? o.tokenizer_vocab : 0},
                {"eps", o.adamw.eps},
                {"dropout", dropout},  // the one in effect: --dropout or the model config's
                {"grad_shards", o.grad_shards},
                {"weight_decay_scope", o.adamw.decay_all ? "all" : "matrices"},
                {"data_split", to_string(o.data_split)},
                {"batching", batching_name(o.batching_epochs)},
                {"chunk_last_target", chunk_last_target_name(o.chunk_last_eos)},
                {"precision", cpu::to_string(o.precision)},
                {"threads", num_threads()}});
  if (builds_tokenizer && o.tokenizer_type == "byte-level-bpe") {
    j["tokenizer_min_frequency"] = o.tokenizer_min_frequency;
    j["tokenizer_corpus_alphabet"] = o.tokenizer_corpus_alphabet;
  }
  return j;
}

// Refuses a resume whose recipe or model differs from the run's, naming every
// change. A different thread count is allowed with a warning: reductions are
// split by thread, so results are bit-identical only for the same count.
void resume_checks(const JsonFields& saved, const json& now, const ModelConfig* asked_model,
                   const ModelConfig& run_model, const std::string& tokenizer_path, const std::string& run_tokenizer,
                   std::FILE* log) {
  std::string changes;
  // The first few differences, then a count: the message stays one short line.
  constexpr int kShown = 3;
  int differences = 0;
  auto note_change = [&](const std::string& name, const json& was, const json& is) {
    if (++differences <= kShown)
      changes += (changes.empty() ? "" : ", ") + name + " " + json_excerpt(was, 40) + " -> " + json_excerpt(is, 40);
  };
  if (!tokenizer_path.empty() && read_file(tokenizer_path) != read_file(run_tokenizer))
    changes += std::string(changes.empty() ? "" : ", ") + "--tokenizer " + tokenizer_path + " is not the run's tokenizer";
  for (auto it = now.begin(); it != now.end(); ++it) {
    const std::string& key = it.key();
    if (key == "threads" || !saved.has(key.c_str())) continue;  // checkpoints of older builds lack some keys
    // A --tokenizer file is compared by content above, whatever built the run's.
    if (!tokenizer_path.empty() && key.rfind("tokenizer_", 0) == 0) continue;
    const json& was = saved.at(key.c_str());
    const bool same = was.is_number() && it.value().is_number() ? was.get<double>() == it.value().get<double>()
                                                                : was == it.value();
    if (!same) note_change(flag_of(key), was, it.value());
  }
  if (asked_model != nullptr) {
    const json a = run_model.to_json(), b = asked_model->to_json();
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()) || a[it.key()] != it.value())
        note_change("model " + it.key(), a.value(it.key(), json()), it.value());
  }
  if (differences > kShown) changes += " and " + std::to_string(differences - kShown) + " more";
  HYMBA_CHECK(changes.empty(), "--resume: the run was trained with other settings: ", changes,
              " (resume with the run's values, or start a new run with another --out)");
  if (saved.has("threads")) {
    const int64_t was = saved.i64("threads");
    if (was != now.at("threads").get<int64_t>() && log != nullptr)
      std::fprintf(log,
                   "note: this run used %lld thread(s), now %d: results stay correct but are not bit-identical to an "
                   "uninterrupted run (pass --threads %lld for that)\n",
                   static_cast<long long>(was), num_threads(), static_cast<long long>(was));
  }
}

SavedState read_train_state(const JsonFields& f) {
  SavedState s;
  s.step = f.i64("step");
  HYMBA_CHECK(s.step >= 1, f.where("step"), " must be >= 1 (got ", s.step, ")");
  s.tokens = f.i64("tokens");
  s.best_step = f.i64("best_step");
  s.best_val_loss = f.f64_or_null("best_val_loss", INFINITY);  // null: no evaluation yet
  s.train_seconds = f.f64("train_seconds");
  s.final_train_loss = f.f64("final_train_loss");
  s.final_val_loss = f.f64("final_val_loss");
  s.final_val_accuracy = f.f64("final_val_accuracy");
  return s;
}

void validate_train_options(const TrainOptions& o) {
  HYMBA_CHECK(!o.out_dir.empty(), "--out: a run directory is required");
  HYMBA_CHECK(o.init_from.empty() || o.tokenizer_path.empty(),
              "--tokenizer: not with --init (the run uses the tokenizer of ", o.init_from, ")");
  if (o.tokenizer_path.empty()) (void)parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  HYMBA_CHECK(o.batch >= 1, "--batch must be >= 1 (got ", o.batch, ")");
  HYMBA_CHECK(o.seq_len >= 1, "--seq-len must be >= 1 (got ", o.seq_len, ")");
  HYMBA_CHECK(o.grad_accum >= 1, "--grad-accum must be >= 1 (got ", o.grad_accum, ")");
  HYMBA_CHECK(o.grad_shards >= 0, "--grad-shards must be >= 0 (0: off; got ", o.grad_shards, ")");
  HYMBA_CHECK(o.steps >= 0, "--steps must be >= 0");
  HYMBA_CHECK(o.epochs >= 0, "--epochs must be >= 0");
  HYMBA_CHECK(o.stop_epochs >= 0, "--stop-epochs must be >= 0");
  HYMBA_CHECK(o.lr > 0 && std::isfinite(o.lr), "--lr must be > 0 (got ", o.lr, ")");
  HYMBA_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1]");
  HYMBA_CHECK(o.warmup >= 0, "--warmup must be >= 0");
  HYMBA_CHECK(o.adamw.weight_decay >= 0, "--weight-decay must be >= 0");
  HYMBA_CHECK(o.adamw.beta1 >= 0 && o.adamw.beta1 < 1 && o.adamw.beta2 >= 0 && o.adamw.beta2 < 1,
              "--beta1/--beta2 must be in [0, 1)");
  HYMBA_CHECK(o.grad_clip >= 0, "--grad-clip must be >= 0 (0 = off)");
  HYMBA_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, "--label-smoothing must be in [0, 1)");
  HYMBA_CHECK(o.dropout < 1, "--dropout must be < 1");
  HYMBA_CHECK(o.val_fraction > 0 && o.val_fraction < 1, "--val-fraction must be in (0, 1)");
  HYMBA_CHECK(!o.chunk_last_eos || o.data_split == DataSplit::kChunksShuffled,
              "--chunk-last-target eos needs --data-split chunks-shuffled (it rewrites each chunk's last target)");
  HYMBA_CHECK(o.data_split != DataSplit::kChunksShuffled || o.batching_epochs,
              "--data-split chunks-shuffled needs --batching epochs (random windows would cross chunk borders)");
  HYMBA_CHECK(o.log_interval >= 1 && o.eval_interval >= 1 && o.save_interval >= 1,
              "--log-interval/--eval-interval/--save-interval must be >= 1");
  HYMBA_CHECK(o.precision != cpu::MatmulPrecision::kBf16 || o.bf16_isa.has_value() ||
                  cpu::best_bf16_gemm_isa() != cpu::Bf16GemmIsa::kPortable,
              "--precision bf16: this CPU has no AVX512-BF16 instructions, and bf16 products without them run "
              "slower than float32; train with --precision f32");
  HYMBA_CHECK(!o.bf16_isa || cpu::bf16_gemm_isa_available(*o.bf16_isa),
              "bf16_isa: this CPU cannot run ", cpu::to_string(*o.bf16_isa));
}

TokenizerTrainOptions tokenizer_train_options(const TrainOptions& o) {
  TokenizerTrainOptions t;
  t.kind = parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  t.vocab_size = o.tokenizer_vocab;
  t.seed = o.seed;
  t.min_frequency = o.tokenizer_min_frequency;
  t.corpus_alphabet = o.tokenizer_corpus_alphabet;
  return t;
}

void check_train_state(const std::string& path, const std::string& text, const TrainOptions& opt) {
  const json state_json = parse_json(text, path);
  const JsonFields fields(state_json, path);
  (void)read_train_state(fields);
  const JsonFields run = fields.object("run");
  if (run.has("init")) (void)run.str("init");
  resume_checks(run, run_recipe(opt, opt.dropout >= 0 ? opt.dropout : 0.0), nullptr, ModelConfig{}, "", "", nullptr);
}

json recipe_core_json(const TrainOptions& o) {
  json j = {{"batch", o.batch},
          {"seq_len", o.seq_len},
          {"grad_accum", o.grad_accum},
          {"seed", o.seed},
          {"lr", o.lr},
          {"min_lr_ratio", o.min_lr_ratio},
          {"warmup", o.warmup},
          {"weight_decay", o.adamw.weight_decay},
          {"beta1", o.adamw.beta1},
          {"beta2", o.adamw.beta2},
          {"grad_clip", o.grad_clip},
          {"label_smoothing", o.label_smoothing},
          {"val_fraction", o.val_fraction}};
  // Written only when not the default, so records from before the key match.
  if (o.adamw.decay_all) j["weight_decay_scope"] = "all";
  if (o.data_split != DataSplit::kBlocks) j["data_split"] = to_string(o.data_split);
  if (o.batching_epochs) j["batching"] = batching_name(true);
  if (o.chunk_last_eos) j["chunk_last_target"] = chunk_last_target_name(true);
  if (o.precision != cpu::MatmulPrecision::kF32) j["precision"] = cpu::to_string(o.precision);
  return j;
}

const char* batching_name(bool epochs) { return epochs ? "epochs" : "random-windows"; }
const char* chunk_last_target_name(bool eos) { return eos ? "eos" : "next"; }

DatasetOptions dataset_options(const TrainOptions& o) {
  DatasetOptions d;
  d.val_fraction = o.val_fraction;
  d.split_seed = o.seed;
  d.split = o.data_split;
  d.chunk_tokens = o.seq_len;
  d.chunk_last_eos = o.chunk_last_eos;
  return d;
}

}  // namespace hymba
