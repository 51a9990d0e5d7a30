// LentBufferPool<T>: recycled buffers for arrays lent to another thread, e.g. frames ZeroMQ sends
// zero-copy and reads on its I/O thread after the send call returned. Get() hands a buffer out as
// a shared_ptr whose deleter puts it back into the pool when the last owner lets go (or frees it
// when `keep` says no, or the pool is gone). The free list is locked, so the deleter's release on
// one thread happens-before the next Get() or Reclaim() of that buffer on another: reuse never
// races with a late reader (unlike a check of shared_ptr::use_count(), a relaxed read).
//
// Thread-safety: every method may be called from any thread; buffers may outlive the pool object.
#ifndef SIEVE_BASE_LENT_BUFFER_POOL_H_
#define SIEVE_BASE_LENT_BUFFER_POOL_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace sieve {

template <typename T>
class LentBufferPool {
 public:
  // `keep(buffer)`: whether a returned buffer goes back into the pool (default: always).
  explicit LentBufferPool(std::function<bool(const T&)> keep = nullptr)
      : state_(std::make_shared<State>()) {
    state_->keep = std::move(keep);
  }
  LentBufferPool(const LentBufferPool&) = delete;
  LentBufferPool& operator=(const LentBufferPool&) = delete;

  // A buffer from the pool (contents as its last user left them) or a new one.
  std::shared_ptr<T> Get() {
    std::unique_ptr<T> buf;
    {
      MutexLock lock(&state_->mu);
      if (!state_->free.empty()) {
        buf = std::move(state_->free.back());
        state_->free.pop_back();
      }
    }
    if (!buf) buf = std::make_unique<T>();
    std::weak_ptr<State> weak = state_;
    return std::shared_ptr<T>(buf.release(), [weak](T* b) {
      if (auto s = weak.lock()) {
        if (!s->keep || s->keep(*b)) {
          MutexLock lock(&s->mu);
          s->free.emplace_back(b);
          return;
        }
      }
      delete b;
    });
  }

  // Takes `b` (a buffer this pool handed out) back out of the pool when every owner has let go
  // of it, so its contents can be read again; nullptr while someone still holds it (or when it
  // was not kept). Give it back with Put().
  std::unique_ptr<T> Reclaim(const T* b) {
    MutexLock lock(&state_->mu);
    for (auto it = state_->free.begin(); it != state_->free.end(); ++it) {
      if (it->get() == b) {
        std::unique_ptr<T> mine = std::move(*it);
        state_->free.erase(it);
        return mine;
      }
    }
    return nullptr;
  }

  void Put(std::unique_ptr<T> b) {
    MutexLock lock(&state_->mu);
    state_->free.push_back(std::move(b));
  }

  // Buffers waiting in the pool (tests, diagnostics).
  size_t pooled() const {
    MutexLock lock(&state_->mu);
    return state_->free.size();
  }

 private:
  struct State {
    Mutex mu;
    std::vector<std::unique_ptr<T>> free GUARDED_BY(mu);
    std::function<bool(const T&)> keep;  // set before any buffer is handed out
  };
  std::shared_ptr<State> state_;
};

}  // namespace sieve

#endif  // SIEVE_BASE_LENT_BUFFER_POOL_H_
