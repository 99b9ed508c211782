// The classification head: pooling of a backbone's final hidden states, the
// fusion of two backbones' features, an optional hidden layer and the linear
// layer to class logits, trained with log-softmax cross-entropy.
//
//   pooled f_k [B, d_k]   last real token, or the mean over real tokens
//   fusion x [B, F]       single:  x = f_0                        (F = d_0)
//                         concat:  x = [f_0; f_1]                 (F = d_0 + d_1)
//                         gated:   g = sigmoid(W_g [f_0; f_1] + b_g)
//                                  x = g * f_0 + (1 - g) * f_1'   (F = d_0)
//                                  f_1' = f_1 when d_1 == d_0, else P_b f_1
//                                  (P_b [d_0, d_1], a learned projection)
//   hidden  z = tanh(W_h x + b_h)  when hidden > 0, else z = x
//   logits  W_o z + b_o [B, C]; loss = mean over the batch of -log_softmax[label],
//           or with loss_on_raw_logits -logits[label] (seed 004's variant
//           without log-softmax: NLL on raw logits, unbounded below)
//
// Parameters live in one ParamTable (gate.*, proj_b.weight, hidden.*, out.*),
// so allocation, init, save/load and AdamW work as for the backbone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/params.h"
#include "model/ops.h"

namespace hymba::classify {

enum class Pooling { kLast, kMean };
enum class FeatureFusion { kSingle, kConcat, kGated };

Pooling parse_pooling(const std::string& s);              // last | mean; errors name --pooling
// log-softmax | raw-logits (or log_softmax | raw_logits): whether the loss is
// NLL on raw logits; errors name `where`.
bool parse_raw_logits_loss(const std::string& s, const std::string& where);
FeatureFusion parse_feature_fusion(const std::string& s);  // concat | gated; errors name --fusion
const char* to_string(Pooling p);
const char* to_string(FeatureFusion f);

struct HeadConfig {
  std::vector<int64_t> widths;  // hidden size of each backbone (1 or 2 entries)
  Pooling pooling = Pooling::kLast;
  FeatureFusion fusion = FeatureFusion::kSingle;  // kSingle iff one backbone
  int64_t hidden = 0;                             // 0: linear head
  int64_t num_classes = 2;
  bool loss_on_raw_logits = false;  // JSON "loss": "raw_logits" (default "log_softmax")

  int64_t fused_width() const;  // F
  void validate() const;        // one-line errors naming the flag
  nlohmann::json to_json() const;
  static HeadConfig from_json(const nlohmann::json& j, const std::string& where);
};

// Declares the head's rows (weights normal with std 1/sqrt(fan_in), biases 0).
void declare_head(const HeadConfig& cfg, ParamTable& table);

// Offsets of the head's rows in the table's blocks (-1: absent).
struct HeadPlan {
  HeadConfig cfg;
  int64_t gate_w = -1, gate_b = -1, proj_b = -1, hidden_w = -1, hidden_b = -1, out_w = -1, out_b = -1;
  static HeadPlan make(const HeadConfig& cfg, const ParamTable& table);
};

template <typename T>
struct HeadActs {
  int64_t B = 0;
  std::vector<T> cat;     // [B, d_0 + d_1] (concat, gated)
  std::vector<T> fb;      // [B, d_0] projected f_1 (gated with d_1 != d_0)
  std::vector<T> gate;    // [B, d_0] g (gated)
  std::vector<T> x;       // [B, F]
  std::vector<T> z;       // [B, hidden] (hidden > 0)
  std::vector<T> logits;  // [B, C]
  std::vector<const T*> feats;
};

// Runs the head on pooled features feats[k] [B, d_k]; with labels returns
// the summed loss, count and correct predictions. Written once for float and
// double (the gradient checks run it in float64).
template <typename T>
LossStats head_forward(const HeadPlan& plan, const T* P, const std::vector<const T*>& feats, int64_t B,
                       const int32_t* labels, HeadActs<T>& acts);

// Accumulates into G the gradient of dloss * (summed loss) of the last
// forward, and overwrites dfeats[k] [B, d_k] with the features' gradient
// (a null entry skips it: a frozen backbone needs none).
void head_backward(const HeadPlan& plan, const float* P, float* G, const HeadActs<float>& acts,
                   const int32_t* labels, float dloss, const std::vector<float*>& dfeats);

// Pools hidden [B, S, d] (M meta rows, then the tokens; lengths[b] real
// tokens, right padding after them) into feat [B, d]. Meta rows are never
// pooled: they are a prefix every token already sees.
template <typename T>
void pool_forward(T* feat, const T* hidden, int64_t B, int64_t S, int64_t M, int64_t d, const int64_t* lengths,
                  Pooling pooling);
// dhidden [B, S, d] += the gradient that dfeat [B, d] sends back through pooling.
void pool_backward(float* dhidden, const float* dfeat, int64_t B, int64_t S, int64_t M, int64_t d,
                   const int64_t* lengths, Pooling pooling);

}  // namespace hymba::classify
