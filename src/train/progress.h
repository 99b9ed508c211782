// Training progress on the terminal: a live bar on a TTY, periodic plain lines
// otherwise (logs, CI, pipes).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hymba {

class Progress {
 public:
  // every: plain-line interval in steps when not on a terminal.
  Progress(std::FILE* out, int64_t total_steps, int64_t start_step, int64_t every, bool force_plain = false);
  void update(int64_t step, double loss, double lr, double tokens_per_s);
  // A line that must not be overwritten by the bar (eval results, saves).
  void note(const std::string& line);
  void finish();
  bool interactive() const { return tty_; }

 private:
  std::FILE* out_;
  int64_t total_, start_, every_;
  bool tty_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point t0_;
};

std::string format_duration(double seconds);

}  // namespace hymba
