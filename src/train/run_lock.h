// An exclusive lock on a run directory, so two `hymba train` processes never
// write one run (interleaved metrics, one run's checkpoints replacing the
// other's). flock() on OUT/train.lock: the kernel drops it when the holder
// exits or dies, so a crashed run never leaves the directory locked.
#pragma once

#include <string>

namespace hymba {

inline constexpr const char* kLockFile = "train.lock";

class RunLock {
 public:
  // Takes the lock or throws hymba::Error naming the holder:
  // "runs/x: another 'hymba train' holds this run directory (pid 123 on host
  //  h, started 2026-11-23 10:00:00 UTC); wait for it or choose another --out".
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hymba
