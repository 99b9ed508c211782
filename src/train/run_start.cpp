#include "train/run_start.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/corpus.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/train/train_tokenizer.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "model/memory_estimate.h"
#include "train/run_state.h"

namespace hymba {

namespace fs = std::filesystem;
using nlohmann::json;

void open_run_directory(const TrainOptions& opt, const dist::Communicator& comm, std::FILE* log,
                        std::optional<RunLock>& lock) {
  const bool root = comm.is_root();
  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  HYMBA_CHECK(!ec, opt.out_dir, ": cannot create run directory (", ec.message(), ")");
  // One process per run directory; then whatever a killed writer left behind
  // (no other writer can be active now) is swept away.
  if (root) lock.emplace(opt.out_dir);
  const int stale = root ? remove_stale_temp_files(opt.out_dir) : 0;
  if (stale > 0 && log) std::fprintf(log, "removed %d unfinished temporary file(s) of an earlier run\n", stale);
  const bool has_run = fs::exists(fs::path(opt.out_dir) / kLatestFile);
  HYMBA_CHECK(!has_run || opt.resume, opt.out_dir, ": already holds a run; pass --resume to continue it or choose another --out");
  HYMBA_CHECK(!opt.resume || has_run, opt.out_dir, ": --resume given but there is no checkpoint to resume");
  comm.barrier();  // every rank has seen the directory as it was before rank 0 writes to it
}

namespace {

// The model's memory need for this recipe, checked before anything of that
// size is allocated.
void require_memory(const ModelConfig& cfg, const TrainOptions& opt) {
  model_run_memory(cfg, opt.batch, opt.seq_len, true, "--batch", "--seq-len", opt.recompute)
      .require_available(opt.recompute ? "training with --recompute" : "training without --recompute");
}

std::unique_ptr<Tokenizer> make_tokenizer(const TrainOptions& o, std::FILE* log) {
  if (!o.tokenizer_path.empty()) return load_tokenizer(o.tokenizer_path);
  const TokenizerKind kind = parse_tokenizer_kind(o.tokenizer_type, "--tokenizer-type");
  if (kind == TokenizerKind::kByte) return make_byte_tokenizer();
  if (log) std::fprintf(log, "training a %s tokenizer (vocab %d) on %s...\n", to_string(kind), o.tokenizer_vocab,
                        o.data.c_str());
  return train_tokenizer(read_documents(o.data), tokenizer_train_options(o));
}

RunStart resume_run(const ModelConfig& base_cfg, TrainOptions& opt, const dist::Communicator& comm, std::FILE* log) {
  RunStart s;
  const std::string ckpt = resolve_checkpoint(opt.out_dir);
  const std::string state_path = (fs::path(ckpt) / kTrainStateFile).string();
  const json state_json = read_json_file(state_path);
  const JsonFields fields(state_json, state_path);
  s.state = read_train_state(fields);
  s.saved_run = state_json.value("run", json::object());
  // A fine-tuning run resumes from its own checkpoint whether or not --init
  // is given again; given, it must name the run's.
  const std::string run_init = fields.object("run").has("init") ? fields.object("run").str("init") : "";
  if (opt.init_from.empty()) opt.init_from = run_init;
  const ModelConfig run_cfg = load_config_file((fs::path(ckpt) / kConfigFile).string());
  std::optional<ModelConfig> asked;
  if (opt.check_model) {
    json j = base_cfg.to_json();
    j["vocab_size"] = run_cfg.vocab_size;  // set by the run's tokenizer
    if (opt.dropout >= 0) j["dropout"] = opt.dropout;
    asked = ModelConfig::from_json(j, "model config");
  }
  resume_checks(fields.object("run"), run_recipe(opt, opt.dropout >= 0 ? opt.dropout : run_cfg.dropout),
                asked ? &*asked : nullptr, run_cfg, opt.tokenizer_path, checkpoint_tokenizer_path(ckpt), log);
  s.tok = load_fitting_tokenizer(ckpt, run_cfg.vocab_size).tokenizer;
  require_memory(run_cfg, opt);
  s.model = load_model(ckpt, true);
  load_optimizer_state(ckpt, *s.model);
  s.start_step = s.state.step;
  const int64_t saved_ranks = s.saved_run.value("ranks", int64_t{1});
  if (saved_ranks != comm.size() && opt.grad_shards == 0 && log)
    std::fprintf(log,
                 "note: this run trained on %lld MPI rank(s), now %d: the global batch is the same, but sums are "
                 "split differently, so results are not bit-identical to an uninterrupted run\n",
                 static_cast<long long>(saved_ranks), comm.size());
  if (log) std::fprintf(log, "resuming %s from step %lld\n", opt.out_dir.c_str(), static_cast<long long>(s.start_step));
  return s;
}

RunStart fine_tune_start(const TrainOptions& opt, std::FILE* log) {
  RunStart s;
  LoadedCheckpoint init = load_checkpoint(opt.init_from, true);
  s.tok = std::move(init.tokenizer);
  if (opt.dropout >= 0) {  // the config is fixed at construction: rebuild with the new dropout
    json j = init.model->config().to_json();
    j["dropout"] = opt.dropout;
    auto with_dropout = std::make_unique<Model>(ModelConfig::from_json(j, "model config"), true);
    // Dropout declares no parameters: the two tables have one layout.
    std::copy_n(init.model->params().values_block(), init.model->params().total_floats(),
                with_dropout->params().values_block());
    init.model = std::move(with_dropout);
  }
  require_memory(init.model->config(), opt);
  s.model = std::move(init.model);
  if (log) std::fprintf(log, "fine-tuning %s from %s\n", opt.out_dir.c_str(), init.dir.c_str());
  return s;
}

RunStart fresh_start(const ModelConfig& base_cfg, const TrainOptions& opt, std::FILE* log) {
  RunStart s;
  s.tok = make_tokenizer(opt, log);
  json j = base_cfg.to_json();
  j["vocab_size"] = s.tok->vocab_size();
  if (opt.dropout >= 0) j["dropout"] = opt.dropout;
  const ModelConfig cfg = ModelConfig::from_json(j, "model config");
  require_memory(cfg, opt);
  s.model = std::make_unique<Model>(cfg, true);
  s.model->init(opt.seed);
  return s;
}

}  // namespace

RunStart start_run(const ModelConfig& base_cfg, TrainOptions& opt, const dist::Communicator& comm, std::FILE* log) {
  RunStart s = opt.resume                ? resume_run(base_cfg, opt, comm, log)
               : !opt.init_from.empty() ? fine_tune_start(opt, log)
                                        : fresh_start(base_cfg, opt, log);
  // Published models may pad their vocabulary beyond the tokenizer's.
  HYMBA_CHECK(opt.init_from.empty() ? s.model->config().vocab_size == s.tok->vocab_size()
                                    : s.model->config().vocab_size >= s.tok->vocab_size(),
              "tokenizer has ", s.tok->vocab_size(), " tokens but the model's vocab_size is ",
              s.model->config().vocab_size);
  return s;
}

}  // namespace hymba
