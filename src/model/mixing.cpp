#include "model/mixing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

namespace hymba {

std::vector<double> learned_attention_mixing(const Model& model) {
  std::map<std::string, std::pair<double, double>> by_layer;  // prefix -> (attn, mamba)
  model.params().for_each([&](const ParamInfo& info, const float* v) {
    const std::string& n = info.name;
    const bool attn = n.ends_with("fusion.beta_attn"), mamba = n.ends_with("fusion.beta_mamba");
    if (!attn && !mamba) return;
    double sum = 0.0;
    const int64_t count = info.shape.numel();
    for (int64_t i = 0; i < count; ++i) sum += std::fabs(v[i]);
    const std::string prefix = n.substr(0, n.rfind("fusion."));
    (attn ? by_layer[prefix].first : by_layer[prefix].second) = count > 0 ? sum / static_cast<double>(count) : 0.0;
  });
  std::vector<std::pair<int64_t, double>> layers;
  for (const auto& [prefix, ab] : by_layer) {
    // prefix "model.layers.N." : order by N, not by string.
    const size_t end = prefix.size() - 1, start = prefix.rfind('.', end - 1) + 1;
    const int64_t index = std::stoll(prefix.substr(start, end - start));
    const double total = ab.first + ab.second;
    layers.emplace_back(index, total > 0 ? ab.first / total : 0.0);
  }
  std::sort(layers.begin(), layers.end());
  std::vector<double> out;
  for (const auto& l : layers) out.push_back(l.second);
  return out;
}

}  // namespace hymba
