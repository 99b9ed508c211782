#include "classify/classifier.h"

#include <algorithm>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "core/system_memory.h"
#include "tokenizer/tokenizer_files.h"
#include "formats/checkpoint.h"
#include "train/run_state.h"

namespace hymba::classify {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Backbone load_backbone(const std::string& dir, bool trainable) {
  // Any checkpoint directory: ours (tokenizer.model) or a published one (tokenizer.json).
  LoadedCheckpoint c = load_checkpoint(dir, trainable);
  Backbone b;
  b.source = c.dir;
  b.model = std::move(c.model);
  b.tok = std::move(c.tokenizer);
  b.tok_path = c.tokenizer_path;
  HYMBA_CHECK(b.tok->vocab_size() == b.model->config().vocab_size, b.source, ": tokenizer has ", b.tok->vocab_size(),
              " tokens but the model's vocab_size is ", b.model->config().vocab_size);
  return b;
}

int64_t table_bytes(const ParamTable& t, bool grads_and_moments) {
  const int64_t block = t.total_floats() * static_cast<int64_t>(sizeof(float));
  if (!grads_and_moments) return t.allocated() ? block : 0;
  return (t.has_grads() ? block : 0) + (t.has_optimizer() ? 2 * block : 0);
}

}  // namespace

Classifier::Classifier(const std::vector<std::string>& backbone_dirs, HeadConfig head, std::vector<std::string> classes,
                       int64_t max_len, bool train_backbones, bool train_head, uint64_t seed)
    : classes_(std::move(classes)), max_len_(max_len), train_backbones_(train_backbones) {
  HYMBA_CHECK(backbone_dirs.size() == 1 || backbone_dirs.size() == 2, "--backbone: give one or two backbones (got ",
              backbone_dirs.size(), ")");
  HYMBA_CHECK(max_len >= 1, "--max-len must be >= 1 (got ", max_len, ")");
  head.widths.clear();
  for (const std::string& dir : backbone_dirs) {
    backbones_.push_back(load_backbone(dir, train_backbones));
    const ModelConfig& c = backbones_.back().model->config();
    // Learned positions (GPT-2 / GPT-Neo) stop at their table: say so before any text is read.
    HYMBA_CHECK(c.position_embedding != PositionEmbedding::kLearned ||
                    max_len + c.num_memory_tokens <= c.max_position_embeddings,
                "--max-len ", max_len, " is beyond backbone ", backbones_.back().source,
                "'s learned positions (max_position_embeddings ", c.max_position_embeddings, ")");
    head.widths.push_back(c.hidden_size);
  }
  if (backbones_.size() == 1) head.fusion = FeatureFusion::kSingle;
  else if (head.fusion == FeatureFusion::kSingle) head.fusion = FeatureFusion::kConcat;
  head.num_classes = static_cast<int64_t>(classes_.size());
  plan_.cfg = head;
  build_head(train_head, seed);
}

void Classifier::build_head(bool train_head, uint64_t seed) {
  head_ = ParamTable();
  declare_head(plan_.cfg, head_);
  head_.allocate(train_head, train_head);
  head_.init(Rng(seed).split(0x4EAD));
  plan_ = HeadPlan::make(plan_.cfg, head_);
}

