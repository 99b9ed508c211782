// Classification figures: accuracy, per-class precision / recall / F1 and
// the confusion matrix (rows: true class, columns: predicted class).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymba::classify {

struct ClassFigures {
  std::string name;
  int64_t support = 0;    // examples whose true class this is
  int64_t predicted = 0;  // examples predicted as this class
  double precision = 0.0, recall = 0.0, f1 = 0.0;  // 0 where undefined (nothing predicted / no support)
};

struct Metrics {
  int64_t examples = 0, correct = 0;
  double accuracy = 0.0;
  double macro_f1 = 0.0;  // unweighted mean of the classes' F1
  double loss = 0.0;      // mean cross-entropy, when the caller sets it
  std::vector<ClassFigures> classes;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  nlohmann::json to_json() const;
};

// truth and predicted are class indices into classes (same length, >= 1).
Metrics compute_metrics(const std::vector<int32_t>& truth, const std::vector<int32_t>& predicted,
                        const std::vector<std::string>& classes);

}  // namespace hymba::classify
