#include "eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "data/corpus.h"
#include "data/batch_sampler.h"
#include "dist/communicator.h"

namespace hymba {

namespace {

int64_t count_windows(std::span<const int32_t> tokens, int64_t seq_len, int64_t max_windows, int64_t stride) {
  HYMBA_CHECK(seq_len >= 1, "evaluate: seq_len must be >= 1");
  int64_t windows = num_eval_windows(tokens, seq_len, stride);
  HYMBA_CHECK(windows > 0, "evaluate: ", tokens.size(), " tokens are fewer than one window of --seq-len ", seq_len,
              " + 1");
  if (max_windows > 0) windows = std::min(windows, max_windows);
  return windows;
}

// Loss, perplexity and accuracy from the sums, refusing what overflows.
EvalResult finish(EvalResult r, double loss_sum, int64_t correct) {
  r.loss = r.tokens > 0 ? loss_sum / static_cast<double>(r.tokens) : 0.0;
  // A NaN/Inf loss from finite inputs means the weights overflow float32.
  // NaN's sign bit depends on how the compiler ordered commutative operands: say "nan" either way.
  HYMBA_CHECK(std::isfinite(r.loss), "evaluate: the loss is ", std::isnan(r.loss) ? "nan" : r.loss > 0 ? "inf" : "-inf",
              "; the model's weights overflow float32 arithmetic (check the checkpoint)");
  r.ppl = std::exp(r.loss);
  // A finite loss past ~709 nats (e^709 overflows a double) is no language model's:
  // the logits are astronomically large, so report it instead of "ppl inf".
  HYMBA_CHECK(std::isfinite(r.ppl), "evaluate: the loss is ", r.loss,
              " and the perplexity overflows; the logits are far outside float32's useful range, so the model's "
              "weights overflow (check the checkpoint)");
  r.accuracy = r.tokens > 0 ? static_cast<double>(correct) / static_cast<double>(r.tokens) : 0.0;
  return r;
}

// Batch k of the windows goes to rank k % ranks; `comm` sums the counts.
EvalResult evaluate_batches(Model& model, std::span<const int32_t> tokens, int64_t seq_len, int64_t batch,
                            int64_t max_windows, const dist::Communicator& comm, const EvalProgress& on_progress,
                            int64_t stride) {
  HYMBA_CHECK(batch >= 1, "evaluate: batch must be >= 1");
  const int64_t windows = count_windows(tokens, seq_len, max_windows, stride);
  const int64_t S = stride > 0 ? stride : seq_len;
  EvalResult r;
  r.windows = windows;
  double loss_sum = 0.0;
  int64_t correct = 0;
  std::vector<int32_t> ids, targets;
  const int64_t ranks = comm.size(), rank = comm.rank();
  for (int64_t w0 = rank * batch; w0 < windows; w0 += ranks * batch) {
    const int64_t b = std::min(batch, windows - w0);
    ids.resize(static_cast<size_t>(b * seq_len));
    targets.resize(ids.size());
    for (int64_t i = 0; i < b; ++i) {
      const int32_t* src = tokens.data() + (w0 + i) * S;
      std::copy(src, src + seq_len, ids.begin() + i * seq_len);
      std::copy(src + 1, src + seq_len + 1, targets.begin() + i * seq_len);
    }
    const LossStats s = model.forward(ids.data(), targets.data(), b, seq_len);
    loss_sum += s.loss_sum;
    correct += s.correct;
    r.tokens += s.scored;
    if (on_progress) on_progress(w0 + b, windows);
  }
  if (ranks > 1) {
    double sums[3] = {loss_sum, static_cast<double>(correct), static_cast<double>(r.tokens)};
    comm.sum(sums, 3);  // counts below 2^53 stay exact in a double
    loss_sum = sums[0];
    correct = static_cast<int64_t>(sums[1]);
    r.tokens = static_cast<int64_t>(sums[2]);
  }
  return finish(r, loss_sum, correct);
}

}  // namespace

EvalResult evaluate(Model& model, std::span<const int32_t> tokens, int64_t seq_len, int64_t batch,
                    int64_t max_windows, const EvalProgress& on_progress, int64_t stride) {
  return evaluate_batches(model, tokens, seq_len, batch, max_windows, dist::Communicator(), on_progress, stride);
}

EvalResult evaluate_shared(Model& model, std::span<const int32_t> tokens, int64_t seq_len, int64_t batch,
                           int64_t max_windows, const dist::Communicator& comm, int64_t stride) {
  return evaluate_batches(model, tokens, seq_len, batch, max_windows, comm, {}, stride);
}

EvalResult evaluate_logits(std::span<const int32_t> tokens, int64_t seq_len, int64_t max_windows, int64_t vocab,
                           const WindowLogits& logits_of, const EvalProgress& on_progress, int64_t stride) {
  EvalResult r;
  r.windows = count_windows(tokens, seq_len, max_windows, stride);
  const int64_t S = stride > 0 ? stride : seq_len;
  double loss_sum = 0.0;
  int64_t correct = 0;
  std::vector<float> logits;
  for (int64_t w = 0; w < r.windows; ++w) {
    const int32_t* src = tokens.data() + w * S;
    logits_of(std::span<const int32_t>(src, static_cast<size_t>(seq_len)), logits);
    HYMBA_CHECK(static_cast<int64_t>(logits.size()) == seq_len * vocab, "evaluate: ", logits.size(),
                " logits for a window of ", seq_len, " x ", vocab);
    for (int64_t t = 0; t < seq_len; ++t) {
      const float* row = logits.data() + t * vocab;
      const int32_t target = src[t + 1];
      int64_t best = 0;
      double top = row[0];
      for (int64_t v = 1; v < vocab; ++v)
        if (row[v] > top) top = row[best = v];
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
      loss_sum += top + std::log(sum) - static_cast<double>(row[target]);
      correct += best == target ? 1 : 0;
      r.top1.push_back(static_cast<int32_t>(best));
    }
    r.tokens += seq_len;
    if (on_progress) on_progress(w + 1, r.windows);
  }
  return finish(r, loss_sum, correct);
}

}  // namespace hymba
