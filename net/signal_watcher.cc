#include "net/signal_watcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace sieve {
namespace {

// The sigval the destructor queues; a signal from another process cannot carry it with our pid.
constexpr int kStopMark = 0x51e7e;

bool IsStopRequest(const siginfo_t& info) {
  return info.si_code == SI_QUEUE && info.si_pid == getpid() &&
         info.si_value.sival_int == kStopMark;
}

}  // namespace

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set] {
    while (true) {
      siginfo_t info{};
      const int sig = sigwaitinfo(&set, &info);
      if (sig < 0) {
        if (errno == EINTR) continue;
        return;  // EINVAL cannot happen for this set; do not spin
      }
      if (IsStopRequest(info)) return;
      if (on_signal_) on_signal_(sig);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  if (!thread_.joinable()) return;
  sigval v{};
  v.sival_int = kStopMark;
  // Thread-directed: stays pending for the watcher (which blocks SIGTERM) until it collects it.
  pthread_sigqueue(thread_.native_handle(), SIGTERM, v);
  thread_.join();
}

}  // namespace sieve
