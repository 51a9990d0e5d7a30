// A real sieve-server process fed malformed and semantically wrong pushes by a hand-driven worker
// node: every bad message gets an ERROR reply, the shard is unchanged (dense pull before/after),
// and the server keeps serving good pushes. And a --dump_shard it cannot write fails the run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>

#include "tests/base/temp_dir.h"
#include "tests/net/hand_driven_job.h"

namespace sieve {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto job = testing::HandDrivenJob::Start(1);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    job_ = std::move(job).value();
  }

  Frames Push(uint64_t round, int shard, std::vector<uint32_t> idx, std::vector<float> val) {
    return job_->Push(0, round, shard, std::move(idx), std::move(val));
  }

  // Sends a push and returns the reply to it (skipping a late DENSE from a resent pull).
  Message Exchange(Frames frames) {
    EXPECT_TRUE(job_->worker(0).Send(1, std::move(frames)).ok());
    Message m;
    do {
      m = job_->Next(0);
    } while (m.type() == pb::MSG_DENSE);
    return m;
  }

  std::vector<float> PullShard() { return job_->PullShard(0); }

  std::unique_ptr<testing::HandDrivenJob> job_;
};

TEST_F(BadInputTest, EveryBadPushGetsAnErrorAndChangesNothing) {
  const std::vector<float> before = PullShard();
  ASSERT_EQ(before.size(), 7850u);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  struct Case {
    const char* what;
    Frames frames;
    pb::ErrorCode want;
  };
  std::vector<Case> cases;
  cases.push_back({"index out of range", Push(0, 0, {1, 7850}, {1, 1}), pb::ERROR_INDEX_RANGE});
  cases.push_back({"unsorted", Push(0, 0, {5, 2}, {1, 1}), pb::ERROR_INDEX_ORDER});
  cases.push_back({"duplicate index", Push(0, 0, {5, 5}, {1, 1}), pb::ERROR_INDEX_ORDER});
  cases.push_back({"NaN", Push(0, 0, {1, 2}, {1, nan}), pb::ERROR_NON_FINITE});
  cases.push_back({"Inf", Push(0, 0, {1}, {INFINITY}), pb::ERROR_NON_FINITE});
  cases.push_back({"unknown shard", Push(0, 3, {1}, {1}), pb::ERROR_WRONG_SHARD});
  cases.push_back({"future round", Push(9, 0, {1}, {1}), pb::ERROR_UNKNOWN_ROUND});
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    f.pop_back();
    cases.push_back({"missing frame", std::move(f), pb::ERROR_BAD_FRAME_COUNT});
  }
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    f[2] = zmq::message_t(std::string(7, 'x'));
    cases.push_back({"truncated values", std::move(f), pb::ERROR_BAD_FRAME_SIZE});
  }
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    std::string bytes(static_cast<const char*>(f[2].data()), f[2].size());
    bytes[0] ^= 0x40;
    f[2] = zmq::message_t(bytes);
    cases.push_back({"corrupted payload", std::move(f), pb::ERROR_CHECKSUM});
  }
  for (Case& c : cases) {
    Message m = Exchange(std::move(c.frames));
    ASSERT_EQ(m.type(), pb::MSG_ERROR) << c.what;
    EXPECT_EQ(m.header.error().code(), c.want) << c.what << ": " << m.header.error().message();
  }
  EXPECT_EQ(PullShard(), before) << "a rejected push changed the shard";

  // Still serving: a good push completes round 0 (the only worker) and moves exactly w[1], w[2].
  Message ok = Exchange(Push(0, 0, {1, 2}, {0.5f, -0.25f}));
  ASSERT_EQ(ok.type(), pb::MSG_UPDATE);
  ASSERT_EQ(ok.indices.size(), 2u);
  EXPECT_FLOAT_EQ(ok.values[0], before[1] - 0.5f);
  EXPECT_FLOAT_EQ(ok.values[1], before[2] + 0.25f);
  std::vector<float> after = PullShard();
  for (size_t i = 0; i < after.size(); ++i) {
    if (i != 1 && i != 2) {
      ASSERT_EQ(after[i], before[i]) << i;
    }
  }
}

TEST_F(BadInputTest, RandomGarbageFramesNeverStopTheServer) {
  const std::vector<float> before = PullShard();
  std::mt19937 rng(99);
  for (int t = 0; t < 300; ++t) {
    Frames f;
    const int nframes = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < nframes; ++i) {
      std::string bytes(rng() % 64, '\0');
      for (char& ch : bytes) ch = static_cast<char>(rng());
      f.emplace_back(bytes.data(), bytes.size());
    }
    ASSERT_TRUE(job_->worker(0).Send(1, std::move(f)).ok());
  }
  // Garbage with no parsable sender cannot be answered; the server drops it and keeps going.
  EXPECT_EQ(PullShard(), before);
}

// Runs a one-worker job to its end with --dump_shard=`path` (after one dense pull, so the server
// is serving when the worker finishes): the server's wait status, and every line it wrote (stdout
// and stderr).
int RunJobDumpingTo(const std::string& path, std::string* output,
                    testing::KeyValues* summary = nullptr) {
  auto job = testing::HandDrivenJob::Start(1, {"--dump_shard=" + path});
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  if (!job.ok()) return -1;
  EXPECT_EQ((*job)->PullShard(0).size(), testing::HandDrivenJob::kNumParams);
  const std::optional<int> st = (*job)->FinishAndWaitForServer();
  EXPECT_TRUE(st.has_value()) << "sieve-server did not exit after the worker finished";
  for (const std::string& line : (*job)->server().lines()) *output += line + "\n";
  if (summary != nullptr) *summary = (*job)->ServerSummary();
  return st.value_or(-1);
}

TEST(DumpShardTest, WritesTheShardAndExitsZero) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "shard.bin").string();
  std::string output;
  const int st = RunJobDumpingTo(path, &output);
  ASSERT_TRUE(WIFEXITED(st)) << output;
  EXPECT_EQ(WEXITSTATUS(st), 0) << output;
  EXPECT_EQ(std::filesystem::file_size(path), testing::HandDrivenJob::kNumParams * sizeof(float));
}

TEST(DumpShardTest, UnwritablePathFailsTheRunAndSaysWhy) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "no-such-dir" / "shard.bin").string();
  std::string output;
  testing::KeyValues summary;
  const int st = RunJobDumpingTo(path, &output, &summary);
  ASSERT_TRUE(WIFEXITED(st)) << output;
  EXPECT_EQ(WEXITSTATUS(st), 1) << output;
  // The run is still reported: the summary is written before the failed dump ends the run.
  EXPECT_EQ(summary["rank"], "0") << output;
  EXPECT_NE(output.find("sieve-server: --dump_shard failed: UNAVAILABLE: cannot open " + path +
                        ": No such file or directory"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace sieve
