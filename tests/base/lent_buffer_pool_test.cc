// LentBufferPool (base/lent_buffer_pool.h): a buffer comes back only once every owner let go,
// Reclaim finds exactly that buffer, `keep` decides what is pooled, and buffers outlive the pool.
#include "base/lent_buffer_pool.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sieve {
namespace {

struct Buf {
  std::vector<int> data;
};

TEST(LentBufferPoolTest, ABufferIsReclaimedOnlyAfterTheLastOwnerLetGo) {
  LentBufferPool<Buf> pool;
  std::shared_ptr<Buf> a = pool.Get();
  a->data = {1, 2, 3};
  const Buf* raw = a.get();
  std::shared_ptr<Buf> reader = a;  // e.g. ZeroMQ's frame
  a.reset();
  EXPECT_EQ(pool.Reclaim(raw), nullptr);                            // still held
  std::thread t([r = std::move(reader)]() mutable { r.reset(); });  // let go on another thread
  t.join();
  std::unique_ptr<Buf> back = pool.Reclaim(raw);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->data, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(pool.pooled(), 0u);
  pool.Put(std::move(back));
  EXPECT_EQ(pool.pooled(), 1u);
  std::shared_ptr<Buf> again = pool.Get();  // the same buffer, reused
  EXPECT_EQ(again.get(), raw);
  EXPECT_EQ(pool.pooled(), 0u);
}

TEST(LentBufferPoolTest, KeepDecidesWhatIsPooledAndOthersAreFreed) {
  LentBufferPool<Buf> pool([](const Buf& b) { return b.data.size() < 4; });
  std::shared_ptr<Buf> small = pool.Get();
  std::shared_ptr<Buf> big = pool.Get();
  big->data.assign(10, 0);
  const Buf* big_raw = big.get();
  small.reset();
  big.reset();
  EXPECT_EQ(pool.pooled(), 1u);
  EXPECT_EQ(pool.Reclaim(big_raw), nullptr);
}

TEST(LentBufferPoolTest, BuffersOutliveThePool) {
  std::shared_ptr<Buf> held;
  {
    LentBufferPool<Buf> pool;
    held = pool.Get();
    held->data = {7};
  }
  EXPECT_EQ(held->data, (std::vector<int>{7}));
  held.reset();  // freed, not returned to a pool that is gone
}

}  // namespace
}  // namespace sieve
