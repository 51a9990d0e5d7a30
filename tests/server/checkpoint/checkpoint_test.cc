// Checkpoint files: round trip, atomic replacement, and every way a file can be wrong (truncated,
// corrupted, another job's, another shard's, not a checkpoint) is a clear error, never a value.
#include "server/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = {"fnn3", 199210, 100, 110, "bsp", 7};
    ckpt_.config_hash = ConfigHash(config_);
    ckpt_.round = 42;
    ckpt_.lo = 100;
    ckpt_.hi = 110;
    for (int i = 0; i < 10; ++i) ckpt_.weights.push_back(0.5f * static_cast<float>(i) - 1.0f);
    path_ = CheckpointPath(dir_.path().string(), 3);
  }

  std::string ReadBytes() {
    std::ifstream f(path_, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  void WriteBytes(const std::string& b) {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
  }
  StatusOr<Checkpoint> Read() { return ReadCheckpoint(path_, ckpt_.config_hash, 100, 110); }

  testing::TempDir dir_{"sieve-ckpt"};  // each test's own, removed after it
  CheckpointConfig config_;
  Checkpoint ckpt_;
  std::string path_;
};

TEST_F(CheckpointTest, RoundTrip) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  auto got = Read();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->round, 42u);
  EXPECT_EQ(got->lo, 100u);
  EXPECT_EQ(got->hi, 110u);
  EXPECT_EQ(got->weights, ckpt_.weights);
  EXPECT_EQ(path_, dir_.path().string() + "/server-3.ckpt");
}

TEST_F(CheckpointTest, RewriteReplacesAtomically) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  ckpt_.round = 43;
  ckpt_.weights[0] = 9.0f;
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  auto got = Read();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->round, 43u);
  EXPECT_EQ(got->weights[0], 9.0f);
  // A stale temp file from a crash mid-write does not affect the real checkpoint.
  std::ofstream(path_ + ".tmp") << "partial";
  got = Read();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->round, 43u);
}

TEST_F(CheckpointTest, MissingIsNotFound) {
  auto got = Read();
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointTest, EveryTruncationIsDataLoss) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  const std::string good = ReadBytes();
  for (size_t n = 0; n < good.size(); ++n) {
    WriteBytes(good.substr(0, n));
    auto got = Read();
    ASSERT_FALSE(got.ok()) << "truncated to " << n;
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << n << ": " << got.status().ToString();
  }
}

TEST_F(CheckpointTest, EveryFlippedByteIsDetected) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  const std::string good = ReadBytes();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    WriteBytes(bad);
    auto got = Read();
    EXPECT_FALSE(got.ok()) << "flipped byte " << i;
  }
}

TEST_F(CheckpointTest, ExtraBytesAreDataLoss) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  WriteBytes(ReadBytes() + "xxxx");
  EXPECT_EQ(Read().status().code(), StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, NotACheckpointIsDataLoss) {
  WriteBytes(std::string(200, 'a'));
  auto got = Read();
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("magic"), std::string::npos);
}

TEST_F(CheckpointTest, OtherConfigurationIsRefused) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  for (int field = 0; field < 5; ++field) {
    CheckpointConfig other = config_;
    if (field == 0) other.model = "softmax";
    if (field == 1) other.num_params = 7850;
    if (field == 2) other.lo = 101;
    if (field == 3) other.consistency = "asp";
    if (field == 4) other.seed = 8;
    ASSERT_NE(ConfigHash(other), ConfigHash(config_));
    auto got = ReadCheckpoint(path_, ConfigHash(other), 100, 110);
    EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << field;
  }
}

TEST_F(CheckpointTest, OtherShardRangeIsRefused) {
  ASSERT_TRUE(WriteCheckpoint(path_, ckpt_).ok());
  auto got = ReadCheckpoint(path_, ckpt_.config_hash, 110, 120);
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointTest, WrongWeightCountIsNotWritten) {
  ckpt_.weights.pop_back();
  EXPECT_EQ(WriteCheckpoint(path_, ckpt_).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(CheckpointTest, UnwritableDirectoryIsUnavailable) {
  EXPECT_EQ(WriteCheckpoint(dir_.path().string() + "/no/such/dir/x.ckpt", ckpt_).code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sieve
