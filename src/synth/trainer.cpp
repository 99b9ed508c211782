#include "synth/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"
#include "core/threading.h"
#include "kernels/cpu/cross_entropy.h"
#include "model/model.h"
#include "synth/compression_head.h"
#include "synth/metrics.h"
#include "synth/settings_json.h"
#include "train/optimizer.h"
#include "train/step_loop.h"

namespace hymba::synth {

using nlohmann::json;

namespace {

constexpr const char* kArchNames[] = {"transformer", "mamba", "hymba", "hybrid"};

}  // namespace

const char* to_string(ArchKind k) { return kArchNames[static_cast<int>(k)]; }

ArchKind parse_arch(const std::string& name) {
  for (int i = 0; i < 4; ++i)
    if (name == kArchNames[i]) return static_cast<ArchKind>(i);
  fail("--model: unknown model '", name, "' (one of transformer, mamba, hymba, hybrid)");
}

InitScheme parse_scheme(const std::string& name) {
  InitScheme s = InitScheme::kNormal;
  if (!parse_init_scheme(name, s)) fail("--init-scheme: unknown scheme '", name, "' (one of ", kInitSchemeNames, ")");
  return s;
}

BlockLink parse_link(const std::string& name) {
  if (name == "null") return BlockLink::kNull;
  if (name == "residual" || name == "res") return BlockLink::kResidual;
  if (name == "gated" || name == "gated-res") return BlockLink::kGated;
  fail("--link: unknown link '", name, "' (one of null, residual, gated)");
}

void ArchSpec::validate() const {
  need(hidden_size >= 2 && hidden_size <= 65536, "--hidden-size", "must be in 2..65536 (got " + std::to_string(hidden_size) + ")");
  need(d_state >= 1 && d_state <= 1024, "--d-state", "must be in 1..1024");
  need(ffn_mult >= 0 && ffn_mult <= 64, "--ffn-mult", "must be in 0..64");
  need(init_std > 0 && init_std <= 10, "--init-std", "must be in (0, 10]");
  if (kind == ArchKind::kHybrid) {
    need(num_blocks >= 1 && num_blocks <= 256, "--num-blocks", "must be in 1..256");
    need(trans_layers >= 1 && trans_layers <= 256, "--trans-layers", "must be in 1..256 (use --model mamba for none)");
    need(mamba_layers >= 1 && mamba_layers <= 256, "--mamba-layers", "must be in 1..256 (use --model transformer for none)");
  } else {
    need(num_layers >= 1 && num_layers <= 1024, "--num-layers", "must be in 1..1024 (got " + std::to_string(num_layers) + ")");
  }
  if (kind != ArchKind::kMamba) {
    need(num_heads >= 1 && hidden_size % num_heads == 0, "--num-heads",
         std::to_string(num_heads) + " must be >= 1 and divide --hidden-size " + std::to_string(hidden_size));
    need((hidden_size / num_heads) % 2 == 0, "--num-heads",
         "head width --hidden-size / --num-heads = " + std::to_string(hidden_size / num_heads) + " must be even (RoPE)");
  }
}

std::string ArchSpec::label() const {
  switch (kind) {
    case ArchKind::kTransformer: return "Transformer layers " + std::to_string(num_layers);
    case ArchKind::kMamba: return "Mamba layers " + std::to_string(num_layers);
    case ArchKind::kHymba: return "Hymba layers " + std::to_string(num_layers);
    case ArchKind::kHybrid: {
      const char* l = link == BlockLink::kNull ? "Null" : link == BlockLink::kResidual ? "Res" : "Gated-res";
      return "Hybrid blocks " + std::to_string(num_blocks) + ", " + l + " tLrs " + std::to_string(trans_layers) +
             " mLrs " + std::to_string(mamba_layers);
    }
  }
  return "?";
}

json ArchSpec::to_json() const {
  json j = {{"model", to_string(kind)}, {"hidden_size", hidden_size}, {"num_heads", num_heads},
            {"ffn_mult", ffn_mult},     {"d_state", d_state},     {"init_std", init_std}};
  // Only when not the default, so results stored before the option existed still match.
  if (init_scheme != InitScheme::kNormal) j["init_scheme"] = hymba::to_string(init_scheme);
  if (kind == ArchKind::kHybrid) {
    j["num_blocks"] = num_blocks;
    j["trans_layers"] = trans_layers;
    j["mamba_layers"] = mamba_layers;
    j["link"] = hymba::to_string(link);
  } else {
    j["num_layers"] = num_layers;
  }
  return j;
}

ArchSpec ArchSpec::from_json(const json& j, const ArchSpec& base, const std::string& source) {
  ArchSpec a = base;
  JsonFields f(j, source);
  std::string kind = to_string(a.kind), link = hymba::to_string(a.link);
  f.get("model", kind);
  f.get("link", link);
  a.kind = parse_arch(kind);
  a.link = parse_link(link);
  f.get("hidden_size", a.hidden_size);
  f.get("num_layers", a.num_layers);
  f.get("num_heads", a.num_heads);
  f.get("num_blocks", a.num_blocks);
  f.get("trans_layers", a.trans_layers);
  f.get("mamba_layers", a.mamba_layers);
  f.get("ffn_mult", a.ffn_mult);
  f.get("d_state", a.d_state);
  f.get("init_std", a.init_std);
  std::string scheme = hymba::to_string(a.init_scheme);
  f.get("init_scheme", scheme);
  a.init_scheme = parse_scheme(scheme);
  f.reject_unknown();
  return a;
}

ModelConfig make_model_config(const ArchSpec& a, int64_t vocab_size) {
  a.validate();
  json j = {{"vocab_size", vocab_size},   {"hidden_size", a.hidden_size},   {"num_attention_heads", a.num_heads},
            {"num_key_value_heads", a.num_heads}, {"mamba_d_state", a.d_state}, {"tie_word_embeddings", true},
            {"initializer_range", a.init_std}, {"init_scheme", hymba::to_string(a.init_scheme)}};
  const int64_t ffn = static_cast<int64_t>(std::llround(a.ffn_mult * static_cast<double>(a.hidden_size)));
  switch (a.kind) {
    case ArchKind::kTransformer:
      j["layer_types"] = "attention";
      j["num_hidden_layers"] = a.num_layers;
      j["intermediate_size"] = ffn;
      break;
    case ArchKind::kMamba:
      j["layer_types"] = "mamba";
      j["num_hidden_layers"] = a.num_layers;
      j["intermediate_size"] = 0;
      break;
    case ArchKind::kHymba:
      j["layer_types"] = "hybrid";
      j["num_hidden_layers"] = a.num_layers;
      j["intermediate_size"] = ffn;
      break;
    case ArchKind::kHybrid: {
      json types = json::array();
      for (int64_t b = 0; b < a.num_blocks; ++b) {
        for (int64_t l = 0; l < a.trans_layers; ++l) types.push_back("attention");
        for (int64_t l = 0; l < a.mamba_layers; ++l) types.push_back("mamba");
      }
      j["layer_types"] = types;
      j["num_hidden_layers"] = a.num_blocks * (a.trans_layers + a.mamba_layers);
      j["block_layers"] = a.trans_layers + a.mamba_layers;
      j["block_link"] = hymba::to_string(a.link);
      j["intermediate_size"] = ffn;
      break;
    }
  }
  return ModelConfig::from_json(j, "synth model");
}

void TrainSettings::validate() const {
  need(epochs >= 1 && epochs <= 100000, "--epochs", "must be in 1..100000 (got " + std::to_string(epochs) + ")");
  need(batch_size >= 1 && batch_size <= 65536, "--batch-size", "must be in 1..65536");
  need(eval_batch >= 1 && eval_batch <= 65536, "--eval-batch", "must be in 1..65536");
  need(lr > 0 && lr <= 10, "--lr", "must be in (0, 10]");
  need(weight_decay >= 0 && weight_decay <= 10, "--weight-decay", "must be in [0, 10]");
  need(beta2 > 0 && beta2 < 1, "--beta2", "must be in (0, 1)");
  need(schedule == "constant" || schedule == "cosine" || schedule == "cosine-step", "--schedule",
       "must be constant, cosine or cosine-step (got " + schedule + ")");
  need(warmup >= 0, "--warmup", "must be >= 0");
  need(warmup == 0 || schedule != "cosine", "--warmup",
       "MAD's per-epoch cosine has no warmup; use --schedule cosine-step for one");
  need(num_train >= 1 && num_train <= 100000000, "--num-train-examples", "must be in 1..100000000");
  need(num_test >= 1 && num_test <= 100000000, "--num-test-examples", "must be in 1..100000000");
  need(stop_at_acc >= 0 && stop_at_acc <= 1, "--stop-at-acc", "must be in [0, 1] (0: off)");
  need(stop_metric == "token" || stop_metric == "macro", "--stop-metric",
       "must be token or macro (got " + stop_metric + ")");
  need(test_seq_len >= 0, "--test-seq-len", "must be >= 0 (0: the training length)");
  need(test_num_kv_pairs >= 0, "--test-num-kv-pairs", "must be >= 0 (0: as in training)");
  need(decoder_width >= 0, "--decoder-width", "must be >= 0 (0: 2 x hidden)");
}

json TrainSettings::to_json() const {
  return {{"epochs", epochs},       {"batch_size", batch_size}, {"eval_batch", eval_batch},
          {"lr", lr},               {"weight_decay", weight_decay}, {"beta2", beta2},
          {"schedule", schedule},   {"warmup", warmup},         {"grad_clip", grad_clip},
          {"seed", seed},           {"num_train", num_train},   {"num_test", num_test},
          {"stop_at_acc", stop_at_acc}, {"stop_metric", stop_metric}, {"test_seq_len", test_seq_len},
          {"test_num_kv_pairs", test_num_kv_pairs}, {"decoder_width", decoder_width}};
}

TrainSettings TrainSettings::from_json(const json& j, const TrainSettings& base, const std::string& source) {
  TrainSettings t = base;
  JsonFields f(j, source);
  f.get("epochs", t.epochs);
  f.get("batch_size", t.batch_size);
  f.get("eval_batch", t.eval_batch);
  f.get("lr", t.lr);
  f.get("weight_decay", t.weight_decay);
  f.get("beta2", t.beta2);
  f.get("schedule", t.schedule);
  f.get("warmup", t.warmup);
  f.get("grad_clip", t.grad_clip);
  f.get("seed", t.seed);
  f.get("num_train", t.num_train);
  f.get("num_test", t.num_test);
  f.get("stop_at_acc", t.stop_at_acc);
  f.get("stop_metric", t.stop_metric);
  f.get("test_seq_len", t.test_seq_len);
  f.get("test_num_kv_pairs", t.test_num_kv_pairs);
  f.get("decoder_width", t.decoder_width);
  f.reject_unknown();
  return t;
}

namespace {

// One model (and for compression its decoder head) under training.
class Learner {
 public:
  Learner(const TaskSpec& task, const ArchSpec& arch, const TrainSettings& s)
      : compression_(task.kind == TaskKind::kCompression), model_(make_model_config(arch, task.vocab_size), true) {
    const Rng init(s.seed);
    model_.params().init(init.split(1));
    if (compression_) {
      const int64_t width = s.decoder_width > 0 ? s.decoder_width : arch.hidden_size;  // MAD: non-expanding
      head_ = std::make_unique<CompressionHead>(task.seq_len, arch.hidden_size, width, task.vocab_size, true);
      head_->params().init(init.split(2));
    }
  }

