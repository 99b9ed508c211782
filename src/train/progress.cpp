#include "train/progress.h"

#include <unistd.h>

#include <cmath>

namespace hymba {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600), static_cast<long long>(t / 60 % 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(t));
  return buf;
}

Progress::Progress(std::FILE* out, int64_t total_steps, int64_t start_step, int64_t every, bool force_plain)
    : out_(out), total_(total_steps), start_(start_step), every_(every > 0 ? every : 1),
      tty_(!force_plain && isatty(fileno(out)) != 0), t0_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, double loss, double lr, double tokens_per_s) {
  const int64_t done = step + 1;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double per_step = done > start_ ? elapsed / static_cast<double>(done - start_) : 0.0;
  const std::string eta = format_duration(per_step * static_cast<double>(total_ - done));
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total_, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r[%s] %lld/%lld loss %.4f lr %.2e %.0f tok/s ETA %s   ", bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), loss, lr, tokens_per_s, eta.c_str());
    std::fflush(out_);
    bar_shown_ = true;
  } else if (done % every_ == 0 || done == total_ || done == start_ + 1) {
    std::fprintf(out_, "step %lld/%lld loss %.4f lr %.2e %.0f tok/s ETA %s\n", static_cast<long long>(done),
                 static_cast<long long>(total_), loss, lr, tokens_per_s, eta.c_str());
    std::fflush(out_);
  }
}

void Progress::note(const std::string& line) {
  if (bar_shown_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (bar_shown_) std::fprintf(out_, "\n");
  bar_shown_ = false;
  std::fflush(out_);
}

}  // namespace hymba
