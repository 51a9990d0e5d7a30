// SignalWatcher turns SIGINT/SIGTERM into a callback on a dedicated thread, without any global
// state: the constructor blocks both signals for the calling thread (and so for every thread it
// creates afterwards), and a watcher thread collects them with sigtimedwait. Construct it in
// main() before starting any other thread. The callback runs at most once per signal, on the
// watcher thread. Not copyable; the destructor joins the thread (within ~200 ms).
#ifndef SIEVE_NET_SIGNAL_WATCHER_H_
#define SIEVE_NET_SIGNAL_WATCHER_H_

#include <atomic>
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
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_NET_SIGNAL_WATCHER_H_