  int64_t params() const {
    return model_.params().num_params() + (head_ ? head_->params().num_params() : 0);
  }

  // Loss stats of a batch; with `learn` also accumulates the gradients of
  // loss_scale x (the batch's mean loss).
  LossStats run(const int32_t* ids, const int32_t* targets, int64_t B, int64_t T, bool learn, float loss_scale = 1.0f) {
    const ThreadLimit threads(threads_for_param_rows(params() * B * T));
    if (!compression_) {
      const LossStats st = model_.forward(ids, targets, B, T);
      if (learn) model_.backward(loss_scale);
      return st;
    }
    model_.forward(ids, nullptr, B, T);
    const int64_t d = model_.config().hidden_size;
    last_.resize(static_cast<size_t>(B * d));
    for (int64_t b = 0; b < B; ++b)  // only the last position's state reaches the decoder
      std::copy_n(model_.token_hidden() + ((b + 1) * T - 1) * d, d, last_.begin() + b * d);
    const LossStats st = head_->forward(last_.data(), targets, B);
    if (learn) {
      std::vector<float> dlast(static_cast<size_t>(B * d));
      head_->backward(dlast.data());
      if (loss_scale != 1.0f) {  // the head has no scale of its own; its gradients were zero before this batch
        scale_grads(head_->params(), loss_scale);
        for (float& g : dlast) g *= loss_scale;
      }
      dhidden_.assign(static_cast<size_t>(B * T * d), 0.0f);
      for (int64_t b = 0; b < B; ++b) std::copy_n(dlast.begin() + b * d, d, dhidden_.begin() + ((b + 1) * T - 1) * d);
      model_.backward_from_token_hidden(dhidden_.data());
    }
    return st;
  }

