// SignalWatcher: a process-directed SIGTERM/SIGINT reaches the callback on the watcher thread;
// the destructor's own stop request never does, and it returns without any signal having come.
// Own binary: the watcher blocks SIGINT/SIGTERM for the test's threads.
#include "net/signal_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace sieve {
namespace {

struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> signals;
  std::vector<std::thread::id> threads;

  void Add(int signo) {
    std::lock_guard<std::mutex> lock(mu);
    signals.push_back(signo);
    threads.push_back(std::this_thread::get_id());
    cv.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return signals.size() >= n; });
  }
};

TEST(SignalWatcher, DeliversProcessSignalsInOrderOnItsOwnThread) {
  Seen seen;
  {
    SignalWatcher watcher([&](int signo) { seen.Add(signo); });
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
    ASSERT_TRUE(seen.WaitFor(1));
    ASSERT_EQ(kill(getpid(), SIGINT), 0);
    ASSERT_TRUE(seen.WaitFor(2));
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_EQ(seen.signals, (std::vector<int>{SIGTERM, SIGINT}));  // the stop request is not one
  EXPECT_NE(seen.threads[0], std::this_thread::get_id());
}

TEST(SignalWatcher, DestructorReturnsWithoutAnySignalAndReportsNone) {
  Seen seen;
  for (int i = 0; i < 20; ++i) {  // also right after construction, before the thread waits
    SignalWatcher watcher([&](int signo) { seen.Add(signo); });
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_TRUE(seen.signals.empty());
}

TEST(SignalWatcher, SigqueueFromThisProcessWithOtherPayloadIsAUserSignal) {
  Seen seen;
  SignalWatcher watcher([&](int signo) { seen.Add(signo); });
  sigval v{};
  v.sival_int = 7;
  ASSERT_EQ(sigqueue(getpid(), SIGTERM, v), 0);
  ASSERT_TRUE(seen.WaitFor(1));
  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_EQ(seen.signals, std::vector<int>{SIGTERM});
}

}  // namespace
}  // namespace sieve
