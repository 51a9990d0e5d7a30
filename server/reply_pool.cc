#include "server/reply_pool.h"

namespace sieve {

size_t ReplyPool::pooled() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->free.size();
}

std::shared_ptr<ReplyBuffer> ReplyPool::Get() {
  std::unique_ptr<ReplyBuffer> buf;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->free.empty()) {
      buf = std::move(state_->free.back());
      state_->free.pop_back();
    }
  }
  if (!buf) buf = std::make_unique<ReplyBuffer>();
  buf->indices.clear();
  buf->values.clear();
  std::weak_ptr<State> weak = state_;
  return std::shared_ptr<ReplyBuffer>(buf.release(), [weak](ReplyBuffer* b) {
    if (!IsLarge(*b)) {
      if (auto s = weak.lock()) {
        std::lock_guard<std::mutex> lock(s->mu);
        s->free.emplace_back(b);
        return;
      }
    }
    delete b;  // large, or the pool is gone
  });
}

}  // namespace sieve
