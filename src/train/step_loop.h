// The step loop that `hymba train`, `hymba synth` and `hymba classify train`
// share: the step counter, the learning-rate lookup, the order of a step's
// parts, when to log, evaluate and save, and the progress line. Each trainer
// supplies what differs (its batches, gradients, optimizer, evaluation and
// checkpoints) as StepHooks.
#pragma once

#include <cstdint>
#include <functional>

#include "train/progress.h"

namespace hymba {

// One optimizer step as the hooks after it see it.
struct StepRecord {
  int64_t step = 0;           // 0-based index of the step just taken
  int64_t done = 0;           // steps completed, this one included
  double lr = 0.0;            // StepLoopPlan::lr at `step`
  double loss = 0.0;          // StepHooks::gradients
  double grad_norm = 0.0;     // StepHooks::update
  double seconds = 0.0;       // gradients and update together
  double tokens_per_s = 0.0;  // set by StepHooks::count for the progress line
  bool evaluated = false;     // StepHooks::evaluate ran after this step
  bool saved = false;         // StepHooks::checkpoint ran after this step
};

// A trainer's parts of a step, called by run_step_loop in this order:
// before_step, gradients, update, count, (progress), log, evaluate,
// checkpoint, keep_going. Any of them may throw to end the run.
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Before the step: a new epoch's shuffle, a stop asked before any step.
  virtual void before_step(int64_t /*step*/) {}
  // The step's gradients (zeroed first); returns the step's loss.
  virtual double gradients(int64_t step) = 0;
  // Clipping and the optimizer step(s) at `lr`; returns the gradient norm
  // before clipping (0 where the trainer does not report one).
  virtual double update(int64_t step, double lr) = 0;
  // The step's bookkeeping (times, tokens, running sums); may set
  // step.tokens_per_s, which the progress line shows.
  virtual void count(StepRecord& /*step*/) {}
  // A metrics record, every StepLoopPlan::log_every steps.
  virtual void log(const StepRecord& /*step*/) {}
  // Validation, every StepLoopPlan::eval_every steps.
  virtual void evaluate(int64_t /*done*/) {}
  // A checkpoint, every StepLoopPlan::save_every steps.
  virtual void checkpoint(int64_t /*done*/) {}
  // false ends the loop after this step (an early stop).
  virtual bool keep_going(const StepRecord& /*step*/) { return true; }
};

struct StepLoopPlan {
  int64_t start = 0;                       // the first step's index: a resumed run's checkpoint step
  int64_t stop = 0;                        // the loop ends once this many steps are done
  std::function<double(int64_t step)> lr;  // the schedule, by 0-based step
  // Log, evaluate and save when the steps done are a multiple of these and
  // after the last step; 0: never.
  int64_t log_every = 0, eval_every = 0, save_every = 0;
  Progress* progress = nullptr;  // updated after every step, finished at the end
};

// Whether `done` steps call for an action taken every `every` steps and
// after the last of `stop` (never when every <= 0).
bool step_due(int64_t done, int64_t every, int64_t stop);

// Runs steps plan.start .. plan.stop - 1 through `hooks`; returns the steps
// done when it ended: plan.stop unless keep_going stopped it early.
int64_t run_step_loop(const StepLoopPlan& plan, StepHooks& hooks);

}  // namespace hymba
