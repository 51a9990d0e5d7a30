#include "net/signal_watcher.h"

#include <signal.h>

#include <ctime>

namespace sieve {

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set] {
    const timespec tick{0, 200 * 1000 * 1000};
    while (!stop_) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig > 0 && on_signal_) on_signal_(sig);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace sieve