  // The sum of every rank's gradients, on every rank (data-parallel rows).
  void sum_grads(const dist::Communicator& comm) {
    comm.sum(model_.params().grads_block(), model_.params().total_floats());
    if (head_) comm.sum(head_->params().grads_block(), head_->params().total_floats());
  }

  // Argmax class of every position of the last run: out [B * T].
  void predictions(int32_t* out, int64_t B, int64_t T) const {
    const int64_t V = model_.config().vocab_size;
    argmax_rows(out, compression_ ? head_->logits() : model_.logits(), B * T, V);
  }

  void zero_grad() {
    model_.params().zero_grad();
    if (head_) head_->params().zero_grad();
  }

  // Clips the global norm over model and head, then one AdamW step.
  void step(const AdamWConfig& cfg, double lr, int64_t t, double clip) {
    const ThreadLimit threads(threads_for_param_rows(params()));
    if (clip > 0) {
      const double m = grad_global_norm(model_.params()), h = head_ ? grad_global_norm(head_->params()) : 0.0;
      const double norm = std::sqrt(m * m + h * h);
      if (norm > clip) {
        const auto scale = static_cast<float>(clip / norm);
        scale_grads(model_.params(), scale);
        if (head_) scale_grads(head_->params(), scale);
      }
    }
    adamw_step(model_.params(), cfg, lr, t);
    if (head_) adamw_step(head_->params(), cfg, lr, t);
  }

