// `hymba classify train` and `hymba classify eval`: training a classification
// head (and optionally the backbones) on labelled text, and scoring a saved
// classifier. Both write summary.json and report.md / report.html.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "classify/data.h"
#include "train/optimizer.h"

namespace hymba::classify {

struct ClassifyTrainOptions {
  std::vector<std::string> backbones;  // one or two checkpoint / run directories
  std::string train_path, val_path;    // val_path empty: split val_fraction off train
  ReadOptions read;
  std::string classes;          // comma-separated; empty: sorted labels of the training data
  std::string out_dir;
  std::string pooling = "mean";  // mean | last
  std::string fusion;            // two backbones: concat (default) | gated; empty with one
  int64_t hidden = 0;            // head hidden layer width (0: linear)
  std::string loss = "log-softmax";  // or raw-logits: NLL on raw logits (seed 004's variant)
  bool freeze = true;            // backbones frozen (no gradients or moments)
  int64_t max_len = 256;
  int64_t batch = 8;
  double epochs = 3.0;  // when steps == 0
  int64_t steps = 0;
  double lr = 1e-3;           // head
  double backbone_lr = 1e-4;  // unfrozen backbones
  double min_lr_ratio = 0.1;
  int64_t warmup = 10;
  AdamWConfig adamw{0.9, 0.999, 1e-8, 0.01};
  double grad_clip = 1.0;
  double val_fraction = 0.2;
  // Caps on the examples used (0: all), drawn by a seeded shuffle after the
  // split (seed 004's train_size / eval_size).
  int64_t train_size = 0, eval_size = 0;
  int64_t eval_interval = 0;  // steps between validations (0: once per epoch)
  int64_t log_interval = 10;
  uint64_t seed = 1234;
  bool quiet = false;
  bool plain_progress = false;
};

// Trains and writes the classifier to out_dir with summary.json, metrics.jsonl
// and report.md / report.html. Returns the summary.
nlohmann::json train_classifier(const ClassifyTrainOptions& opt);

struct ClassifyEvalOptions {
  std::string classifier_dir;
  std::string data_path;
  ReadOptions read;
  std::string out_dir;  // empty: <classifier_dir>/eval
  int64_t batch = 8;
  bool quiet = false;
};

// Scores a saved classifier on labelled data; writes summary.json and the
// report into out_dir. Returns the summary.
nlohmann::json eval_classifier(const ClassifyEvalOptions& opt);

}  // namespace hymba::classify
