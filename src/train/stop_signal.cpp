#include "train/stop_signal.h"

#include <signal.h>

namespace hymba {

namespace {

volatile sig_atomic_t g_received = 0;
struct sigaction g_old_int {}, g_old_term {};

extern "C" void on_stop_signal(int sig) { g_received = sig; }

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // Restart interrupted reads/writes; reset to the default after one signal,
  // so a second Ctrl-C still ends a run stuck in a long step.
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopSignals::received() { return g_received; }

}  // namespace hymba
