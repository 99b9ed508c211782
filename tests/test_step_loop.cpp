// The step loop that train, synth and classify share (train/step_loop.h):
// the order of a step's hooks, when it logs, evaluates and saves, early
// stops, resumes, the schedule's learning rate and the progress line.

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/step_loop.h"

namespace hymba {
namespace {

// Writes each call as one short word, and answers with figures derived from
// the step so that the records can be checked.
class RecordingHooks : public StepHooks {
 public:
  std::vector<std::string> calls;
  std::vector<StepRecord> logged, ended;
  std::vector<double> update_lrs;
  int64_t stop_after = -1;  // keep_going answers false once this many steps are done
  int64_t throw_at = -1;    // gradients throws at this step

  void before_step(int64_t step) override { calls.push_back("before " + std::to_string(step)); }
  double gradients(int64_t step) override {
    if (step == throw_at) throw std::runtime_error("gradients failed");
    calls.push_back("gradients " + std::to_string(step));
    return 10.0 + static_cast<double>(step);
  }
  double update(int64_t step, double lr) override {
    calls.push_back("update " + std::to_string(step));
    update_lrs.push_back(lr);
    return 0.5 * static_cast<double>(step);
  }
  void count(StepRecord& r) override {
    calls.push_back("count " + std::to_string(r.done));
    r.tokens_per_s = 100.0 * static_cast<double>(r.done);
  }
  void log(const StepRecord& r) override {
    calls.push_back("log " + std::to_string(r.done));
    logged.push_back(r);
  }
  void evaluate(int64_t done) override { calls.push_back("evaluate " + std::to_string(done)); }
  void checkpoint(int64_t done) override { calls.push_back("checkpoint " + std::to_string(done)); }
  bool keep_going(const StepRecord& r) override {
    calls.push_back("keep_going " + std::to_string(r.done));
    ended.push_back(r);
    return r.done != stop_after;
  }