 private:
  bool compression_;
  Model model_;
  std::unique_ptr<CompressionHead> head_;
  std::vector<float> last_, dhidden_;
};

void gather(const Dataset& d, const std::vector<int64_t>& order, int64_t from, int64_t count, std::vector<int32_t>& ids,
            std::vector<int32_t>& targets) {
  ids.resize(static_cast<size_t>(count * d.seq));
  targets.resize(ids.size());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t ex = order[static_cast<size_t>(from + i)];
    std::copy_n(d.input(ex), d.seq, ids.begin() + i * d.seq);
    std::copy_n(d.target(ex), d.seq, targets.begin() + i * d.seq);
  }
}

}  // namespace

TaskData task_data(const TaskSpec& task, const TrainSettings& s, int64_t limit) {
  task.validate();
  s.validate();
  TaskSpec test_task = task;
  if (s.test_num_kv_pairs > 0) {
    HYMBA_CHECK(task.kind == TaskKind::kMqar, "--test-num-kv-pairs: only MQAR has key-value pairs to vary (task ",
                to_string(task.kind), ")");
    test_task.num_kv_pairs = s.test_num_kv_pairs;
  }
  if (s.test_seq_len > 0) {
    HYMBA_CHECK(task.kind != TaskKind::kCompression,
                "--test-seq-len: compression decodes a fixed number of positions; test at the training length");
    test_task.seq_len = s.test_seq_len;
  }
  test_task.validate();
  const Rng data(s.seed);
  const auto count = [limit](int64_t n) { return limit > 0 ? std::min(limit, n) : n; };
  // Each example has its own stream, so a prefix equals the full set's first examples.
  return {generate(task, count(s.num_train), data.split(11).next_u64(), false),
          generate(test_task, count(s.num_test), data.split(12).next_u64(), true)};
}

