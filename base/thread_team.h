// ThreadTeam: a small, persistent set of threads that run one parallel region at a time — the
// fork/join of a data-parallel loop without starting threads per loop. A team of size N owns N - 1
// helper threads, started in the constructor and joined in the destructor; the thread that calls
// Run() is the team's thread 0 and does its share of the work, so N = 1 starts no thread at all.
// A helper that finished a region watches for the next one for a few tens of microseconds (the
// regions of one event follow each other closely), then blocks on a condition variable: an idle
// team polls nothing. A region costs one atomic store and, for a sleeping helper, one wake-up per
// helper it uses, and one completion count per helper; never a lock per element.
//
//   ThreadTeam team(4);
//   team.ParallelFor(n, /*min_per_thread=*/16384, [&](uint32_t t, size_t begin, size_t end) {
//     for (size_t i = begin; i < end; ++i) y[i] += a * x[i];  // disjoint ranges: no races
//   });
//
// Ownership: the owner (e.g. a ShardServer) holds the team by value or unique_ptr; no global
// state. Thread-safety: Run() and ParallelFor() must be called by one thread at a time (the
// owner's), and not from inside a region (no nesting). Everything a thread writes in a region
// happens-before Run() returns, and everything the caller wrote before Run() happens-before the
// region's bodies start. Bodies must not throw (the project does not use exceptions).
#ifndef SIEVE_BASE_THREAD_TEAM_H_
#define SIEVE_BASE_THREAD_TEAM_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace sieve {

class ThreadTeam {
 public:
  static constexpr uint32_t kMaxThreads = 256;

  // A team of `threads` (1..kMaxThreads; aborts outside that range, an owner's invariant).
  explicit ThreadTeam(uint32_t threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  uint32_t size() const { return static_cast<uint32_t>(helpers_.size()) + 1; }
  // Regions run so far on more than one thread (read by the calling thread; tests, diagnostics).
  uint64_t parallel_regions() const { return parallel_regions_; }

  // Runs body(t) for every t in [0, count), t = 0 on the calling thread and t >= 1 on helper t,
  // and returns when every call has returned. count is clamped to [1, size()]; count = 1 calls
  // body(0) directly and wakes no helper.
  template <typename Body>
  void Run(uint32_t count, Body&& body) {
    count = std::clamp<uint32_t>(count, 1, size());
    if (count == 1) {
      body(0u);
      return;
    }
    using B = std::remove_reference_t<Body>;
    RunErased(count, const_cast<void*>(static_cast<const void*>(&body)),
              [](void* b, uint32_t t) { (*static_cast<B*>(b))(t); });
  }

  // Splits [0, n) into contiguous ranges, one per thread used, and runs body(t, begin, end) on
  // each: min(size(), n / min_per_thread) threads (at least 1), so a small n runs on the caller
  // alone. Every index of [0, n) is in exactly one range; ranges are in thread order.
  template <typename Body>
  void ParallelFor(size_t n, size_t min_per_thread, Body&& body) {
    const uint32_t count = ThreadsFor(n, min_per_thread);
    Run(count, [&](uint32_t t) { body(t, RangeBegin(n, count, t), RangeBegin(n, count, t + 1)); });
  }

  // How many threads ParallelFor uses for n items of at least min_per_thread each.
  uint32_t ThreadsFor(size_t n, size_t min_per_thread) const {
    const size_t per = std::max<size_t>(min_per_thread, 1);
    return static_cast<uint32_t>(std::clamp<size_t>(n / per, 1, size()));
  }
  // Start of range t of [0, n) split into `count` near-equal contiguous ranges.
  static size_t RangeBegin(size_t n, uint32_t count, uint32_t t) {
    return static_cast<size_t>((static_cast<unsigned __int128>(n) * t) / count);
  }

 private:
  struct Helper {
    Mutex mu;
    CondVar cv;
    // Bumped (release, under mu) to start a region on this helper; read while it spins.
    std::atomic<uint64_t> generation{0};
    bool stop GUARDED_BY(mu) = false;
    std::thread thread;
  };
  void RunErased(uint32_t count, void* body, void (*call)(void*, uint32_t));
  void HelperLoop(uint32_t t);

  std::vector<std::unique_ptr<Helper>> helpers_;  // helpers_[t - 1] is thread t
  // The current region, written by the caller before it starts the helpers (published by the
  // release store of each helper's generation).
  uint64_t parallel_regions_ = 0;
  void* body_ = nullptr;
  void (*call_)(void*, uint32_t) = nullptr;
  std::atomic<uint32_t> pending_{0};  // helpers of the current region still running
  // Guards no data (pending_ is atomic): the caller sleeps under it, so that the last helper's
  // wake-up cannot fall between the caller's check of pending_ and its wait.
  Mutex done_mu_;
  CondVar done_cv_;
};

}  // namespace sieve

#endif  // SIEVE_BASE_THREAD_TEAM_H_
