#include "server/reply_pool.h"

namespace sieve {

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
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->free.emplace_back(b);
    } else {
      delete b;
    }
  });
}

}  // namespace sieve
