// SignalWatcher turns SIGINT/SIGTERM into a callback on a dedicated thread, without any global
// state: the constructor blocks both signals for the calling thread (and so for every thread it
// creates afterwards), and a watcher thread collects them with sigwaitinfo. Construct it in
// main() before starting any other thread. The callback runs at most once per signal, on the
// watcher thread. The thread sleeps until a signal comes (no periodic wake-ups: an idle daemon
// costs no CPU); the destructor wakes it with a SIGTERM queued to that thread alone and marked as
// its own (never passed to the callback), then joins it. Not copyable.
#ifndef SIEVE_NET_SIGNAL_WATCHER_H_
#define SIEVE_NET_SIGNAL_WATCHER_H_

#include <functional>
#include <thread>

namespace sieve {

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int signo)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  std::function<void(int)> on_signal_;
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_NET_SIGNAL_WATCHER_H_
