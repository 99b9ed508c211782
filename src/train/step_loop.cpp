#include "train/step_loop.h"

#include <chrono>

#include "core/error.h"

namespace hymba {

bool step_due(int64_t done, int64_t every, int64_t stop) { return every > 0 && (done % every == 0 || done == stop); }

namespace {

// One step's parts up to its bookkeeping.
StepRecord take_step(const StepLoopPlan& plan, StepHooks& hooks, int64_t step) {
  StepRecord r;
  r.step = step;
  r.done = step + 1;
  r.lr = plan.lr(step);
  const auto t0 = std::chrono::steady_clock::now();
  r.loss = hooks.gradients(step);
  r.grad_norm = hooks.update(step, r.lr);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  hooks.count(r);
  if (plan.progress) plan.progress->update(step, r.loss, r.lr, r.tokens_per_s);
  return r;
}

}  // namespace

int64_t run_step_loop(const StepLoopPlan& plan, StepHooks& hooks) {
  HYMBA_CHECK(static_cast<bool>(plan.lr), "run_step_loop: the plan has no learning-rate schedule");
  int64_t done = plan.start;
  for (int64_t step = plan.start; step < plan.stop; ++step) {
    hooks.before_step(step);
    StepRecord r = take_step(plan, hooks, step);
    done = r.done;
    if (step_due(r.done, plan.log_every, plan.stop)) hooks.log(r);
    r.evaluated = step_due(r.done, plan.eval_every, plan.stop);
    if (r.evaluated) hooks.evaluate(r.done);
    r.saved = step_due(r.done, plan.save_every, plan.stop);
    if (r.saved) hooks.checkpoint(r.done);
    if (!hooks.keep_going(r)) break;
  }
  if (plan.progress) plan.progress->finish();
  return done;
}

}  // namespace hymba
