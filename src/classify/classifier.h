// A sequence classifier: one or two backbones (any checkpoint) and a head
// (classify/head.h). Frozen backbones carry weights only (no gradients, no
// AdamW moments) and run forward without a backward; unfrozen ones are
// trained through the pooled features.
//
// Directory (written by save; classifier.json last, so its presence means
// the directory is complete):
//   classifier.json     classes, head config, max_len, backbones, training record
//   head.safetensors    the head's parameter table
//   backbone-<k>/       config.json, model.safetensors, tokenizer.model of
//                       backbone k as trained (a frozen one is a copy of its source)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "classify/data.h"
#include "classify/head.h"
#include "core/params.h"
#include "tokenizer/tokenizer.h"
#include "model/model.h"

namespace hymba::classify {

inline constexpr const char* kClassifierFile = "classifier.json";
inline constexpr const char* kHeadFile = "head.safetensors";

struct Backbone {
  std::string source;  // the checkpoint directory it was loaded from
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::string tok_path;  // its file: tokenizer.model, or a published tokenizer.json
};

class Classifier {
 public:
  // Loads each backbone (a checkpoint or run directory), with gradients and
  // optimizer moments only when train_backbones. head's widths are filled in
  // from the backbones; the head is initialised from seed.
  Classifier(const std::vector<std::string>& backbone_dirs, HeadConfig head, std::vector<std::string> classes,
             int64_t max_len, bool train_backbones, bool train_head, uint64_t seed);
  // Loads a directory written by save().
  static std::unique_ptr<Classifier> load(const std::string& dir, bool train_backbones = false);
  // Writes the directory atomically file by file; extra goes into classifier.json.
  void save(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object()) const;

  const std::vector<std::string>& classes() const { return classes_; }
  const HeadConfig& head_config() const { return plan_.cfg; }
  const HeadPlan& head_plan() const { return plan_; }
  ParamTable& head_params() { return head_; }
  const ParamTable& head_params() const { return head_; }
  std::vector<Backbone>& backbones() { return backbones_; }
  const std::vector<Backbone>& backbones() const { return backbones_; }
  bool backbones_trainable() const { return train_backbones_; }
  int64_t max_len() const { return max_len_; }
  std::vector<const Tokenizer*> tokenizers() const;

  // Tokenizes labelled texts for this classifier's backbones and classes.
  std::vector<Example> encode(const std::vector<LabeledText>& texts) const;

  // Runs every backbone on the examples idx (right-padded) and pools their
  // final hidden states: feats[k] [B, d_k]. The backbones keep their
  // activations (and batches[k] the padding) for backward_features.
  void features(const std::vector<Example>& examples, const std::vector<int64_t>& idx,
                std::vector<std::vector<float>>& feats, std::vector<PaddedBatch>& batches);
  // Backpropagates dfeats[k] [B, d_k] through pooling into each backbone's
  // gradients (after features() on the same batch; trainable backbones only).
  void backward_features(const std::vector<std::vector<float>>& dfeats, const std::vector<PaddedBatch>& batches);

  // Predicted class of every example (batches of `batch`), with the mean loss
  // in *loss when given; *tokens counts the real tokens the backbones read.
  std::vector<int32_t> predict(const std::vector<Example>& examples, int64_t batch, double* loss = nullptr,
                               int64_t* tokens = nullptr);

  // Bytes of parameter state: values, and gradients + AdamW moments.
  int64_t backbone_value_bytes() const;
  int64_t backbone_grad_optimizer_bytes() const;
  int64_t head_bytes() const;
  // The backbones' activation-arena high-water marks, summed (each keeps its own), in bytes.
  int64_t activation_peak_bytes() const;

 private:
  Classifier() = default;
  void build_head(bool train_head, uint64_t seed);

  std::vector<Backbone> backbones_;
  std::vector<std::string> classes_;
  int64_t max_len_ = 0;
  bool train_backbones_ = false;
  ParamTable head_;
  HeadPlan plan_;
};

// Peak resident memory of this process so far (getrusage), in bytes.
int64_t peak_rss_bytes();

}  // namespace hymba::classify
