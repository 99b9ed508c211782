// The committed import fixtures' reference logits (expected.safetensors,
// written by tools/make_import_fixtures.py) and how a model is compared with
// them; shared by the import and GPT-Neo tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "model/model.h"

namespace hymba::test {

struct Logits {
  std::vector<int32_t> ids;
  int64_t B = 0, T = 0;
  std::vector<float> want;
};

inline Logits expected(const std::string& dir) {
  const SafetensorsFile f = SafetensorsFile::open(dir + "/expected.safetensors");
  Logits l;
  l.B = f.find("ids")->shape[0];
  l.T = f.find("ids")->shape[1];
  for (float v : f.read_f32("ids")) l.ids.push_back(static_cast<int32_t>(v));
  l.want = f.read_f32("logits");
  return l;
}

inline std::vector<float> run(Model& m, const Logits& l) {
  m.forward(l.ids.data(), nullptr, l.B, l.T);
  return std::vector<float>(m.logits(), m.logits() + l.B * l.T * m.config().vocab_size);
}

// Largest |got - want| over the largest |want|.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1e-9, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return err / scale;
}

}  // namespace hymba::test
