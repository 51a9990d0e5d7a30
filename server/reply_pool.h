// ReplyPool: recycled buffers for the server's replies. A reply's arrays are lent to ZeroMQ
// zero-copy and may be read by its I/O thread after the send call returns, so a buffer is handed
// out as a shared_ptr whose deleter returns it to the pool once the last frame lets go. After the
// first few rounds no sparse reply allocates. At most one large buffer (> kLargeElements values
// or indices, e.g. a dense shard for a pull) is kept: the others are freed when ZeroMQ lets go,
// so concurrent pulls of every worker do not pin one shard copy each. Thread-safety: Get() from the
// server thread; the deleter may run on ZeroMQ's I/O thread (the free list is locked). Buffers may
// outlive the pool object.
#ifndef SIEVE_SERVER_REPLY_POOL_H_
#define SIEVE_SERVER_REPLY_POOL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sieve {

struct ReplyBuffer {
  std::vector<uint32_t> indices;  // shard-relative, ascending (empty for dense replies)
  std::vector<float> values;
};

class ReplyPool {
 public:
  ReplyPool() : state_(std::make_shared<State>()) {}

  static constexpr size_t kLargeElements = size_t{1} << 20;

  // A cleared buffer (capacity kept from earlier use).
  std::shared_ptr<ReplyBuffer> Get();

  // Buffers waiting in the pool, and how many of them are large (tests, diagnostics).
  size_t pooled() const;
  int pooled_large() const;

 private:
  struct State {
    std::mutex mu;
    std::vector<std::unique_ptr<ReplyBuffer>> free;
    int large = 0;  // large buffers in `free`
  };
  static bool IsLarge(const ReplyBuffer& b) {
    return b.values.capacity() > kLargeElements || b.indices.capacity() > kLargeElements;
  }
  std::shared_ptr<State> state_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_REPLY_POOL_H_
