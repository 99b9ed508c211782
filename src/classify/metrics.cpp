#include "classify/metrics.h"

#include "core/error.h"

namespace hymba::classify {

Metrics compute_metrics(const std::vector<int32_t>& truth, const std::vector<int32_t>& predicted,
                        const std::vector<std::string>& classes) {
  HYMBA_CHECK(truth.size() == predicted.size(), "metrics: ", truth.size(), " labels but ", predicted.size(),
              " predictions");
  HYMBA_CHECK(!truth.empty(), "metrics: no examples to score");
  const size_t K = classes.size();
  Metrics m;
  m.examples = static_cast<int64_t>(truth.size());
  m.confusion.assign(K, std::vector<int64_t>(K, 0));
  for (size_t i = 0; i < truth.size(); ++i) {
    HYMBA_CHECK(truth[i] >= 0 && static_cast<size_t>(truth[i]) < K && predicted[i] >= 0 &&
                    static_cast<size_t>(predicted[i]) < K,
                "metrics: class index outside [0, ", K, ")");
    ++m.confusion[truth[i]][predicted[i]];
    m.correct += truth[i] == predicted[i];
  }
  m.accuracy = static_cast<double>(m.correct) / static_cast<double>(m.examples);
  for (size_t k = 0; k < K; ++k) {
    ClassFigures c;
    c.name = classes[k];
    for (size_t j = 0; j < K; ++j) {
      c.support += m.confusion[k][j];
      c.predicted += m.confusion[j][k];
    }
    const double tp = static_cast<double>(m.confusion[k][k]);
    c.precision = c.predicted > 0 ? tp / static_cast<double>(c.predicted) : 0.0;
    c.recall = c.support > 0 ? tp / static_cast<double>(c.support) : 0.0;
    c.f1 = c.precision + c.recall > 0 ? 2 * c.precision * c.recall / (c.precision + c.recall) : 0.0;
    m.macro_f1 += c.f1 / static_cast<double>(K);
    m.classes.push_back(c);
  }
  return m;
}

nlohmann::json Metrics::to_json() const {
  nlohmann::json per_class = nlohmann::json::array();
  for (const ClassFigures& c : classes)
    per_class.push_back({{"class", c.name},
                         {"support", c.support},
                         {"predicted", c.predicted},
                         {"precision", c.precision},
                         {"recall", c.recall},
                         {"f1", c.f1}});
  return {{"examples", examples}, {"correct", correct},   {"accuracy", accuracy},          {"macro_f1", macro_f1},
          {"loss", loss},         {"per_class", per_class}, {"confusion_matrix", confusion}};
}

}  // namespace hymba::classify
