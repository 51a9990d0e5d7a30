// SignalWatcher turns SIGINT/SIGTERM into a callback on a dedicated thread.
//
// While it exists, both signals have a handler whose only job is to write the signal number to a
// pipe the watcher owns; the watcher thread sleeps in poll() on that pipe (no periodic wake-ups:
// an idle daemon costs no CPU) and calls the callback, on that thread, once per signal the handler
// ran for, in order. So it does not matter which thread the kernel picks for a process-directed
// signal: threads that existed before the watcher with the signals unblocked (for example a
// library's thread pool started by its constructor before main(), as OpenBLAS does) run the
// handler too, and the signal reaches the callback instead of killing the process.
//
// The constructor also blocks both signals for the calling thread (and so for every thread it
// creates afterwards), so that the process's own threads are never interrupted by them (no EINTR);
// the watcher thread unblocks them for itself, so a signal always has a thread to run on. Threads
// that existed before may be interrupted (the handler is installed with SA_RESTART): construct it
// in main() before starting the program's own threads.
//
// A signal that comes before the constructor installs the handler, or once the destructor has
// begun, gets the disposition in place before the watcher (by default: the process is killed).
// The destructor restores those dispositions, passes the signals that came before to the
// callback, wakes and joins the watcher thread, and, when it runs on the thread that constructed
// the watcher, unblocks the signals the constructor blocked there.
//
// At most one SignalWatcher may exist at a time in a process: the handler reaches the pipe through
// one process-wide variable (a signal handler has no other way), and constructing a second watcher
// while one exists aborts, as does a process out of descriptors for the pipe. Not copyable.
#ifndef SIEVE_NET_SIGNAL_WATCHER_H_
#define SIEVE_NET_SIGNAL_WATCHER_H_

#include <pthread.h>
#include <signal.h>

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
  int read_fd_ = -1;   // the watcher thread's end of the pipe
  int write_fd_ = -1;  // the handler's end
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  pthread_t owner_;     // the thread that constructed the watcher
  sigset_t unblock_{};  // the signals the constructor blocked for owner_ (not blocked before)
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_NET_SIGNAL_WATCHER_H_
