// ReplyPool: recycled buffers for the server's replies (a LentBufferPool, base/lent_buffer_pool.h).
// A reply's arrays are lent to ZeroMQ zero-copy and may be read by its I/O thread after the send
// call returns, so a buffer is handed out as a shared_ptr whose deleter returns it to the pool once
// the last frame lets go. After the first few rounds no sparse reply allocates. A large buffer (>
// kLargeElements values or indices, e.g. a dense shard for a pull) is never kept: it is freed when
// ZeroMQ lets go, so a server's steady memory is its weights alone (a dense reply is rare:
// start-up, rejoin, a dense round, and allocating it costs little next to sending it).
// Thread-safety: Get() from the server thread; the deleter may run on ZeroMQ's I/O thread (the free
// list is locked). Buffers may outlive the pool object.
#ifndef SIEVE_SERVER_SHARD_REPLY_POOL_H_
#define SIEVE_SERVER_SHARD_REPLY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/lent_buffer_pool.h"

namespace sieve {

struct ReplyBuffer {
  std::vector<uint32_t> indices;  // shard-relative, ascending (empty for dense replies)
  std::vector<float> values;
};

class ReplyPool {
 public:
  ReplyPool() : pool_([](const ReplyBuffer& b) { return !IsLarge(b); }) {}
  ReplyPool(const ReplyPool&) = delete;
  ReplyPool& operator=(const ReplyPool&) = delete;

  static constexpr size_t kLargeElements = size_t{1} << 20;

  // A cleared buffer (capacity kept from earlier use).
  std::shared_ptr<ReplyBuffer> Get() {
    std::shared_ptr<ReplyBuffer> b = pool_.Get();
    b->indices.clear();
    b->values.clear();
    return b;
  }

  // Buffers waiting in the pool (tests, diagnostics).
  size_t pooled() const { return pool_.pooled(); }

 private:
  static bool IsLarge(const ReplyBuffer& b) {
    return b.values.capacity() > kLargeElements || b.indices.capacity() > kLargeElements;
  }
  LentBufferPool<ReplyBuffer> pool_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_REPLY_POOL_H_
