// The server's decode loop: one thread owns the model's Decoder and runs
// every sequence of every request in flight. Each round it admits waiting
// sequences up to max_batch, prefills at most prefill_chunk prompt tokens
// (shortest prompt left first, each sequence alone), then feeds one token
// per decoding sequence in a single batched step: a long prompt is
// prefilled a chunk per round, so it never stalls the others' decoding or a
// short prompt's first token, and concurrent clients share decode steps. Each sequence samples from its own stream of
// its request's seed, so its text equals that of running the request alone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/hymba.h"
#include "infer/generate.h"

namespace hymba::serve {

// One request's sequences and what became of them, shared by the HTTP
// thread that waits on it and the scheduler thread that fills it in.
class Job {
 public:
  // Sequence i continues prompts[i] from stream i of options.sampling.seed.
  Job(std::vector<std::vector<int32_t>> prompts, infer::GenerateOptions options);

  struct Event {
    size_t sequence = 0;
    std::string text;                           // text that became final
    std::optional<infer::FinishReason> finish;  // set once, on the sequence's last event
  };
  // Blocks until there are events (appended to out) or nothing more will
  // come; returns false in the latter case (all done, or failed: see error()).
  bool next_events(std::vector<Event>& out);
  // Blocks until every sequence is done or the job failed.
  void wait();
  // As wait(), for at most timeout; returns whether the job is over.
  bool wait_for(std::chrono::milliseconds timeout);
  // After wait(): "" on success, else why the job failed (one line).
  std::string error() const;
  // After a successful wait(): the generations, in sequence order.
  const std::vector<infer::Generation>& results() const { return results_; }
  // The client went away: the scheduler drops its sequences.
  void cancel();
  // When the first token of any sequence was sampled (the prompts are in);
  // unset before.
  std::optional<std::chrono::steady_clock::time_point> first_token_time() const;

  // Scheduler side.
  size_t size() const { return prompts_.size(); }
  const std::vector<int32_t>& prompt(size_t i) const { return prompts_[i]; }
  const infer::GenerateOptions& options() const { return options_; }
  void add_text(size_t sequence, std::string_view text);
  void note_token();  // a sequence sampled a token (first_token_time)
  void finish(size_t sequence, infer::Generation generation);
  void fail(const std::string& message);
  bool abandoned() const;  // cancelled or failed: nothing more to do

 private:
  bool over() const { return !error_.empty() || finished_ == prompts_.size(); }

  const std::vector<std::vector<int32_t>> prompts_;
  const infer::GenerateOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Event> events_;
  std::vector<infer::Generation> results_;
  size_t finished_ = 0;
  std::string error_;
  bool cancelled_ = false;
  std::optional<std::chrono::steady_clock::time_point> first_token_;
};

class Scheduler {
 public:
  // Runs model's sequences on its own thread; lm must outlive the scheduler
  // and not be used elsewhere meanwhile.
  // prefill_chunk: prompt tokens prefilled per round, all sequences together.
  Scheduler(LanguageModel& lm, int64_t max_batch, int64_t prefill_chunk = 256);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues every sequence of the job (fails it at once after stop()).
  void submit(const std::shared_ptr<Job>& job);
  enum class Admission { kQueued, kQueueFull, kStopping };
  // Queues the job unless max_queue sequences or more already wait for a
  // decode slot (kQueueFull) or the scheduler is stopping; a refused job is
  // left untouched.
  Admission try_submit(const std::shared_ptr<Job>& job, size_t max_queue);
  // Runs task on the scheduler thread between decode steps (the model is
  // the scheduler's alone) and returns kQueued once it ran; an exception it
  // throws comes back here. Not run: kStopping, or kQueueFull when max_queue
  // sequences and tasks or more already wait (a scoring request queues like
  // a sequence; work already admitted passes no max_queue).
  Admission run_exclusively(const std::function<void()>& task, size_t max_queue = SIZE_MAX);
  // Fails what is queued or running ("the server is shutting down") and
  // joins the thread.
  void stop();

  // Counters for tests and logs: decode steps run, the most sequences one
  // step has fed, and the sequences running now.
  int64_t decode_steps() const;
  int64_t prefill_rounds() const;  // rounds that prefilled prompt tokens
  int64_t widest_step() const;
  int64_t running() const;
  int64_t waiting() const;  // sequences and tasks queued, not yet admitted or run

 private:
  struct Waiting {
    std::shared_ptr<Job> job;
    size_t sequence = 0;
  };
  struct Running {
    std::shared_ptr<Job> job;
    size_t sequence = 0;
    infer::SequenceRun run;
  };
  void loop();
  void admit(Waiting w);
  void prefill_round();
  void step();
  void report(Running& r, std::string_view text);

  LanguageModel& lm_;
  infer::Decoder decoder_;
  const size_t max_batch_;
  const int64_t prefill_chunk_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Waiting> waiting_;
  struct Task {
    const std::function<void()>* run = nullptr;
    std::exception_ptr error;
    bool done = false;
    bool stopped = false;  // the scheduler stopped before running it
  };
  std::deque<Task*> tasks_;  // run_exclusively's, waiting for the scheduler thread
  std::condition_variable task_done_;
  bool stopping_ = false;
  int64_t decode_steps_ = 0, prefill_rounds_ = 0, widest_step_ = 0, running_count_ = 0;
  std::vector<Running> running_;  // scheduler thread only
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace hymba::serve