namespace {

// One run's parts of the shared step loop (train/step_loop.h): shuffled
// epochs of batches, a gradient sum across ranks, and an evaluation with an
// optional early stop after every epoch.
class TaskTraining final : public StepHooks {
 public:
  TaskTraining(const TaskSpec& task, const ArchSpec& arch, const TrainSettings& s, const TaskData& sets,
               const std::function<void(const EpochStats&)>& on_epoch, const dist::Communicator& group)
      : task_(task), s_(s), train_(sets.train), test_(sets.test), on_epoch_(on_epoch), group_(group),
        ranks_(group.size()), rank_(group.rank()), data_(s.seed), learner_(task, arch, s),
        batches_((train_.n + s.batch_size - 1) / s.batch_size), order_(static_cast<size_t>(train_.n)),
        identity_(static_cast<size_t>(test_.n)) {
    adamw_.beta2 = s.beta2;
    adamw_.weight_decay = s.weight_decay;
    sched_.peak = s.lr;
    sched_.floor = s.schedule == "constant" ? s.lr : std::min(1e-6, s.lr);
    sched_.warmup = s.warmup;
    sched_.total = batches_ * s.epochs;
    std::iota(identity_.begin(), identity_.end(), 0);
    result_.params = learner_.params();
  }

  RunResult run() {
    const auto t_start = std::chrono::steady_clock::now();
    StepLoopPlan plan;
    plan.stop = batches_ * s_.epochs;
    plan.lr = [this](int64_t step) { return lr_at(step / batches_, step); };
    plan.eval_every = batches_;  // after every epoch
    result_.stopped_early = run_step_loop(plan, *this) < plan.stop;
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return result_;
  }

 private:
  // MAD's CosineAnnealingLR, stepped after every epoch: epoch e (0-based) runs at
  // floor + (peak - floor) (1 + cos(pi e / epochs)) / 2.
  double lr_at(int64_t epoch0, int64_t step) const {
    if (s_.schedule != "cosine") return sched_.at(step);
    const double pi = 3.14159265358979323846;
    return sched_.floor + (s_.lr - sched_.floor) * 0.5 *
                              (1.0 + std::cos(pi * static_cast<double>(epoch0) / static_cast<double>(s_.epochs)));
  }

  // An epoch's first step shuffles the training set.
  void before_step(int64_t step) override {
    if (step % batches_ != 0) return;
    epoch_t0_ = std::chrono::steady_clock::now();
    std::iota(order_.begin(), order_.end(), 0);
    Rng shuffle = data_.split(1000 + static_cast<uint64_t>(step / batches_ + 1));
    for (int64_t i = train_.n - 1; i > 0; --i)
      std::swap(order_[static_cast<size_t>(i)], order_[shuffle.below(static_cast<uint64_t>(i + 1))]);
    loss_sum_ = 0.0;
  }

  double gradients(int64_t step) override;

  double update(int64_t step, double lr) override {
    learner_.step(adamw_, lr, step + 1, s_.grad_clip);
    return 0.0;
  }

  void count(StepRecord& r) override {
    loss_sum_ += r.loss;
    epoch_lr_ = r.lr;
  }

  void evaluate(int64_t done) override;

  bool keep_going(const StepRecord& r) override {
    if (!r.evaluated || s_.stop_at_acc <= 0) return true;
    const EpochStats& e = result_.last();
    return !((s_.stop_metric == "macro" ? e.eval_macro_acc : e.eval_acc) >= s_.stop_at_acc);
  }