std::unique_ptr<Classifier> Classifier::load(const std::string& dir, bool train_backbones) {
  const std::string meta_path = (fs::path(dir) / kClassifierFile).string();
  HYMBA_CHECK(fs::exists(meta_path), dir, ": not a classifier directory (no ", kClassifierFile, ")");
  const json meta = read_json_file(meta_path);
  std::unique_ptr<Classifier> c(new Classifier());
  try {
    c->classes_ = meta.at("classes").get<std::vector<std::string>>();
    c->max_len_ = meta.at("max_len").get<int64_t>();
    c->plan_.cfg = HeadConfig::from_json(meta.at("head"), meta_path);
    c->train_backbones_ = train_backbones;
    for (const json& b : meta.at("backbones")) {
      c->backbones_.push_back(load_backbone((fs::path(dir) / b.at("dir").get<std::string>()).string(), train_backbones));
      c->backbones_.back().source = b.value("source", c->backbones_.back().source);
    }
  } catch (const json::exception& e) {
    fail(meta_path, ": bad classifier record (", e.what(), ")");
  }
  HYMBA_CHECK(c->classes_.size() == static_cast<size_t>(c->plan_.cfg.num_classes), meta_path, ": ",
              c->classes_.size(), " classes but the head has ", c->plan_.cfg.num_classes, " outputs");
  HYMBA_CHECK(c->backbones_.size() == c->plan_.cfg.widths.size(), meta_path, ": ", c->backbones_.size(),
              " backbones but the head expects ", c->plan_.cfg.widths.size());
  for (size_t k = 0; k < c->backbones_.size(); ++k)
    HYMBA_CHECK(c->backbones_[k].model->config().hidden_size == c->plan_.cfg.widths[k], meta_path, ": backbone ", k,
                " has hidden size ", c->backbones_[k].model->config().hidden_size, ", the head expects ",
                c->plan_.cfg.widths[k]);
  c->build_head(false, 0);
  load_params((fs::path(dir) / kHeadFile).string(), c->head_);
  return c;
}

void Classifier::save(const std::string& dir, const json& extra) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  HYMBA_CHECK(!ec, dir, ": cannot create classifier directory (", ec.message(), ")");
  json meta = extra;
  meta["format"] = "hymba.cpp classifier";
  meta["classes"] = classes_;
  meta["max_len"] = max_len_;
  meta["head"] = plan_.cfg.to_json();
  meta["backbones"] = json::array();
  for (size_t k = 0; k < backbones_.size(); ++k) {
    const std::string sub = "backbone-" + std::to_string(k);
    const Backbone& b = backbones_[k];
    const fs::path sub_dir = fs::path(dir) / sub;
    save_model(sub_dir.string(), *b.model);
    if (is_gguf_file(b.tok_path)) {
      // A .gguf backbone: its tokenizer as the file of its kind.
      (void)save_tokenizer_files(*b.tok, sub_dir.string());
    } else {
      // Keep the tokenizer's own file name (and its tokenizer_config.json), so the
      // backbone loads back with the same tokenizer whatever its kind.
      b.tok->save((sub_dir / fs::path(b.tok_path).filename()).string());
      const fs::path tok_cfg = fs::path(b.tok_path).parent_path() / "tokenizer_config.json";
      if (fs::exists(tok_cfg)) write_text_atomic((sub_dir / tok_cfg.filename()).string(), read_file(tok_cfg.string()));
    }
    meta["backbones"].push_back({{"dir", sub},
                                 {"source", backbones_[k].source},
                                 {"frozen", !train_backbones_},
                                 {"hidden_size", backbones_[k].model->config().hidden_size},
                                 {"params", backbones_[k].model->params().num_params()}});
  }
  save_params((fs::path(dir) / kHeadFile).string(), head_, {{"format", "hymba.cpp classifier head"}});
  write_text_atomic((fs::path(dir) / kClassifierFile).string(), meta.dump(2) + "\n");
}

std::vector<const Tokenizer*> Classifier::tokenizers() const {
  std::vector<const Tokenizer*> out;
  for (const Backbone& b : backbones_) out.push_back(b.tok.get());
  return out;
}

std::vector<Example> Classifier::encode(const std::vector<LabeledText>& texts) const {
  return encode_examples(texts, classes_, tokenizers(), max_len_);
}

