// SignalWatcher in a process that has threads older than the watcher, with SIGINT/SIGTERM
// unblocked (as OpenBLAS's pool, started by its library constructor before main()): a
// process-directed SIGTERM reaches the callback on the watcher thread and the process ends by its
// own path, whichever thread the kernel picked; before the watcher exists and after it is gone,
// the signal kills the process. Every case runs in a forked child (the test's own process stays
// single-threaded, so a fork is safe); the child reports through its exit code.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/signal_watcher.h"

namespace sieve {
namespace {

// The child's exit codes.
constexpr int kStoppedBySignal = 42;  // the callback saw SIGTERM on the watcher thread
constexpr int kNoCallback = 3;        // no callback within the deadline
constexpr int kWrongCallback = 4;     // another signal, or not on the watcher thread
constexpr int kSurvived = 5;          // a signal that should have killed the child did not

// Threads started before the watcher, with the signals unblocked (the default mask). Half of them
// spin, half sleep in short naps, like a BLAS pool between and during calls.
class OlderThreads {
 public:
  explicit OlderThreads(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, spin = i % 2 == 0] {
        while (!stop_.load(std::memory_order_relaxed)) {
          if (!spin) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
    }
  }
  ~OlderThreads() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }
  std::vector<std::thread::id> ids() const {
    std::vector<std::thread::id> ids;
    for (const auto& t : threads_) ids.push_back(t.get_id());
    return ids;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Forks; the child runs `child` and _exits with what it returns, the parent gets `ready` (the
// child's first byte on a pipe, after which it is sent `signo` if nonzero) and returns the child's
// wait status.
int RunChild(const std::function<int(int ready_fd)>& child, int signo) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(ready[0]);
    _exit(child(ready[1]));
  }
  close(ready[1]);
  char byte;
  const bool got_ready = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  if (got_ready && signo != 0) kill(pid, signo);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

void SayReady(int fd) {
  const char byte = 'r';
  (void)!write(fd, &byte, 1);
  close(fd);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// The child: older threads, then the watcher; waits for the callback, ends normally.
int StopOnSigterm(int ready_fd) {
  OlderThreads older(4);
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  std::thread::id seen_on;
  {
    SignalWatcher watcher([&](int signo) {
      std::lock_guard<std::mutex> lock(mu);
      seen = signo;
      seen_on = std::this_thread::get_id();
      cv.notify_all();
    });
    SayReady(ready_fd);
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen != 0; })) return kNoCallback;
  }
  const std::vector<std::thread::id> older_ids = older.ids();
  for (const auto& id : older_ids) {
    if (seen_on == id) return kWrongCallback;
  }
  if (seen != SIGTERM || seen_on == std::this_thread::get_id()) return kWrongCallback;
  return kStoppedBySignal;
}

TEST(SignalWatcherProcess, SigtermWithOlderUnblockedThreadsReachesTheCallback) {
  constexpr int kRuns = 50;
  int stopped = 0;
  std::vector<std::string> others;
  for (int i = 0; i < kRuns; ++i) {
    const int status = RunChild(StopOnSigterm, SIGTERM);
    if (WIFEXITED(status) && WEXITSTATUS(status) == kStoppedBySignal) {
      ++stopped;
    } else {
      others.push_back(Describe(status));
    }
  }
  std::string list;
  for (const auto& o : others) list += o + "; ";
  EXPECT_EQ(stopped, kRuns) << "other ends: " << list;
}

TEST(SignalWatcherProcess, SigtermBeforeTheWatcherKills) {
  const int status = RunChild(
      [](int ready_fd) {
        OlderThreads older(2);
        SayReady(ready_fd);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        return kSurvived;
      },
      SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(status)) << Describe(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(SignalWatcherProcess, SigtermAfterTheWatcherIsGoneKills) {
  for (int older_threads : {0, 2}) {
    const int status = RunChild(
        [older_threads](int ready_fd) {
          OlderThreads older(older_threads);
          {
            SignalWatcher watcher([](int) { _exit(kWrongCallback); });
          }
          SayReady(ready_fd);
          std::this_thread::sleep_for(std::chrono::seconds(10));
          return kSurvived;
        },
        SIGTERM);
    ASSERT_TRUE(WIFSIGNALED(status)) << older_threads << " older threads: " << Describe(status);
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
  }
}

TEST(SignalWatcherProcess, SigintAfterTheWatcherIsGoneKeepsAnIgnoredDisposition) {
  const int status = RunChild(
      [](int ready_fd) {
        signal(SIGINT, SIG_IGN);
        {
          SignalWatcher watcher([](int) { _exit(kWrongCallback); });
        }
        SayReady(ready_fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return kStoppedBySignal;  // ignored, as before the watcher
      },
      SIGINT);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kStoppedBySignal) << Describe(status);
}

}  // namespace
}  // namespace sieve
