#include "serve/scheduler.h"

#include <algorithm>
#include <exception>

namespace hymba::serve {

Job::Job(std::vector<std::vector<int32_t>> prompts, infer::GenerateOptions options)
    : prompts_(std::move(prompts)), options_(std::move(options)), results_(prompts_.size()) {}

bool Job::next_events(std::vector<Event>& out) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !events_.empty() || over() || cancelled_; });
  if (!error_.empty() || cancelled_) return false;
  if (events_.empty()) return false;  // over: every event was taken already
  out.insert(out.end(), std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return true;
}

void Job::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return over() || cancelled_; });
}

bool Job::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return over() || cancelled_; });
}

std::string Job::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Job::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  changed_.notify_all();
}

void Job::note_token() {
  std::lock_guard lock(mutex_);
  if (!first_token_) first_token_ = std::chrono::steady_clock::now();
}

std::optional<std::chrono::steady_clock::time_point> Job::first_token_time() const {
  std::lock_guard lock(mutex_);
  return first_token_;
}

void Job::add_text(size_t sequence, std::string_view text) {
  if (text.empty()) return;
  std::lock_guard lock(mutex_);
  events_.push_back(Event{sequence, std::string(text), std::nullopt});
  changed_.notify_all();
}

void Job::finish(size_t sequence, infer::Generation generation) {
  std::lock_guard lock(mutex_);
  events_.push_back(Event{sequence, "", generation.finish});
  results_[sequence] = std::move(generation);
  ++finished_;
  changed_.notify_all();
}

void Job::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (error_.empty()) error_ = message.empty() ? "generation failed" : message;
  changed_.notify_all();
}

bool Job::abandoned() const {
  std::lock_guard lock(mutex_);
  return cancelled_ || !error_.empty();
}

Scheduler::Scheduler(LanguageModel& lm, int64_t max_batch, int64_t prefill_chunk)
    : lm_(lm),
      decoder_(lm.model(), lm.weight_format()),
      max_batch_(static_cast<size_t>(max_batch)),
      prefill_chunk_(prefill_chunk) {
  HYMBA_CHECK(max_batch >= 1, "--max-batch must be >= 1, got ", max_batch);
  HYMBA_CHECK(prefill_chunk >= 1, "--prefill-chunk must be >= 1, got ", prefill_chunk);
  decoder_.set_prefill_chunk(prefill_chunk);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      for (size_t i = 0; i < job->size(); ++i) waiting_.push_back(Waiting{job, i});
      wake_.notify_one();
      return;
    }
  }
  job->fail("the server is shutting down");
}

Scheduler::Admission Scheduler::try_submit(const std::shared_ptr<Job>& job, size_t max_queue) {
  std::lock_guard lock(mutex_);
  if (stopping_) return Admission::kStopping;
  if (waiting_.size() + tasks_.size() >= max_queue) return Admission::kQueueFull;
  for (size_t i = 0; i < job->size(); ++i) waiting_.push_back(Waiting{job, i});
  wake_.notify_one();
  return Admission::kQueued;
}

Scheduler::Admission Scheduler::run_exclusively(const std::function<void()>& run, size_t max_queue) {
  Task task{&run, nullptr, false};
  std::unique_lock lock(mutex_);
  if (stopping_) return Admission::kStopping;
  if (waiting_.size() + tasks_.size() >= max_queue) return Admission::kQueueFull;
  tasks_.push_back(&task);
  wake_.notify_one();
  task_done_.wait(lock, [&] { return task.done; });
  if (task.error) std::rethrow_exception(task.error);
  return task.stopped ? Admission::kStopping : Admission::kQueued;
}

int64_t Scheduler::waiting() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(waiting_.size() + tasks_.size());
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Scheduler::decode_steps() const {
  std::lock_guard lock(mutex_);
  return decode_steps_;
}

int64_t Scheduler::prefill_rounds() const {
  std::lock_guard lock(mutex_);
  return prefill_rounds_;
}

int64_t Scheduler::widest_step() const {
  std::lock_guard lock(mutex_);
  return widest_step_;
}

int64_t Scheduler::running() const {
  std::lock_guard lock(mutex_);
  return running_count_;
}

