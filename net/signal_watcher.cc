#include "net/signal_watcher.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace sieve {
namespace {

constexpr int kNoWatcher = -1;
constexpr int kHandlerWriting = -2;

// The write end of the live watcher's pipe; kNoWatcher; or kHandlerWriting while a handler writes
// to that end (it puts the descriptor back after its write()), so the destructor never closes the
// descriptor under a handler. The one piece of process-wide state here, which the OS imposes: a
// signal handler can reach nothing else. Set by the constructor, reset by the destructor.
std::atomic<int> g_signal_pipe{kNoWatcher};
static_assert(std::atomic<int>::is_always_lock_free, "read and written by a signal handler");

// The SIGINT/SIGTERM handler, on whichever thread the kernel picked. Async-signal-safe.
void ForwardSignal(int signo) {
  const int saved_errno = errno;
  int fd = g_signal_pipe.load(std::memory_order_acquire);
  for (;;) {
    if (fd == kNoWatcher) {
      // The destructor has already put the previous disposition back: the signal gets it as soon
      // as this handler returns (the signal is blocked on this thread until then).
      raise(signo);
      break;
    }
    if (fd == kHandlerWriting) {  // another thread's handler, for the length of one write()
      fd = g_signal_pipe.load(std::memory_order_acquire);
      continue;
    }
    if (g_signal_pipe.compare_exchange_weak(fd, kHandlerWriting, std::memory_order_acquire)) {
      const unsigned char byte = static_cast<unsigned char>(signo);
      // Non-blocking: with 64 KiB of signals unread the pipe is full and this one is dropped.
      const ssize_t written = write(fd, &byte, 1);
      (void)written;
      g_signal_pipe.store(fd, std::memory_order_release);
      break;
    }
  }
  errno = saved_errno;
}

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)), owner_(pthread_self()) {
  int fds[2];
  PCHECK(pipe2(fds, O_CLOEXEC) == 0) << "SignalWatcher: pipe2";
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  PCHECK(fcntl(write_fd_, F_SETFL, O_NONBLOCK) == 0) << "SignalWatcher: fcntl";
  int none = kNoWatcher;
  CHECK(g_signal_pipe.compare_exchange_strong(none, write_fd_, std::memory_order_acq_rel))
      << "SignalWatcher: another SignalWatcher exists in this process";

  const sigset_t set = WatchedSignals();
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &set, &before);
  sigemptyset(&unblock_);
  for (int signo : {SIGINT, SIGTERM}) {
    if (!sigismember(&before, signo)) sigaddset(&unblock_, signo);
  }
  // Inherits the blocked signals; takes them (runs the handler) only while it waits.
  thread_ = std::thread([this, set] {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    unsigned char signals[64];
    for (;;) {
      // poll() before read(): a signal that lands on this thread while it sleeps in poll() is
      // handled at once (also under ThreadSanitizer, which runs a handler only at such a blocking
      // call, not in the middle of a read()).
      pollfd ready{read_fd_, POLLIN, 0};
      if (poll(&ready, 1, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      const ssize_t n = read(read_fd_, signals, sizeof(signals));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // end of file: the destructor closed the write end
      if (!on_signal_) continue;
      // The callback is not interrupted either; a signal meanwhile waits for the next read().
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      for (ssize_t i = 0; i < n; ++i) on_signal_(signals[i]);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    }
  });

  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  forward.sa_mask = set;  // one handler at a time per thread
  forward.sa_flags = SA_RESTART;
  sigaction(SIGINT, &forward, &old_int_);
  sigaction(SIGTERM, &forward, &old_term_);
}

SignalWatcher::~SignalWatcher() {
  // From here on a signal gets the previous disposition; a handler already running for one sees
  // kNoWatcher below and raises it again.
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  int fd = write_fd_;
  while (!g_signal_pipe.compare_exchange_weak(fd, kNoWatcher, std::memory_order_acq_rel)) {
    fd = write_fd_;  // a handler holds it (kHandlerWriting) for one write()
  }
  close(write_fd_);  // the watcher thread reads what the handlers wrote, then end of file
  thread_.join();
  close(read_fd_);
  if (pthread_equal(pthread_self(), owner_)) pthread_sigmask(SIG_UNBLOCK, &unblock_, nullptr);
}

}  // namespace sieve