  // The steps (done) at which `what` was called.
  std::vector<int64_t> at(const std::string& what) const {
    std::vector<int64_t> out;
    for (const std::string& c : calls)
      if (c.rfind(what + " ", 0) == 0) out.push_back(std::stoll(c.substr(what.size() + 1)));
    return out;
  }
};

StepLoopPlan plan_of(int64_t start, int64_t stop) {
  StepLoopPlan p;
  p.start = start;
  p.stop = stop;
  p.lr = [](int64_t step) { return 0.001 * static_cast<double>(step + 1); };
  return p;
}

TEST(StepLoop, CallsAStepsHooksInOrder) {
  RecordingHooks h;
  StepLoopPlan plan = plan_of(0, 2);
  plan.log_every = 1;
  plan.eval_every = 1;
  plan.save_every = 1;
  EXPECT_EQ(run_step_loop(plan, h), 2);
  const std::vector<std::string> want = {
      "before 0", "gradients 0", "update 0", "count 1", "log 1", "evaluate 1", "checkpoint 1", "keep_going 1",
      "before 1", "gradients 1", "update 1", "count 2", "log 2", "evaluate 2", "checkpoint 2", "keep_going 2"};
  EXPECT_EQ(h.calls, want);
}

TEST(StepLoop, LogsEvaluatesAndSavesEveryNStepsAndAfterTheLast) {
  RecordingHooks h;
  StepLoopPlan plan = plan_of(0, 10);
  plan.log_every = 4;
  plan.eval_every = 3;
  plan.save_every = 5;
  run_step_loop(plan, h);
  EXPECT_EQ(h.at("log"), (std::vector<int64_t>{4, 8, 10}));
  EXPECT_EQ(h.at("evaluate"), (std::vector<int64_t>{3, 6, 9, 10}));
  EXPECT_EQ(h.at("checkpoint"), (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(h.at("gradients"), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // keep_going sees which of them ran after its step.
  ASSERT_EQ(h.ended.size(), 10u);
  EXPECT_TRUE(h.ended[2].evaluated);
  EXPECT_FALSE(h.ended[2].saved);
  EXPECT_TRUE(h.ended[4].saved);
  EXPECT_FALSE(h.ended[4].evaluated);
  EXPECT_TRUE(h.ended[9].evaluated && h.ended[9].saved);
  EXPECT_FALSE(h.ended[0].evaluated || h.ended[0].saved);
}

TEST(StepLoop, AZeroIntervalNeverCallsItsHook) {
  RecordingHooks h;
  StepLoopPlan plan = plan_of(0, 3);
  plan.eval_every = 2;
  run_step_loop(plan, h);
  EXPECT_TRUE(h.at("log").empty());
  EXPECT_TRUE(h.at("checkpoint").empty());
  EXPECT_EQ(h.at("evaluate"), (std::vector<int64_t>{2, 3}));
}

TEST(StepLoop, KeepGoingFalseEndsTheLoopAfterThatStep) {
  RecordingHooks h;
  h.stop_after = 3;
  StepLoopPlan plan = plan_of(0, 8);
  plan.eval_every = 1;
  EXPECT_EQ(run_step_loop(plan, h), 3);
  EXPECT_EQ(h.at("gradients"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(h.at("evaluate"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(h.calls.back(), "keep_going 3");
}

TEST(StepLoop, AResumeStartsAtTheGivenStepWithItsScheduleAndCounts) {
  RecordingHooks h;
  StepLoopPlan plan = plan_of(5, 8);
  plan.log_every = 2;
  EXPECT_EQ(run_step_loop(plan, h), 8);
  EXPECT_EQ(h.at("before"), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(h.at("update"), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(h.update_lrs, (std::vector<double>{0.006, 0.007, 0.008}));
  // The intervals count steps done since the run began, not since the resume.
  EXPECT_EQ(h.at("log"), (std::vector<int64_t>{6, 8}));
}

TEST(StepLoop, RecordsCarryTheHooksFiguresAndTheScheduledRate) {
  RecordingHooks h;
  StepLoopPlan plan = plan_of(2, 4);
  plan.log_every = 1;
  run_step_loop(plan, h);
  ASSERT_EQ(h.logged.size(), 2u);
  const StepRecord& r = h.logged[1];
  EXPECT_EQ(r.step, 3);
  EXPECT_EQ(r.done, 4);
  EXPECT_DOUBLE_EQ(r.lr, 0.004);
  EXPECT_DOUBLE_EQ(r.loss, 13.0);           // gradients' answer
  EXPECT_DOUBLE_EQ(r.grad_norm, 1.5);       // update's answer
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 400.0);  // set by count
  EXPECT_GE(r.seconds, 0.0);
}

TEST(StepLoop, AStartAtTheStopRunsNoStep) {
  RecordingHooks h;
  EXPECT_EQ(run_step_loop(plan_of(4, 4), h), 4);
  EXPECT_TRUE(h.calls.empty());
}

TEST(StepLoop, AThrowingHookEndsTheLoopAtOnce) {
  RecordingHooks h;
  h.throw_at = 2;
  StepLoopPlan plan = plan_of(0, 6);
  plan.eval_every = 1;
  EXPECT_THROW(run_step_loop(plan, h), std::runtime_error);
  EXPECT_EQ(h.at("gradients"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(h.calls.back(), "before 2");
}

TEST(StepLoop, APlanWithoutAScheduleIsRefused) {
  RecordingHooks h;
  StepLoopPlan plan;
  plan.stop = 2;
  EXPECT_THROW(run_step_loop(plan, h), Error);
  EXPECT_TRUE(h.calls.empty());
}

TEST(StepLoop, StepDue) {
  EXPECT_TRUE(step_due(6, 3, 10));
  EXPECT_FALSE(step_due(7, 3, 10));
  EXPECT_TRUE(step_due(10, 3, 10));   // the last step
  EXPECT_FALSE(step_due(10, 0, 10));  // 0: never
  EXPECT_FALSE(step_due(4, -1, 4));
}

TEST(StepLoop, ProgressShowsEachStepsLossRateAndThroughput) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Progress progress(out, 3, 0, 1, /*force_plain=*/true);
  RecordingHooks h;
  StepLoopPlan plan = plan_of(0, 3);
  plan.progress = &progress;
  run_step_loop(plan, h);
  std::rewind(out);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, out)) text += buf;
  std::fclose(out);
  EXPECT_NE(text.find("step 1/3 loss 10.0000 lr 1.00e-03 100 tok/s"), std::string::npos) << text;
  EXPECT_NE(text.find("step 3/3 loss 12.0000 lr 3.00e-03 300 tok/s"), std::string::npos) << text;
}

}  // namespace
}  // namespace hymba
