// Loss, perplexity and next-token accuracy of a model over a token stream.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "model/model.h"

namespace hymba {

struct EvalResult {
  double loss = 0.0;      // mean cross-entropy per scored token (nats)
  double ppl = 0.0;       // exp(loss)
  double accuracy = 0.0;  // argmax == target
  int64_t tokens = 0;     // scored tokens
  int64_t windows = 0;
  // The argmax at each scored position, in order: filled by
  // evaluate_logits, for comparing one weight format's predictions with
  // another's (`hymba eval --top1-out / --top1-against`).
  std::vector<int32_t> top1;
};

// Called after each batch with the windows done and the total (long splits take minutes).
using EvalProgress = std::function<void(int64_t windows_done, int64_t windows_total)>;

// Runs non-overlapping windows of seq_len + 1 tokens (the first max_windows,
// all when max_windows <= 0), batch at a time. No dropout, no gradients.
// Window w starts at token w * stride (stride 0: seq_len, a stream; seq_len
// + 1: whole chunks back to back, TokenDataset::window_stride()).
EvalResult evaluate(Model& model, std::span<const int32_t> tokens, int64_t seq_len, int64_t batch,
                    int64_t max_windows, const EvalProgress& on_progress = {}, int64_t stride = 0);

// The same windows scored from logits another engine computes (e.g. the
// cached decoder with quantized weights): logits_of(ids, T, out) writes the
// [T, vocab] logits of one window's T inputs. Cross-entropy in double.
using WindowLogits = std::function<void(std::span<const int32_t> ids, std::vector<float>& logits)>;
EvalResult evaluate_logits(std::span<const int32_t> tokens, int64_t seq_len, int64_t max_windows, int64_t vocab,
                           const WindowLogits& logits_of, const EvalProgress& on_progress = {}, int64_t stride = 0);

// The same windows split across the ranks of `comm` (batch k on rank
// k % ranks), the sums added in rank order: every rank gets the result.
EvalResult evaluate_shared(Model& model, std::span<const int32_t> tokens, int64_t seq_len, int64_t batch,
                           int64_t max_windows, const dist::Communicator& comm, int64_t stride = 0);

}  // namespace hymba