void Classifier::features(const std::vector<Example>& examples, const std::vector<int64_t>& idx,
                          std::vector<std::vector<float>>& feats, std::vector<PaddedBatch>& batches) {
  feats.resize(backbones_.size());
  batches.resize(backbones_.size());
  for (size_t k = 0; k < backbones_.size(); ++k) {
    Model& m = *backbones_[k].model;
    batches[k] = pad_batch(examples, idx, k, backbones_[k].tok->pad_id());
    const PaddedBatch& pb = batches[k];
    ForwardOptions fo;
    fo.hidden_only = true;
    fo.release_activations = !train_backbones_;  // frozen: no backward, keep one layer at a time
    m.forward(pb.ids.data(), nullptr, pb.B, pb.T, fo);
    const int64_t d = m.config().hidden_size, M = m.config().num_memory_tokens;
    feats[k].resize(static_cast<size_t>(pb.B * d));
    pool_forward(feats[k].data(), m.hidden(), pb.B, M + pb.T, M, d, pb.lengths.data(), plan_.cfg.pooling);
  }
}

void Classifier::backward_features(const std::vector<std::vector<float>>& dfeats,
                                   const std::vector<PaddedBatch>& batches) {
  HYMBA_CHECK(train_backbones_, "backward: the backbones are frozen");
  for (size_t k = 0; k < backbones_.size(); ++k) {
    Model& m = *backbones_[k].model;
    const PaddedBatch& pb = batches[k];
    const int64_t d = m.config().hidden_size, M = m.config().num_memory_tokens, S = M + pb.T;
    std::vector<float> dhidden(static_cast<size_t>(pb.B * S * d), 0.0f);
    pool_backward(dhidden.data(), dfeats[k].data(), pb.B, S, M, d, pb.lengths.data(), plan_.cfg.pooling);
    m.backward_from_hidden(dhidden.data());
  }
}

std::vector<int32_t> Classifier::predict(const std::vector<Example>& examples, int64_t batch, double* loss,
                                         int64_t* tokens) {
  HYMBA_CHECK(batch >= 1, "--batch must be >= 1 (got ", batch, ")");
  std::vector<int32_t> pred;
  pred.reserve(examples.size());
  double loss_sum = 0.0;
  int64_t read = 0;
  std::vector<std::vector<float>> feats;
  std::vector<PaddedBatch> batches;
  HeadActs<float> acts;
  for (size_t start = 0; start < examples.size(); start += static_cast<size_t>(batch)) {
    std::vector<int64_t> idx;
    std::vector<int32_t> labels;
    for (size_t i = start; i < std::min(examples.size(), start + static_cast<size_t>(batch)); ++i) {
      idx.push_back(static_cast<int64_t>(i));
      labels.push_back(examples[i].label);
    }
    features(examples, idx, feats, batches);
    for (const PaddedBatch& pb : batches)
      for (int64_t n : pb.lengths) read += n;
    std::vector<const float*> fp;
    for (const auto& f : feats) fp.push_back(f.data());
    const LossStats s = head_forward(plan_, head_.values_block(), fp, static_cast<int64_t>(idx.size()),
                                     labels.data(), acts);
    loss_sum += s.loss_sum;
    const int64_t C = plan_.cfg.num_classes;
    for (size_t r = 0; r < idx.size(); ++r) {
      const float* row = acts.logits.data() + r * C;
      pred.push_back(static_cast<int32_t>(std::max_element(row, row + C) - row));
    }
  }
  if (loss) *loss = examples.empty() ? 0.0 : loss_sum / static_cast<double>(examples.size());
  if (tokens) *tokens = read;
  return pred;
}

int64_t Classifier::backbone_value_bytes() const {
  int64_t n = 0;
  for (const Backbone& b : backbones_) n += table_bytes(b.model->params(), false);
  return n;
}

int64_t Classifier::backbone_grad_optimizer_bytes() const {
  int64_t n = 0;
  for (const Backbone& b : backbones_) n += table_bytes(b.model->params(), true);
  return n;
}

int64_t Classifier::head_bytes() const { return table_bytes(head_, false) + table_bytes(head_, true); }

int64_t Classifier::activation_peak_bytes() const {
  int64_t n = 0;
  for (const Backbone& b : backbones_) n += static_cast<int64_t>(b.model->activation_bytes());
  return n;
}

// VmHWM, which reset_peak_rss() can rewind between the rows of a suite.
int64_t peak_rss_bytes() { return hymba::peak_rss_bytes(); }

}  // namespace hymba::classify