void Scheduler::loop() {
  for (;;) {
    std::vector<Waiting> admitted;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || !running_.empty() || !tasks_.empty(); });
      while (!tasks_.empty()) {  // run with the lock released; tasks_ holds pointers to the callers' frames
        Task* task = tasks_.front();
        tasks_.pop_front();
        const bool stopping = stopping_;
        lock.unlock();
        try {
          if (stopping) task->stopped = true;  // not run: the caller answers "shutting down"
          else (*task->run)();
        } catch (...) {
          task->error = std::current_exception();
        }
        lock.lock();
        task->done = true;
        task_done_.notify_all();
      }
      if (stopping_) break;
      while (!waiting_.empty() && running_.size() + admitted.size() < max_batch_) {
        admitted.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    for (Waiting& w : admitted) admit(std::move(w));
    std::erase_if(running_, [](const Running& r) { return r.run.done() || r.job->abandoned(); });
    prefill_round();
    std::erase_if(running_, [](const Running& r) { return r.run.done() || r.job->abandoned(); });
    step();
    std::erase_if(running_, [](const Running& r) { return r.run.done() || r.job->abandoned(); });
    std::lock_guard lock(mutex_);
    running_count_ = static_cast<int64_t>(running_.size());
  }
  std::deque<Waiting> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(waiting_);
  }
  for (Waiting& w : left) w.job->fail("the server is shutting down");
  for (Running& r : running_) r.job->fail("the server is shutting down");
  running_.clear();
}

// A new sequence takes a slot; prefill_round() feeds it its prompt.
void Scheduler::admit(Waiting w) {
  if (w.job->abandoned()) return;
  try {
    infer::SequenceRun run(decoder_, w.job->prompt(w.sequence), w.job->options(), w.sequence);
    running_.push_back(Running{w.job, w.sequence, std::move(run)});
  } catch (const std::exception& e) {
    w.job->fail(e.what());  // its sequences leave running_ with the next sweep
  }
}

// At most prefill_chunk_ prompt tokens this round, to the sequences with the
// fewest left first (a short prompt is not queued behind a long one), each
// prefilled alone (prompts differ in length); a finished prompt samples its
// first token.
void Scheduler::prefill_round() {
  std::vector<Running*> prefilling;
  for (Running& r : running_)
    if (r.run.prefilling()) prefilling.push_back(&r);
  if (prefilling.empty()) return;
  std::stable_sort(prefilling.begin(), prefilling.end(), [](const Running* a, const Running* b) {
    return a->run.prompt_tokens_left() < b->run.prompt_tokens_left();
  });
  int64_t budget = prefill_chunk_;
  for (Running* r : prefilling) {
    if (budget == 0) break;
    const int64_t n = std::min(budget, r->run.prompt_tokens_left());
    try {
      report(*r, r->run.prefill_some(decoder_, lm_.tokenizer(), n));
    } catch (const std::exception& e) {
      r->job->fail(e.what());
    }
    budget -= n;
  }
  std::lock_guard lock(mutex_);
  ++prefill_rounds_;
}

// One token for every decoding sequence, in one batched decode step.
void Scheduler::step() {
  std::vector<Running*> decoding;
  std::vector<infer::SequenceCache*> caches;
  std::vector<int32_t> feed;
  for (Running& r : running_) {
    if (r.run.prefilling()) continue;
    decoding.push_back(&r);
    caches.push_back(&r.run.cache());
    feed.push_back(r.run.last_token());
  }
  if (decoding.empty()) return;
  const size_t vocab = static_cast<size_t>(decoder_.vocab_size());
  logits_.resize(caches.size() * vocab);
  try {
    decoder_.step(caches, feed, logits_.data());
  } catch (const std::exception& e) {
    for (Running* r : decoding) r->job->fail(e.what());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    ++decode_steps_;
    widest_step_ = std::max(widest_step_, static_cast<int64_t>(caches.size()));
  }
  for (size_t j = 0; j < decoding.size(); ++j) {
    Running& r = *decoding[j];
    try {
      report(r, r.run.take(logits_.data() + j * vocab, lm_.tokenizer()));
    } catch (const std::exception& e) {
      r.job->fail(e.what());
    }
  }
}

void Scheduler::report(Running& r, std::string_view text) {
  if (r.run.sampled() > 0) r.job->note_token();
  r.job->add_text(r.sequence, text);
  if (r.run.done()) r.job->finish(r.sequence, r.run.release());
}

}  // namespace hymba::serve
