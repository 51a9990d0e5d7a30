#include "base/thread_team.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace sieve {
namespace {

// The caller usually finishes its share about when the helpers do, and a helper that finished a
// region usually gets the next one soon (the merges and the update pass of a round follow each
// other): both watch for that this long before they sleep, so back-to-back regions cost no
// wake-up (tens of microseconds on these VMs).
constexpr auto kJoinSpin = std::chrono::microseconds(20);
constexpr auto kIdleSpin = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or `limit` has passed; whether done() became true.
template <typename Done>
bool SpinFor(std::chrono::microseconds limit, Done done) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

}  // namespace

ThreadTeam::ThreadTeam(uint32_t threads) {
  if (threads < 1 || threads > kMaxThreads) {
    std::fprintf(stderr, "ThreadTeam: %u threads, outside [1, %u]\n", threads, kMaxThreads);
    std::abort();
  }
  helpers_.reserve(threads - 1);
  for (uint32_t t = 1; t < threads; ++t) helpers_.push_back(std::make_unique<Helper>());
  for (uint32_t t = 1; t < threads; ++t)
    helpers_[t - 1]->thread = std::thread([this, t] { HelperLoop(t); });
}

ThreadTeam::~ThreadTeam() {
  for (auto& h : helpers_) {
    {
      MutexLock lock(&h->mu);
      h->stop = true;
    }
    h->cv.NotifyOne();
  }
  for (auto& h : helpers_) h->thread.join();
}

void ThreadTeam::RunErased(uint32_t count, void* body, void (*call)(void*, uint32_t)) {
  ++parallel_regions_;
  body_ = body;
  call_ = call;
  pending_.store(count - 1, std::memory_order_relaxed);
  for (uint32_t t = 1; t < count; ++t) {
    Helper& h = *helpers_[t - 1];
    {
      MutexLock lock(&h.mu);
      h.generation.fetch_add(1, std::memory_order_release);
    }
    h.cv.NotifyOne();
  }
  call(body, 0);
  if (SpinFor(kJoinSpin, [this] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  MutexLock lock(&done_mu_);
  done_cv_.Wait(&done_mu_, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadTeam::HelperLoop(uint32_t t) {
  Helper& h = *helpers_[t - 1];
  uint64_t seen = 0;
  for (;;) {
    auto started = [&] { return h.generation.load(std::memory_order_acquire) != seen; };
    if (!SpinFor(kIdleSpin, started)) {
      MutexLock lock(&h.mu);
      h.cv.Wait(&h.mu, [&] {
        h.mu.AssertHeld();
        return h.stop || started();
      });
      if (h.stop) return;
    }
    seen = h.generation.load(std::memory_order_acquire);
    call_(body_, t);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The caller may be asleep: wake it under its mutex, so the wake-up cannot fall between
      // its check of pending_ and its wait.
      MutexLock lock(&done_mu_);
      done_cv_.NotifyOne();
    }
  }
}

}  // namespace sieve