  const TaskSpec& task_;
  const TrainSettings& s_;
  const Dataset& train_;
  const Dataset& test_;
  const std::function<void(const EpochStats&)>& on_epoch_;
  const dist::Communicator& group_;
  const int64_t ranks_, rank_;
  const Rng data_;
  Learner learner_;
  AdamWConfig adamw_;
  LrSchedule sched_;
  const int64_t batches_;
  std::vector<int64_t> order_, identity_;
  std::vector<int32_t> ids_, targets_, predicted_;
  std::chrono::steady_clock::time_point epoch_t0_;
  double loss_sum_ = 0.0, epoch_lr_ = 0.0;
  RunResult result_;
};

// The batch's gradients; with K > 1 ranks each takes its rows and the
// gradients are summed. Returns the batch's mean loss.
double TaskTraining::gradients(int64_t step) {
  const int64_t b = step % batches_;
  const int64_t from = b * s_.batch_size, count = std::min(s_.batch_size, train_.n - from);
  // This rank's rows of the batch (all of them in one process).
  const int64_t first = from + count * rank_ / ranks_, rows = from + count * (rank_ + 1) / ranks_ - first;
  learner_.zero_grad();
  if (ranks_ == 1) {
    gather(train_, order_, from, count, ids_, targets_);
    const LossStats st = learner_.run(ids_.data(), targets_.data(), count, train_.seq, true);
    return st.scored > 0 ? st.loss_sum / static_cast<double>(st.scored) : 0.0;
  }
  // The batch's mean loss is the ranks' loss sums over their scored
  // positions; each backpropagates its share of it.
  int64_t scored_here = 0;
  for (int64_t i = 0; i < rows * train_.seq; ++i) {
    const int32_t* target = train_.target(order_[static_cast<size_t>(first + i / train_.seq)]);
    scored_here += target[i % train_.seq] != cpu::kIgnoreIndex;
  }
  double counts[1] = {static_cast<double>(scored_here)};
  group_.sum(counts, 1);
  LossStats st;
  if (rows > 0) {
    gather(train_, order_, first, rows, ids_, targets_);
    const double share = counts[0] > 0 ? static_cast<double>(scored_here) / counts[0] : 0.0;
    st = learner_.run(ids_.data(), targets_.data(), rows, train_.seq, true, static_cast<float>(share));
  }
  learner_.sum_grads(group_);
  double sums[2] = {st.loss_sum, static_cast<double>(st.scored)};
  group_.sum(sums, 2);
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

// The epoch's figures on the whole test set, handed to on_epoch.
void TaskTraining::evaluate(int64_t done) {
  EpochStats e;
  e.epoch = done / batches_;
  e.lr = epoch_lr_;
  e.train_loss = loss_sum_ / static_cast<double>(batches_);
  double eval_loss = 0;
  int64_t scored = 0, correct = 0;
  // MAD's test batches hold batch_size examples, whatever our eval batch is.
  MadAccuracy macro(task_.vocab_size, s_.batch_size);
  for (int64_t from = 0; from < test_.n; from += s_.eval_batch) {
    const int64_t count = std::min(s_.eval_batch, test_.n - from);
    gather(test_, identity_, from, count, ids_, targets_);
    const LossStats st = learner_.run(ids_.data(), targets_.data(), count, test_.seq, false);
    eval_loss += st.loss_sum;
    scored += st.scored;
    correct += st.correct;
    predicted_.resize(targets_.size());
    learner_.predictions(predicted_.data(), count, test_.seq);
    for (int64_t b = 0; b < count; ++b)
      macro.add_example(from + b, targets_.data() + b * test_.seq, predicted_.data() + b * test_.seq, test_.seq);
  }
  e.eval_loss = scored > 0 ? eval_loss / static_cast<double>(scored) : 0.0;
  e.eval_acc = scored > 0 ? static_cast<double>(correct) / static_cast<double>(scored) : 0.0;
  e.eval_macro_acc = macro.value();
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_t0_).count();
  result_.epochs.push_back(e);
  if (on_epoch_) on_epoch_(e);
}

}  // namespace

RunResult train_on_task(const TaskSpec& task, const ArchSpec& arch, const TrainSettings& s,
                        const std::function<void(const EpochStats&)>& on_epoch, const dist::Communicator* comm) {
  arch.validate();
  const dist::Communicator alone;
  const TaskData sets = task_data(task, s);
  TaskTraining training(task, arch, s, sets, on_epoch, comm != nullptr ? *comm : alone);
  return training.run();
}

}  // namespace hymba::synth
