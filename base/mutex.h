// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with Clang's thread-safety
// attributes (base/thread_annotations.h), so that GUARDED_BY / REQUIRES / EXCLUDES on the code
// that uses them are checked by clang's -Wthread-safety (scripts/thread-safety). libstdc++'s own
// types carry no attributes, so the analysis cannot see a std::lock_guard take a std::mutex.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void Add() EXCLUDES(mu_) { MutexLock lock(&mu_); ++count_; }
//
// Mutex is a non-recursive exclusive lock, exactly std::mutex (no extra state, no debug checks);
// it is also Lockable (lock()/unlock()/try_lock()) for code that needs the std names. MutexLock
// holds a Mutex for its scope (or adopts a hold the caller took, e.g. with TryLock()) and may
// release it early and take it again (Unlock()/Lock()), like a std::unique_lock without the
// deferred form. CondVar is a std::condition_variable whose waits take the Mutex the caller
// holds: the mutex is released while asleep and held again on return, as with
// std::condition_variable. A wait predicate is called with the mutex held, but it is a separate
// function to the analysis: a lambda that reads guarded members starts with `mu_.AssertHeld();`.
//
// Thread-safety: Mutex and CondVar are safe from any thread (that is their purpose); a MutexLock
// belongs to the thread that made it.
#ifndef SIEVE_BASE_MUTEX_H_
#define SIEVE_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace sieve {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // True when the mutex was free and is now held by the caller; never blocks.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the mutex (e.g. in a wait predicate, which runs
  // with it held); checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

  // BasicLockable / Lockable, for std::scoped_lock and the like.
  void lock() ACQUIRE() { Lock(); }
  void unlock() RELEASE() { Unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return TryLock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `*mu` from construction to destruction (or to Unlock(); Lock() takes it again).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  // Takes over a hold the caller has already (e.g. after a successful mu->TryLock()).
  MutexLock(Mutex* mu, std::adopt_lock_t) REQUIRES(mu) : mu_(mu) {}
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex before the end of the scope (it must be held).
  void Unlock() RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  // Takes the mutex again after Unlock().
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `*mu`, sleeps until notified (or spuriously), takes `*mu` again.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller's hold continues
  }
  // As Wait, until `deadline` at the latest: std::cv_status::timeout when it passed.
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status;
  }
  // Waits until `ready()` (called with `*mu` held) is true.
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate ready) REQUIRES(mu) {
    while (!ready()) Wait(mu);
  }
  // Waits until `ready()` is true or `timeout` passed (on the steady clock); returns the last
  // `ready()`, as std::condition_variable::wait_for does.
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate ready)
      REQUIRES(mu) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::ceil<std::chrono::steady_clock::duration>(timeout);
    while (!ready()) {
      if (WaitUntil(mu, deadline) == std::cv_status::timeout) return ready();
    }
    return true;
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace sieve

#endif  // SIEVE_BASE_MUTEX_H_
