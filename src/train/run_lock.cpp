#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace hymba {

namespace {

std::string holder_line() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return "pid " + std::to_string(::getpid()) + " on host " + host + ", started " + when;
}

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ssize_t got;
  off_t at = 0;
  while ((got = ::pread(fd, buf, sizeof buf, at)) > 0) {
    text.append(buf, static_cast<size_t>(got));
    at += got;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / kLockFile).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path, ": cannot open the run lock: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = read_all(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) fail(path, ": cannot lock the run directory: ", std::strerror(err));
    // The holder writes its line just after locking: an empty file means it
    // is starting at this very moment.
    if (holder.empty()) holder = "holder still starting";
    fail(run_dir, ": another 'hymba train' holds this run directory (", holder,
         "); wait for it to finish or choose another --out");
  }
  // Ours now: say who holds it, for the next one to ask.
  const std::string line = holder_line() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail(path, ": cannot write the run lock: ", std::strerror(err));
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Emptied so a stale file never names a finished run; the flock itself
  // goes with the descriptor.
  if (::ftruncate(fd_, 0) != 0) {
    // Nothing to do: the lock is released with the descriptor all the same.
  }
  ::close(fd_);
}

}  // namespace hymba
