// Graceful stop of a training run on SIGINT (Ctrl-C) or SIGTERM: the signal
// only sets a flag; the trainer looks at it between steps, saves a
// checkpoint, says so and throws Interrupted, which main turns into exit
// status 128 + signal (130 for SIGINT, 143 for SIGTERM). A second signal
// while the checkpoint is being written kills the process as usual.
#pragma once

#include "core/error.h"

namespace hymba {

class StopSignals {
 public:
  StopSignals();   // installs the handlers (SA_RESETHAND: they fire once)
  ~StopSignals();  // restores the previous handlers
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received since construction, 0 if none.
  static int received();
};

// A run stopped by a signal after saving its checkpoint.
class Interrupted : public Error {
 public:
  Interrupted(const std::string& message, int signal) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }
  int exit_status() const { return 128 + signal_; }

 private:
  int signal_;
};

}  // namespace hymba
