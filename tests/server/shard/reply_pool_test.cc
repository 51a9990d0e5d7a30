// ReplyPool: small buffers are recycled with their capacity; large (dense-shard) buffers are
// freed, never pooled; a buffer that outlives its pool is simply freed.
#include "server/shard/reply_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace sieve {
namespace {

TEST(ServerReplyPool, RecyclesSmallBuffersWithTheirCapacity) {
  ReplyPool pool;
  const ReplyBuffer* first = nullptr;
  {
    auto b = pool.Get();
    b->values.resize(1000);
    b->indices.resize(1000);
    first = b.get();
  }
  EXPECT_EQ(pool.pooled(), 1u);
  auto again = pool.Get();
  EXPECT_EQ(again.get(), first);
  EXPECT_TRUE(again->values.empty());
  EXPECT_GE(again->values.capacity(), 1000u);
  EXPECT_EQ(pool.pooled(), 0u);
}

TEST(ServerReplyPool, FreesLargeBuffersAndKeepsSmallOnes) {
  ReplyPool pool;
  const ReplyBuffer* small_ptr = nullptr;
  {
    std::vector<std::shared_ptr<ReplyBuffer>> pulls;
    for (int i = 0; i < 4; ++i) {  // four workers pull the whole shard at once
      pulls.push_back(pool.Get());
      pulls.back()->values.resize(ReplyPool::kLargeElements + 1);
    }
    pulls.push_back(pool.Get());
    pulls.back()->indices.resize(ReplyPool::kLargeElements + 1);  // large by its indices
    auto small = pool.Get();
    small->values.resize(ReplyPool::kLargeElements);  // at the limit: still small
    small_ptr = small.get();
  }
  EXPECT_EQ(pool.pooled(), 1u);
  auto again = pool.Get();
  EXPECT_EQ(again.get(), small_ptr);
  EXPECT_GE(again->values.capacity(), ReplyPool::kLargeElements);
  EXPECT_EQ(pool.pooled(), 0u);
}

TEST(ServerReplyPool, BufferOutlivingThePoolIsFreed) {
  std::shared_ptr<ReplyBuffer> kept;
  {
    ReplyPool pool;
    kept = pool.Get();
    kept->values.assign(5, 1.0f);
  }
  EXPECT_EQ(kept->values.size(), 5u);
  kept.reset();  // must not touch the destroyed pool (ASan would tell)
}

}  // namespace
}  // namespace sieve
