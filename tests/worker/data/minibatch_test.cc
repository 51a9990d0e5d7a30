#include "worker/data/minibatch.h"

#include <gtest/gtest.h>

#include <vector>

namespace sieve {
namespace {

// n examples of 2x3 pixels whose values encode (example, pixel).
Dataset TinyDataset(int64_t n) {
  Dataset d;
  d.n = n;
  d.rows = 2;
  d.cols = 3;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) d.images.push_back(static_cast<float>(i * 10 + p));
    d.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return d;
}

TEST(WorkerDataMinibatch, GathersInOrderWithShortLastBatch) {
  const Dataset d = TinyDataset(12);
  const std::vector<int64_t> order = {11, 3, 5, 0, 7, 2, 9};
  StatusOr<MinibatchIterator> it = MinibatchIterator::Create(d, order, 3, false);
  ASSERT_TRUE(it.ok());
  EXPECT_EQ(it->num_batches(), 3);
  std::vector<int64_t> seen;
  std::vector<int> sizes;
  Minibatch b;
  while (it->Next(&b)) {
    EXPECT_EQ(b.index, static_cast<int64_t>(sizes.size()));
    sizes.push_back(b.size);
    for (int j = 0; j < b.size; ++j) {
      const int64_t example = static_cast<int64_t>(b.images[j * 6]) / 10;
      for (int p = 0; p < 6; ++p) EXPECT_EQ(b.images[j * 6 + p], example * 10 + p);
      EXPECT_EQ(b.labels[j], example % 10);
      seen.push_back(example);
    }
  }
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 1}));
  EXPECT_EQ(seen, order);
  it->Reset();
  ASSERT_TRUE(it->Next(&b));
  EXPECT_EQ(b.images[0], 110.0f);
}

TEST(WorkerDataMinibatch, DropLastSkipsTheShortBatch) {
  const Dataset d = TinyDataset(7);
  const std::vector<int64_t> order = {0, 1, 2, 3, 4, 5, 6};
  StatusOr<MinibatchIterator> it = MinibatchIterator::Create(d, order, 3, true);
  ASSERT_TRUE(it.ok());
  EXPECT_EQ(it->num_batches(), 2);
  Minibatch b;
  int batches = 0;
  while (it->Next(&b)) {
    EXPECT_EQ(b.size, 3);
    ++batches;
  }
  EXPECT_EQ(batches, 2);
}

TEST(WorkerDataMinibatch, RejectsBadArguments) {
  const Dataset d = TinyDataset(4);
  const std::vector<int64_t> good = {0, 1};
  const std::vector<int64_t> bad = {0, 4};
  EXPECT_EQ(MinibatchIterator::Create(d, good, 0, false).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MinibatchIterator::Create(d, bad, 2, false).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sieve
