// Replay safety end to end: a real sieve-server (BSP, one shard) and two hand-driven worker
// nodes. Worker 0 sends its round-0 push three times (before and after the round completes); the
// push is applied once: the shard equals the once-applied average and the server's weight
// checksum (CRC-32 in its summary) matches the one computed here.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>

#include "tests/net/hand_driven_job.h"
#include "tests/net/summary_file.h"

namespace sieve {
namespace {

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto job = testing::HandDrivenJob::Start(2);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    job_ = std::move(job).value();
  }

  Frames Push(int w, uint64_t round, std::vector<uint32_t> idx, std::vector<float> val) {
    return job_->Push(w, round, /*shard=*/0, std::move(idx), std::move(val));
  }
  Node& worker(int w) { return job_->worker(w); }

  std::unique_ptr<testing::HandDrivenJob> job_;
};

TEST_F(ReplayTest, AReplayedPushIsAppliedOnce) {
  std::vector<float> expect = job_->PullShard(0);
  ASSERT_EQ(expect.size(), 7850u);
  // Worker 0 pushes round 0 twice before worker 1 pushes (the round is still open) ...
  ASSERT_TRUE(worker(0).Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  ASSERT_TRUE(worker(0).Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  ASSERT_TRUE(worker(1).Send(1, Push(1, 0, {2, 3}, {2.0f, 4.0f})).ok());
  Message u1 = job_->Next(1);
  ASSERT_EQ(u1.type(), pb::MSG_UPDATE);
  EXPECT_EQ(u1.header.round(), 0u);
  // ... and once more after it completed: the reply is resent, nothing applied.
  ASSERT_TRUE(worker(0).Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  for (int i = 0; i < 2; ++i) {
    Message u0 = job_->Next(0);
    ASSERT_EQ(u0.type(), pb::MSG_UPDATE);
    EXPECT_EQ(u0.header.round(), 0u);
    ASSERT_EQ(u0.indices.size(), 3u);
  }
  expect[1] -= 0.5f / 2;
  expect[2] -= (-1.0f + 2.0f) / 2;
  expect[3] -= 4.0f / 2;
  EXPECT_EQ(job_->PullShard(1), expect);

  ASSERT_TRUE(job_->FinishAndWaitForServer().has_value());
  testing::KeyValues summary = job_->ServerSummary();
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(expect.data()),
            static_cast<uInt>(expect.size() * sizeof(float))));
  char want[16];
  std::snprintf(want, sizeof(want), "%08x", crc);
  EXPECT_EQ(summary["checksum"], want);
  EXPECT_EQ(summary["applied"], "2");
  EXPECT_EQ(summary["duplicates"], "2");
  EXPECT_EQ(summary["rounds"], "1");
}

}  // namespace
}  // namespace sieve
