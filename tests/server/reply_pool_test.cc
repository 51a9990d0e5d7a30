// ReplyPool: small buffers are recycled with their capacity; of several large (dense-shard)
// buffers released, only one stays pooled; a buffer that outlives its pool is simply freed.
#include "server/reply_pool.h"

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

TEST(ServerReplyPool, KeepsAtMostOneLargeBuffer) {
  ReplyPool pool;
  {
    std::vector<std::shared_ptr<ReplyBuffer>> pulls;
    for (int i = 0; i < 4; ++i) {  // four workers pull the whole shard at once
      pulls.push_back(pool.Get());
      pulls.back()->values.resize(ReplyPool::kLargeElements + 1);
    }
    auto small = pool.Get();
    small->values.resize(10);
  }
  EXPECT_EQ(pool.pooled(), 2u);  // one large, one small
  EXPECT_EQ(pool.pooled_large(), 1);
  // Taking the large one out and returning it keeps the count right.
  std::vector<std::shared_ptr<ReplyBuffer>> out = {pool.Get(), pool.Get()};
  EXPECT_EQ(pool.pooled_large(), 0);
  out.clear();
  EXPECT_EQ(pool.pooled_large(), 1);
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
