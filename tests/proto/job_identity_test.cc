// The job identity on the wire (proto/job_identity.h, Header.job): the token's digest, the
// transport's stamp on an encoded message, and Decode's refusal of any other job's message before
// anything in it is checked or believed.
#include "proto/job_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"

namespace sieve {
namespace {

// A valid one-pair PUSH for shard 0 (of length 10) from node 2.
Frames Push() {
  static const std::vector<uint32_t> idx = {3};
  static const std::vector<float> val = {0.5f};
  DataPayload p;
  p.indices = idx;
  p.values = std::as_bytes(std::span<const float>(val));
  auto frames = EncodeData(MakeDataHeader(pb::MSG_PUSH, 2, 1, 0, 7), p);
  EXPECT_TRUE(frames.ok());
  return std::move(frames).value();
}

pb::ErrorCode DecodeCode(Frames frames, uint64_t job, Message* msg) {
  static const std::vector<uint64_t> lengths = {10};
  DecodeLimits limits;
  limits.shard_lengths = lengths;
  limits.job = job;
  return WireCodeOf(Decode(std::move(frames), limits, msg));
}

TEST(JobIdentityTest, DigestIsZeroOnlyWithoutAToken) {
  EXPECT_EQ(JobDigest(""), 0u);
  EXPECT_NE(JobDigest("a"), 0u);
  EXPECT_NE(JobDigest("a"), JobDigest("b"));
  EXPECT_NE(JobDigest("job-1"), JobDigest("job-2"));
  EXPECT_EQ(JobDigest("job-1"), JobDigest(std::string("job-1")));
}

TEST(JobIdentityTest, StampedMessageDecodesOnlyInItsJob) {
  const uint64_t mine = JobDigest("mine"), theirs = JobDigest("theirs");
  Frames frames = Push();
  StampJob(&frames, mine);
  Message msg;
  ASSERT_EQ(DecodeCode(std::move(frames), mine, &msg), pb::ERROR_NONE);
  EXPECT_EQ(msg.header.job(), mine);
  EXPECT_EQ(msg.header.sender(), 2);
  EXPECT_EQ(msg.indices.size(), 1u);

  frames = Push();
  StampJob(&frames, theirs);
  EXPECT_EQ(DecodeCode(std::move(frames), mine, &msg), pb::ERROR_FOREIGN_JOB);
  EXPECT_TRUE(msg.indices.empty());
  // A job without a token and a job with one refuse each other's messages.
  EXPECT_EQ(DecodeCode(Push(), mine, &msg), pb::ERROR_FOREIGN_JOB);
  frames = Push();
  StampJob(&frames, mine);
  EXPECT_EQ(DecodeCode(std::move(frames), 0, &msg), pb::ERROR_FOREIGN_JOB);
  EXPECT_EQ(DecodeCode(Push(), 0, &msg), pb::ERROR_NONE);
}

TEST(JobIdentityTest, TheStampOverridesAJobTheSenderWrote) {
  pb::Header h = MakeHeader(pb::MSG_HEARTBEAT, 2, 0);
  h.set_job(JobDigest("forged"));
  auto frames = EncodeControl(h);
  ASSERT_TRUE(frames.ok());
  StampJob(&*frames, JobDigest("mine"));
  Message msg;
  EXPECT_EQ(DecodeCode(std::move(frames).value(), JobDigest("mine"), &msg), pb::ERROR_NONE);
}

// Another job's message is refused as foreign before its version or content is looked at: the
// receiver then answers nothing (a stranger gets no reply, and none is reflected at a node it
// names).
TEST(JobIdentityTest, ForeignJobIsCheckedBeforeEverythingElse) {
  pb::Header h = MakeHeader(pb::MSG_HEARTBEAT, 2, 0);
  h.set_version(99);
  Frames frames;
  const std::string bytes = h.SerializeAsString();
  frames.emplace_back(bytes.data(), bytes.size());
  frames.emplace_back(3);  // and a stray frame
  StampJob(&frames, JobDigest("theirs"));
  Message msg;
  EXPECT_EQ(DecodeCode(std::move(frames), JobDigest("mine"), &msg), pb::ERROR_FOREIGN_JOB);
}

TEST(JobIdentityTest, TokenFileIsOneLine) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sieve-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "s3cret\n";
  auto token = ReadJobTokenFile((dir / "token").string());
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "s3cret");
  std::ofstream(dir / "empty") << "\n";
  EXPECT_EQ(ReadJobTokenFile((dir / "empty").string()).status().code(),
            StatusCode::kInvalidArgument);
  std::ofstream(dir / "big") << std::string(5000, 'x');
  EXPECT_EQ(ReadJobTokenFile((dir / "big").string()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadJobTokenFile((dir / "missing").string()).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sieve
