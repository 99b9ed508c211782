// `hymba classify suite`: a seed's classification table as one command.
// seed-004 trains its three IMDB rows (a head on frozen GPT-Neo-125M, on
// frozen Mamba-130M, and on both) with the seed's recipe as defaults (batch
// 1, lr 5e-5, one epoch, log-softmax cross-entropy) and writes the seed's
// table beside the engine's measurements, with every way each row differs.
//
// OUT/backbones/<preset>-<scale>/  a randomly initialised preset backbone
//                                  (only for a backbone not given by flag)
// OUT/rows/<row id>/               each row's classifier (`classify train`'s directory);
//                                  repeat r > 0 in OUT/rows/<row id>.rep<r>/
// OUT/results.json, results.csv    settings + one record per run (repeat, run_seed)
// OUT/report.md, report.html       the seed's table beside ours, differences
//
// A rerun with the same flags keeps the rows already measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "classify/data.h"

namespace hymba::classify {

struct ClassifySuiteOptions {
  std::string suite = "seed-004";
  std::string data, val_path, out_dir;  // val_path empty: split val_fraction off data
  ReadOptions read;
  std::string gpt_neo, mamba;  // backbone directories; empty: the preset, randomly initialised at `scale`
  std::string scale = "tiny";  // tiny keeps the random backbones laptop-sized
  // Tokenizer of the random backbones: a file (tokenizer.json, .model), else
  // one trained on the training texts.
  std::string tokenizer;
  std::string tokenizer_type = "bpe";
  int32_t tokenizer_vocab = 4096;
  int64_t train_size = 0, eval_size = 0;  // caps for every row (0: all)
  bool seed_sizes = false;                // each row's own seed sizes (20,000; 5,000 / 200)
  std::string fusion = "concat";          // the two-backbone row's head
  std::string pooling = "mean";
  std::string loss = "log-softmax";  // or raw-logits (seed 004's variant without log-softmax)
  int64_t max_len = 256;
  int64_t batch = 1;
  double epochs = 1.0;
  double lr = 5e-5;
  double val_fraction = 0.2;
  int64_t eval_interval = 1000;  // the seed reports dev accuracy every 1,000 steps
  uint64_t seed = 1234;
  // Trainings per row with seeds seed + 0 .. repeats - 1 (OUT/rows/<id>.rep<r>
  // for r > 0); the report adds means, 95 % intervals and the seed's
  // questions. A rerun with more adds the missing repeats.
  int64_t repeats = 1;
  bool quiet = false, plain_progress = false;
};

// A row of a seed's table as the seed reports it.
struct SeedClassifyRow {
  std::string id, name;
  std::vector<std::string> backbones;  // "gpt-neo", "mamba"
  std::optional<double> dev_acc;       // none: the seed reports no accuracy
  std::optional<double> memory_mb;     // at batch 1, as the seed measured it
  std::string memory_note;             // how the seed measured it
  std::string recipe;                  // the seed's words
  int64_t train_size = 0, eval_size = 0;  // the seed's sizes (0: not stated)
};

struct ClassifySuiteInfo {
  std::string name, title, description;
  std::vector<SeedClassifyRow> rows;
};

const std::vector<ClassifySuiteInfo>& builtin_classify_suites();
// The error names --suite and lists the known suites.
const ClassifySuiteInfo& find_classify_suite(const std::string& name);

struct ClassifySuiteSummary {
  nlohmann::json results;  // results.json
  std::string report_md, report_html;
  int64_t trained = 0, reused = 0;
};

ClassifySuiteSummary run_classify_suite(const ClassifySuiteOptions& opt);

}  // namespace hymba::classify
