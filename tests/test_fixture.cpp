// Golden fixture (llm.c style): logits, loss and every parameter gradient of a
// tiny hybrid model, written by an independent float64 PyTorch implementation
// (tools/make_model_fixture.py) from the committed checkpoint. No Python is
// needed to run this test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "formats/checkpoint.h"

namespace hymba {
namespace {

const std::string kDir = std::string(HYMBA_FIXTURES_DIR) + "/tiny_hybrid";
constexpr double kLogitTol = 2e-5;  // relative to the largest |logit|
// Relative to each tensor's largest |grad|. Float32 against float64: the
// dt_layernorm weights' gradient sums terms that mostly cancel, and its error
// follows the BLAS kernels' summation order (3e-5 with OpenBLAS's AVX2
// kernels, 2.2e-4 with its AVX-512 ones on an Intel Xeon).
constexpr double kGradTol = 5e-4;

double rel_err(const float* got, const std::vector<float>& want) {
  double scale = 1e-6, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return err / scale;
}

TEST(PyTorchFixture, LogitsLossAndGradientsMatch) {
  auto model = load_model(kDir, /*training=*/true);
  const SafetensorsFile expected = SafetensorsFile::open(kDir + "/expected.safetensors");
  const SafetensorsEntry* ids_entry = expected.find("ids");
  ASSERT_NE(ids_entry, nullptr);
  const int64_t B = ids_entry->shape[0], T = ids_entry->shape[1];
  std::vector<int32_t> ids, targets;
  for (float v : expected.read_f32("ids")) ids.push_back(static_cast<int32_t>(v));
  for (float v : expected.read_f32("targets")) targets.push_back(static_cast<int32_t>(v));

  model->params().zero_grad();
  const LossStats loss = model->forward(ids.data(), targets.data(), B, T);
  model->backward();

  const float want_loss = expected.read_f32("loss")[0];
  EXPECT_NEAR(loss.loss_sum / loss.scored, want_loss, 1e-5 * std::abs(want_loss));
  EXPECT_LE(rel_err(model->logits(), expected.read_f32("logits")), kLogitTol);

  int checked = 0;
  for (const ParamInfo& p : model->params().rows()) {
    const std::vector<float> want = expected.read_f32("grad." + p.name);
    ASSERT_EQ(static_cast<int64_t>(want.size()), p.shape.numel()) << p.name;
    EXPECT_LE(rel_err(model->params().grads_block() + p.offset, want), kGradTol) << p.name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(model->params().rows().size()));
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace hymba
