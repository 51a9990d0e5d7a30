// Every class of malformed input Decode must reject, each with its wire error code, a non-OK
// Status and no data views.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "tests/proto/test_util.h"

namespace sieve {
namespace {

using testing::DataHeader;
using testing::RawData;

class ProtoCodecMalformedTest : public ::testing::Test {
 protected:
  // Shard 0 has 100 indices, shard 1 has 50.
  std::vector<uint64_t> shard_lengths_ = {100, 50};

  DecodeLimits Limits(bool verify_checksum = true) const {
    return DecodeLimits{shard_lengths_, verify_checksum};
  }

  // Decodes and checks the rejection: the code, a non-OK status, and nothing to read.
  Status RejectedStatus(Frames frames, pb::ErrorCode want, const DecodeLimits& limits) {
    Message msg;
    // Stale content from an earlier message must not survive a failed decode.
    std::vector<float> stale = {1.0f};
    msg.values = stale;
    msg.indices = std::span<const uint32_t>(reinterpret_cast<const uint32_t*>(stale.data()), 1);
    const Status s = Decode(std::move(frames), limits, &msg);
    const pb::ErrorCode code = WireCodeOf(s);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(code, want) << "got " << pb::ErrorCode_Name(code) << ": " << s.ToString();
    EXPECT_EQ(s.code(), StatusCodeOf(want)) << s.ToString();
    EXPECT_NE(s.message().find(pb::ErrorCode_Name(want)), std::string::npos) << s.ToString();
    EXPECT_TRUE(msg.indices.empty());
    EXPECT_TRUE(msg.values.empty());
    EXPECT_TRUE(msg.values_fp16.empty());
    EXPECT_TRUE(msg.storage.empty());
    return s;
  }
  Status RejectedStatus(Frames frames, pb::ErrorCode want) {
    return RejectedStatus(std::move(frames), want, Limits());
  }
  void ExpectRejected(Frames frames, pb::ErrorCode want, const DecodeLimits& limits) {
    (void)RejectedStatus(std::move(frames), want, limits);
  }
  void ExpectRejected(Frames frames, pb::ErrorCode want) {
    (void)RejectedStatus(std::move(frames), want, Limits());
  }

  // `flag` belongs on an UPDATE only: a one-pair PUSH carrying it is malformed, a one-pair UPDATE
  // carrying it decodes with the flag kept.
  void ExpectOnlyOnAnUpdate(uint32_t flag) {
    std::vector<uint32_t> idx = {1};
    std::vector<float> val = {1.0f};
    pb::Header h = DataHeader(pb::MSG_PUSH, 0, 1);
    h.set_flags(flag);
    ExpectRejected(RawData(h, &idx, val), pb::ERROR_MALFORMED_HEADER);
    pb::Header u = DataHeader(pb::MSG_UPDATE, 0, 1);
    u.set_flags(flag);
    Message msg;
    const Status s = Decode(RawData(u, &idx, val), Limits(), &msg);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(msg.header.flags() & flag);
  }

  // A sparse fp32 PUSH for shard 0 with the given arrays and a header count of indices.size().
  Frames Push(const std::vector<uint32_t>& idx, const std::vector<float>& val, int shard = 0) {
    return RawData(DataHeader(pb::MSG_PUSH, shard, idx.size()), &idx, val);
  }

  void ExpectOk(Frames frames) {
    Message msg;
    const Status s = Decode(std::move(frames), Limits(), &msg);
    const pb::ErrorCode code = WireCodeOf(s);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(code, pb::ERROR_NONE);
  }
};

Frames One(zmq::message_t f) {
  Frames frames;
  frames.push_back(std::move(f));
  return frames;
}

pb::Header Control(pb::MsgType type) {
  pb::Header h;
  h.set_version(kProtocolVersion);
  h.set_type(type);
  h.set_sender(3);
  h.set_recipient(0);
  return h;
}

TEST_F(ProtoCodecMalformedTest, EmptyFrameVector) {
  ExpectRejected(Frames{}, pb::ERROR_BAD_FRAME_COUNT);
}

TEST_F(ProtoCodecMalformedTest, UnparsableHeader) {
  const std::vector<std::string> garbage = {
      std::string("\x0a\x05\x61\x62", 4),          // length-delimited field cut short
      std::string(11, '\xff'),                     // varint longer than 10 bytes
      std::string("\x00", 1),                      // field number 0
      std::string("\x0f\x01", 2),                  // wire type 7 does not exist
      std::string("\xa2\x01\x03\x12\x01\xff", 6),  // register.host with invalid UTF-8
  };
  for (const std::string& bytes : garbage) {
    Message msg;
    const Status s = Decode(One(testing::StringFrame(bytes)), Limits(), &msg);
    const pb::ErrorCode code = WireCodeOf(s);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(code, pb::ERROR_MALFORMED_HEADER) << s.ToString();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(msg.header.ByteSizeLong(), 0u);  // nothing half-parsed is left behind
  }
}

TEST_F(ProtoCodecMalformedTest, WrongVersion) {
  for (uint32_t version : {0u, kProtocolVersion + 1, 0xFFFFFFFFu}) {
    pb::Header h = Control(pb::MSG_HEARTBEAT);
    h.set_version(version);
    Message msg;
    const Status s = Decode(One(testing::HeaderFrame(h)), Limits(), &msg);
    const pb::ErrorCode code = WireCodeOf(s);
    EXPECT_EQ(code, pb::ERROR_VERSION_MISMATCH);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    // The parsed header stays readable so the receiver can answer the sender.
    EXPECT_EQ(msg.header.sender(), 3);
    EXPECT_EQ(msg.header.version(), version);
  }
  // An empty header frame parses as an all-default header: version 0.
  ExpectRejected(One(zmq::message_t()), pb::ERROR_VERSION_MISMATCH);
  // Data messages too, before any frame is looked at.
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {1.0f};
  pb::Header h = DataHeader(pb::MSG_PUSH, 0, 1);
  h.set_version(kProtocolVersion + 1);
  ExpectRejected(RawData(h, &idx, val), pb::ERROR_VERSION_MISMATCH);
  // Version 1 (zlib CRC-32 checksums) is refused as a version, not as a checksum failure.
  h.set_version(1);
  h.set_flags(pb::FLAG_CHECKSUM);
  h.set_checksum(0x12345678);
  ExpectRejected(RawData(h, &idx, val), pb::ERROR_VERSION_MISMATCH);
}

// FLAG_PUSH_MISSED (protocol 8) belongs on an UPDATE only: a PUSH carrying it is malformed, an
// UPDATE carrying it decodes with the flag kept.
TEST_F(ProtoCodecMalformedTest, PushMissedOnlyOnAnUpdate) {
  ExpectOnlyOnAnUpdate(pb::FLAG_PUSH_MISSED);
}

// FLAG_PUSH_LATE (protocol 10) likewise, and never with FLAG_PUSH_MISSED (a push is either never
// applied or applied later).
TEST_F(ProtoCodecMalformedTest, PushLateOnlyOnAnUpdateAndNotWithPushMissed) {
  ExpectOnlyOnAnUpdate(pb::FLAG_PUSH_LATE);
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {1.0f};
  pb::Header both = DataHeader(pb::MSG_UPDATE, 0, 1);
  both.set_flags(pb::FLAG_PUSH_LATE | pb::FLAG_PUSH_MISSED);
  ExpectRejected(RawData(both, &idx, val), pb::ERROR_MALFORMED_HEADER);
}

TEST_F(ProtoCodecMalformedTest, UnknownType) {
  std::string bytes;
  Control(pb::MSG_HEARTBEAT).SerializeToString(&bytes);
  bytes += std::string("\x10\x63", 2);  // type = 99; the last occurrence of a field wins
  ExpectRejected(One(testing::StringFrame(bytes)), pb::ERROR_MALFORMED_HEADER);
  ExpectRejected(One(testing::HeaderFrame(Control(pb::MSG_UNSPECIFIED))),
                 pb::ERROR_MALFORMED_HEADER);
}

TEST_F(ProtoCodecMalformedTest, ControlWithExtraFrames) {
  pb::Header h = Control(pb::MSG_HEARTBEAT);
  h.mutable_heartbeat();
  Frames two = One(testing::HeaderFrame(h));
  two.emplace_back(4);
  ExpectRejected(std::move(two), pb::ERROR_BAD_FRAME_COUNT);
  Frames empty_extra = One(testing::HeaderFrame(h));
  empty_extra.emplace_back();
  ExpectRejected(std::move(empty_extra), pb::ERROR_BAD_FRAME_COUNT);

  pb::Header pull = Control(pb::MSG_PULL_DENSE);
  pull.set_shard(0);
  Frames pull_frames = One(testing::HeaderFrame(pull));
  pull_frames.emplace_back(400);
  ExpectRejected(std::move(pull_frames), pb::ERROR_BAD_FRAME_COUNT);
}

TEST_F(ProtoCodecMalformedTest, ControlWithoutItsBody) {
  for (pb::MsgType type :
       {pb::MSG_REGISTER, pb::MSG_REGISTER_ACK, pb::MSG_NODE_TABLE, pb::MSG_BARRIER,
        pb::MSG_BARRIER_RELEASE, pb::MSG_NODE_DEAD, pb::MSG_SHUTDOWN, pb::MSG_ERROR}) {
    SCOPED_TRACE(MsgTypeName(type));
    ExpectRejected(One(testing::HeaderFrame(Control(type))), pb::ERROR_MALFORMED_HEADER);
    // The wrong body is no better than none.
    pb::Header wrong = Control(type);
    if (type == pb::MSG_SHUTDOWN) {
      wrong.mutable_finished();
    } else {
      wrong.mutable_shutdown()->set_reason("x");
    }
    ExpectRejected(One(testing::HeaderFrame(wrong)), pb::ERROR_MALFORMED_HEADER);
  }
  // HEARTBEAT, FINISHED and PULL_DENSE carry no required payload.
  ExpectOk(One(testing::HeaderFrame(Control(pb::MSG_HEARTBEAT))));
  ExpectOk(One(testing::HeaderFrame(Control(pb::MSG_FINISHED))));
}

TEST_F(ProtoCodecMalformedTest, DataWithWrongFrameCount) {
  std::vector<uint32_t> idx = {1, 2};
  std::vector<float> val = {1.0f, 2.0f};
  pb::Header h = DataHeader(pb::MSG_PUSH, 0, 2);
  // Sparse: header alone, header + one frame, four frames.
  ExpectRejected(One(testing::HeaderFrame(h)), pb::ERROR_BAD_FRAME_COUNT);
  Frames two = One(testing::HeaderFrame(h));
  two.push_back(testing::ArrayFrame(val));
  ExpectRejected(std::move(two), pb::ERROR_BAD_FRAME_COUNT);
  Frames four = RawData(h, &idx, val);
  four.push_back(testing::ArrayFrame(val));
  ExpectRejected(std::move(four), pb::ERROR_BAD_FRAME_COUNT);
  // Dense PUSH and DENSE take exactly two.
  std::vector<float> shard(100, 0.5f);
  pb::Header dense = DataHeader(pb::MSG_PUSH, 0, 100, pb::FLAG_DENSE);
  std::vector<uint32_t> no_idx;
  ExpectRejected(RawData(dense, &no_idx, shard), pb::ERROR_BAD_FRAME_COUNT);
  pb::Header full = DataHeader(pb::MSG_DENSE, 0, 100, pb::FLAG_DENSE);
  ExpectRejected(RawData(full, &no_idx, shard), pb::ERROR_BAD_FRAME_COUNT);
  ExpectRejected(One(testing::HeaderFrame(full)), pb::ERROR_BAD_FRAME_COUNT);
  ExpectOk(RawData(full, nullptr, shard));
}

TEST_F(ProtoCodecMalformedTest, FrameSizeDiffersFromCount) {
  std::vector<uint32_t> idx = {1, 2, 3};
  std::vector<float> val = {1.0f, 2.0f, 3.0f};
  std::vector<float> short_val = {1.0f, 2.0f};
  std::vector<uint32_t> long_idx = {1, 2, 3, 4};
  pb::Header h = DataHeader(pb::MSG_PUSH, 0, 3);
  // Values short by one element, indices right.
  ExpectRejected(RawData(h, &idx, short_val), pb::ERROR_BAD_FRAME_SIZE);
  // Indices long by one element, values right.
  ExpectRejected(RawData(h, &long_idx, val), pb::ERROR_BAD_FRAME_SIZE);
  // Values off by a single byte.
  Frames ragged = RawData(h, &idx, val);
  ragged[2] = testing::CopyFrame(val.data(), 11);
  ExpectRejected(std::move(ragged), pb::ERROR_BAD_FRAME_SIZE);
  Frames ragged_idx = RawData(h, &idx, val);
  ragged_idx[1] = testing::CopyFrame(long_idx.data(), 13);
  ExpectRejected(std::move(ragged_idx), pb::ERROR_BAD_FRAME_SIZE);
  // FP16 values must be 2 bytes each: a 4-byte-per-element frame is wrong.
  pb::Header h16 = DataHeader(pb::MSG_PUSH, 0, 3, pb::FLAG_FP16);
  ExpectRejected(RawData(h16, &idx, val), pb::ERROR_BAD_FRAME_SIZE);
  // Dense values frame of the wrong length for a correct count.
  std::vector<float> shard(99, 0.0f);
  ExpectRejected(RawData(DataHeader(pb::MSG_DENSE, 0, 100, pb::FLAG_DENSE), nullptr, shard),
                 pb::ERROR_BAD_FRAME_SIZE);
}

TEST_F(ProtoCodecMalformedTest, UnknownFlagBits) {
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {1.0f};
  for (uint32_t bit : {64u, 128u, 0x80000000u}) {
    ExpectRejected(RawData(DataHeader(pb::MSG_PUSH, 0, 1, bit), &idx, val),
                   pb::ERROR_MALFORMED_HEADER);
  }
  // A DENSE message must say so.
  std::vector<float> shard(100, 0.0f);
  ExpectRejected(RawData(DataHeader(pb::MSG_DENSE, 0, 100), nullptr, shard),
                 pb::ERROR_MALFORMED_HEADER);
}

// Only a sparse UPDATE may be split into parts, into at most kMaxReplyParts, with part < parts.
TEST_F(ProtoCodecMalformedTest, PartsOnlyOnASparseUpdateAndInRange) {
  std::vector<uint32_t> idx = {1, 4};
  std::vector<float> val = {1.0f, 2.0f};
  auto with_parts = [](pb::Header h, uint32_t part, uint32_t parts) {
    h.set_part(part);
    h.set_parts(parts);
    return h;
  };
  ExpectOk(RawData(with_parts(DataHeader(pb::MSG_UPDATE, 0, 2), 0, 2), &idx, val));
  ExpectOk(RawData(with_parts(DataHeader(pb::MSG_UPDATE, 0, 2), 4095, kMaxReplyParts), &idx, val));
  ExpectOk(RawData(with_parts(DataHeader(pb::MSG_UPDATE, 0, 2), 0, 1), &idx, val));  // whole
  const std::vector<std::pair<uint32_t, uint32_t>> bad = {
      {2, 2}, {5, 2}, {1, 0}, {1, 1}, {0, kMaxReplyParts + 1}};
  for (const auto& [part, parts] : bad) {
    ExpectRejected(RawData(with_parts(DataHeader(pb::MSG_UPDATE, 0, 2), part, parts), &idx, val),
                   pb::ERROR_MALFORMED_HEADER);
  }
  ExpectRejected(RawData(with_parts(DataHeader(pb::MSG_PUSH, 0, 2), 0, 2), &idx, val),
                 pb::ERROR_MALFORMED_HEADER);
  std::vector<float> shard(100, 0.0f);
  ExpectRejected(
      RawData(with_parts(DataHeader(pb::MSG_UPDATE, 0, 100, pb::FLAG_DENSE), 0, 2), nullptr, shard),
      pb::ERROR_MALFORMED_HEADER);
  ExpectRejected(
      One(zmq::message_t(with_parts(Control(pb::MSG_HEARTBEAT), 0, 2).SerializeAsString())),
      pb::ERROR_MALFORMED_HEADER);
}

// A COLLECTIVE (or its RESULT): a known op, a seq from 1, at most kMaxCollectiveValues values,
// every one finite; its body is required.
TEST_F(ProtoCodecMalformedTest, CollectiveBounds) {
  auto collective = [](pb::MsgType type, uint64_t seq, int op, std::vector<float> values) {
    pb::Header h = Control(type);
    pb::Collective* c = h.mutable_collective();
    c->set_seq(seq);
    c->set_op(static_cast<pb::CollectiveOp>(op));
    c->mutable_values()->Add(values.begin(), values.end());
    return h;
  };
  for (const pb::MsgType type : {pb::MSG_COLLECTIVE, pb::MSG_COLLECTIVE_RESULT}) {
    ExpectOk(One(testing::HeaderFrame(collective(type, 1, pb::COLLECTIVE_SUM, {1.0f, -2.0f}))));
    ExpectOk(One(testing::HeaderFrame(
        collective(type, 7, pb::COLLECTIVE_BROADCAST, std::vector<float>(kMaxCollectiveValues)))));
    ExpectRejected(One(testing::HeaderFrame(collective(
                       type, 1, pb::COLLECTIVE_SUM, std::vector<float>(kMaxCollectiveValues + 1)))),
                   pb::ERROR_BAD_COUNT);
    ExpectRejected(
        One(testing::HeaderFrame(collective(type, 1, pb::COLLECTIVE_SUM, {1.0f, std::nanf("")}))),
        pb::ERROR_NON_FINITE);
    ExpectRejected(One(testing::HeaderFrame(collective(type, 1, pb::COLLECTIVE_SUM,
                                                       {std::numeric_limits<float>::infinity()}))),
                   pb::ERROR_NON_FINITE);
    ExpectRejected(One(testing::HeaderFrame(collective(type, 0, pb::COLLECTIVE_SUM, {1.0f}))),
                   pb::ERROR_MALFORMED_HEADER);
    ExpectRejected(One(testing::HeaderFrame(collective(type, 1, 9, {1.0f}))),
                   pb::ERROR_MALFORMED_HEADER);
    ExpectRejected(One(testing::HeaderFrame(Control(type))), pb::ERROR_MALFORMED_HEADER);
  }
}

TEST_F(ProtoCodecMalformedTest, WrongShard) {
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {1.0f};
  ExpectRejected(Push(idx, val, -1), pb::ERROR_WRONG_SHARD);
  ExpectRejected(Push(idx, val, 2), pb::ERROR_WRONG_SHARD);  // only shards 0 and 1 exist
  ExpectRejected(Push(idx, val, std::numeric_limits<int32_t>::max()), pb::ERROR_WRONG_SHARD);
  // No node table yet: no shard is known, so every data message is refused.
  const DecodeLimits none{};
  ExpectRejected(Push(idx, val, 0), pb::ERROR_WRONG_SHARD, none);
  std::vector<float> shard(100, 0.0f);
  ExpectRejected(RawData(DataHeader(pb::MSG_DENSE, 0, 100, pb::FLAG_DENSE), nullptr, shard),
                 pb::ERROR_WRONG_SHARD, none);
  // PULL_DENSE names a shard too.
  pb::Header pull = Control(pb::MSG_PULL_DENSE);
  pull.set_shard(2);
  ExpectRejected(One(testing::HeaderFrame(pull)), pb::ERROR_WRONG_SHARD);
  pull.set_shard(-1);
  ExpectRejected(One(testing::HeaderFrame(pull)), pb::ERROR_WRONG_SHARD);
  pull.set_shard(1);
  ExpectRejected(One(testing::HeaderFrame(pull)), pb::ERROR_WRONG_SHARD, none);
  ExpectOk(One(testing::HeaderFrame(pull)));
}

TEST_F(ProtoCodecMalformedTest, CountBeyondShard) {
  // Shard 1 holds 50 indices: 51 elements cannot be a valid sparse message for it.
  std::vector<uint32_t> idx(51);
  for (uint32_t i = 0; i < 51; ++i) idx[i] = i;
  std::vector<float> val(51, 1.0f);
  Status s = RejectedStatus(Push(idx, val, 1), pb::ERROR_BAD_COUNT);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  // A huge count with empty frames is refused on the count, before any size arithmetic.
  std::vector<uint32_t> none_idx;
  std::vector<float> none_val;
  ExpectRejected(RawData(DataHeader(pb::MSG_PUSH, 0, ~uint64_t{0}), &none_idx, none_val),
                 pb::ERROR_BAD_COUNT);
  ExpectRejected(RawData(DataHeader(pb::MSG_PUSH, 0, uint64_t{1} << 62), &none_idx, none_val),
                 pb::ERROR_BAD_COUNT);
  // Exactly the shard length is fine.
  ExpectOk(
      Push(std::vector<uint32_t>(idx.begin(), idx.end() - 1), std::vector<float>(50, 1.0f), 1));
}

TEST_F(ProtoCodecMalformedTest, DenseCountMustEqualShardLength) {
  for (uint64_t count : {uint64_t{0}, uint64_t{49}, uint64_t{51}}) {
    std::vector<float> val(count, 1.0f);
    ExpectRejected(RawData(DataHeader(pb::MSG_PUSH, 1, count, pb::FLAG_DENSE), nullptr, val),
                   pb::ERROR_BAD_COUNT);
    ExpectRejected(RawData(DataHeader(pb::MSG_DENSE, 1, count, pb::FLAG_DENSE), nullptr, val),
                   pb::ERROR_BAD_COUNT);
    ExpectRejected(RawData(DataHeader(pb::MSG_UPDATE, 1, count, pb::FLAG_DENSE), nullptr, val),
                   pb::ERROR_BAD_COUNT);
  }
  ExpectOk(RawData(DataHeader(pb::MSG_UPDATE, 1, 50, pb::FLAG_DENSE), nullptr,
                   std::vector<float>(50, 1.0f)));
}

TEST_F(ProtoCodecMalformedTest, IndicesNotStrictlyIncreasing) {
  ExpectRejected(Push({1, 5, 5, 9}, {1, 2, 3, 4}), pb::ERROR_INDEX_ORDER);  // equal
  ExpectRejected(Push({1, 5, 4, 9}, {1, 2, 3, 4}), pb::ERROR_INDEX_ORDER);  // decreasing
  ExpectRejected(Push({9, 5, 4, 1}, {1, 2, 3, 4}), pb::ERROR_INDEX_ORDER);  // reversed
  ExpectRejected(Push({0, 0}, {1, 2}), pb::ERROR_INDEX_ORDER);              // at the start
  ExpectOk(Push({0, 1, 2, 99}, {1, 2, 3, 4}));
}

TEST_F(ProtoCodecMalformedTest, IndexBeyondShardLength) {
  Status s = RejectedStatus(Push({1, 100}, {1, 2}), pb::ERROR_INDEX_RANGE);  // shard 0 has 100
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  ExpectRejected(Push({0xFFFFFFFFu}, {1}), pb::ERROR_INDEX_RANGE);
  ExpectRejected(Push({10, 50}, {1, 2}, 1), pb::ERROR_INDEX_RANGE);  // shard 1 has 50
  ExpectOk(Push({10, 49}, {1, 2}, 1));
}

// Decode checks long frames a chunk at a time (proto/codec.cc); a fault anywhere, including just
// before, at and after a chunk edge and on the last element, is found and named exactly.
TEST_F(ProtoCodecMalformedTest, LongFramesCheckedAcrossChunks) {
  constexpr size_t kCount = 30000;
  shard_lengths_ = {4 * kCount, 50};
  const uint64_t len = shard_lengths_[0];
  std::vector<uint32_t> good_idx(kCount);
  for (size_t j = 0; j < kCount; ++j) good_idx[j] = static_cast<uint32_t>(4 * j + 1);
  const std::vector<float> good_val(kCount, 0.5f);
  ExpectOk(Push(good_idx, good_val));
  auto at = [](size_t j) { return "position " + std::to_string(j); };
  for (size_t j : {size_t{1}, size_t{6143}, size_t{6144}, size_t{6145}, size_t{12288},
                   size_t{24575}, size_t{24576}, kCount - 1}) {
    SCOPED_TRACE(j);
    std::vector<uint32_t> idx = good_idx;
    idx[j] = idx[j - 1];  // equal to its predecessor
    Status s = RejectedStatus(Push(idx, good_val), pb::ERROR_INDEX_ORDER);
    EXPECT_NE(s.message().find(at(j)), std::string::npos) << s.ToString();
    idx = good_idx;
    idx[j] = static_cast<uint32_t>(len);  // out of range, and so also out of order after it
    s = RejectedStatus(Push(idx, good_val), pb::ERROR_INDEX_RANGE);
    EXPECT_NE(s.message().find("index " + std::to_string(len)), std::string::npos);
    std::vector<float> val = good_val;
    val[j] = std::numeric_limits<float>::infinity();
    s = RejectedStatus(Push(good_idx, val), pb::ERROR_NON_FINITE);
    EXPECT_NE(s.message().find(at(j)), std::string::npos) << s.ToString();
    // Indices are judged before values.
    idx = good_idx;
    idx[j] = idx[j - 1];
    ExpectRejected(Push(idx, val), pb::ERROR_INDEX_ORDER);
    // The first fault wins: an order fault at j before a range fault later.
    idx[kCount - 1] = 0xFFFFFFFFu;
    if (j < kCount - 1) ExpectRejected(Push(idx, good_val), pb::ERROR_INDEX_ORDER);
  }
  // A checksum failure is reported before anything the corrupted bytes might cause.
  std::vector<uint32_t> idx = good_idx;
  auto keep = std::make_shared<std::vector<float>>(good_val);
  DataPayload p{idx,    std::as_bytes(std::span<const float>(*keep)), ValueType::kFp32, false, keep,
                nullptr};
  auto frames = EncodeData(DataHeader(pb::MSG_PUSH, 0, 0), p);
  ASSERT_TRUE(frames.ok());
  idx[20000] = 0;                                            // out of order in transit
  (*keep)[29999] = std::numeric_limits<float>::quiet_NaN();  // and non-finite
  ExpectRejected(std::move(frames).value(), pb::ERROR_CHECKSUM);
  // Dense fp16 over a long shard.
  std::vector<uint16_t> halves(len, 0x3C00);
  halves[len - 1] = 0x7C00;
  Frames f;
  f.push_back(
      testing::HeaderFrame(DataHeader(pb::MSG_DENSE, 0, len, pb::FLAG_DENSE | pb::FLAG_FP16)));
  f.push_back(testing::ArrayFrame(halves));
  Status s = RejectedStatus(std::move(f), pb::ERROR_NON_FINITE);
  EXPECT_NE(s.message().find(at(len - 1)), std::string::npos) << s.ToString();
}

TEST_F(ProtoCodecMalformedTest, NonFiniteFp32Values) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float snan = std::numeric_limits<float>::signaling_NaN();
  for (float bad : {nan, -nan, snan, inf, -inf}) {
    ExpectRejected(Push({1, 2, 3}, {0.0f, bad, 1.0f}), pb::ERROR_NON_FINITE);
    ExpectRejected(Push({1, 2, 3}, {0.0f, 1.0f, bad}), pb::ERROR_NON_FINITE);
    std::vector<float> shard(100, 1.0f);
    shard[99] = bad;
    ExpectRejected(RawData(DataHeader(pb::MSG_DENSE, 0, 100, pb::FLAG_DENSE), nullptr, shard),
                   pb::ERROR_NON_FINITE);
  }
  // The extremes of the finite range are fine.
  ExpectOk(Push({1, 2, 3}, {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min()}));
}

TEST_F(ProtoCodecMalformedTest, NonFiniteFp16Values) {
  std::vector<uint32_t> idx = {3, 4};
  for (uint16_t bad :
       {uint16_t{0x7C00}, uint16_t{0xFC00}, uint16_t{0x7E00}, uint16_t{0x7C01}, uint16_t{0xFFFF}}) {
    std::vector<uint16_t> val = {0x3C00, bad};
    Frames f;
    f.push_back(testing::HeaderFrame(DataHeader(pb::MSG_PUSH, 0, 2, pb::FLAG_FP16)));
    f.push_back(testing::ArrayFrame(idx));
    f.push_back(testing::ArrayFrame(val));
    ExpectRejected(std::move(f), pb::ERROR_NON_FINITE);
  }
  std::vector<uint16_t> ok = {0x7BFF, 0xFBFF};
  Frames f;
  f.push_back(testing::HeaderFrame(DataHeader(pb::MSG_PUSH, 0, 2, pb::FLAG_FP16)));
  f.push_back(testing::ArrayFrame(idx));
  f.push_back(testing::ArrayFrame(ok));
  ExpectOk(std::move(f));
}

TEST_F(ProtoCodecMalformedTest, BadChecksum) {
  auto keep = std::make_shared<std::vector<float>>(std::vector<float>{1.0f, 2.0f, 3.0f});
  std::vector<uint32_t> idx = {1, 2, 3};
  auto encode = [&] {
    DataPayload p{
        idx, std::as_bytes(std::span<const float>(*keep)), ValueType::kFp32, false, keep, nullptr};
    auto frames = EncodeData(DataHeader(pb::MSG_PUSH, 0, 0), p,
                             EncodeOptions{.checksum = true, .compact_indices = false});
    EXPECT_TRUE(frames.ok());
    return std::move(frames).value();
  };
  // The frames borrow the arrays: a byte changed after encoding is a byte changed in transit.
  Frames frames = encode();
  reinterpret_cast<unsigned char*>(keep->data())[4] ^= 0x01;  // low mantissa byte of 2.0f
  Status s = RejectedStatus(std::move(frames), pb::ERROR_CHECKSUM);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  // Not verified when the receiver turns verification off: the changed values are accepted.
  Frames again = encode();
  reinterpret_cast<unsigned char*>(keep->data())[0] ^= 0x80;
  Message msg;
  ASSERT_TRUE(Decode(std::move(again), Limits(/*verify_checksum=*/false), &msg).ok());
  EXPECT_EQ(msg.values[0], (*keep)[0]);
  // An index byte changed in transit.
  Frames idx_frames = encode();
  idx[0] = 0;
  ExpectRejected(std::move(idx_frames), pb::ERROR_CHECKSUM);
  // The checksum field itself altered.
  Frames raw = encode();
  pb::Header h;
  ASSERT_TRUE(h.ParseFromArray(raw[0].data(), static_cast<int>(raw[0].size())));
  h.set_checksum(h.checksum() ^ 1u);
  raw[0] = testing::HeaderFrame(h);
  ExpectRejected(std::move(raw), pb::ERROR_CHECKSUM);
}

TEST_F(ProtoCodecMalformedTest, ChecksumIgnoredWithoutFlag) {
  // Without FLAG_CHECKSUM the checksum field means nothing.
  pb::Header h = DataHeader(pb::MSG_PUSH, 0, 1);
  h.set_checksum(0xBAD);
  std::vector<uint32_t> idx = {7};
  std::vector<float> val = {0.25f};
  ExpectOk(RawData(h, &idx, val));
}

// Frames whose bytes start one byte past an aligned address (no ownership: zmq keeps a pointer).
TEST_F(ProtoCodecMalformedTest, MisalignedFramesAreRealigned) {
  for (size_t count : {size_t{3}, size_t{40}}) {
    SCOPED_TRACE(count);
    std::vector<uint32_t> idx(count);
    std::vector<float> val(count);
    for (size_t i = 0; i < count; ++i) {
      idx[i] = static_cast<uint32_t>(2 * i + 1);
      val[i] = 0.5f * static_cast<float>(i) - 3.0f;
    }
    std::vector<unsigned char> idx_buf(count * 4 + 8), val_buf(count * 4 + 8);
    unsigned char* idx_at = idx_buf.data() + 1;
    unsigned char* val_at = val_buf.data() + 1;
    if (reinterpret_cast<uintptr_t>(idx_at) % 4 == 0) ++idx_at;  // defensive; malloc aligns
    if (reinterpret_cast<uintptr_t>(val_at) % 4 == 0) ++val_at;
    std::memcpy(idx_at, idx.data(), count * 4);
    std::memcpy(val_at, val.data(), count * 4);
    Frames f;
    f.push_back(testing::HeaderFrame(DataHeader(pb::MSG_UPDATE, 0, count)));
    f.emplace_back(idx_at, count * 4, nullptr, nullptr);
    f.emplace_back(val_at, count * 4, nullptr, nullptr);
    ASSERT_NE(reinterpret_cast<uintptr_t>(f[1].data()) % 4, 0u);
    ASSERT_NE(reinterpret_cast<uintptr_t>(f[2].data()) % 4, 0u);
    Message msg;
    Status s = Decode(std::move(f), Limits(), &msg);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(msg.indices.size(), count);
    ASSERT_EQ(msg.values.size(), count);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(msg.indices.data()) % alignof(uint32_t), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(msg.values.data()) % alignof(float), 0u);
    EXPECT_FALSE(msg.realigned.empty());
    for (size_t i = 0; i < count; ++i) {
      EXPECT_EQ(msg.indices[i], idx[i]);
      EXPECT_EQ(msg.values[i], val[i]);
    }
    // Still valid after the Message moves.
    Message moved = std::move(msg);
    EXPECT_EQ(moved.values[count - 1], val[count - 1]);
    EXPECT_EQ(moved.indices[count - 1], idx[count - 1]);
  }
  // A misaligned fp16 frame, and a misaligned frame that fails validation.
  std::vector<uint16_t> halves = {0x3C00, 0x4000, 0xC000};
  std::vector<unsigned char> buf(16);
  std::memcpy(buf.data() + 1, halves.data(), 6);
  Frames f16;
  f16.push_back(testing::HeaderFrame(DataHeader(pb::MSG_DENSE, 0, 3, pb::FLAG_DENSE | 1)));
  f16.emplace_back(buf.data() + 1, 6, nullptr, nullptr);
  shard_lengths_ = {3};
  Message msg;
  ASSERT_TRUE(Decode(std::move(f16), Limits(), &msg).ok());
  ASSERT_EQ(msg.values_fp16.size(), 3u);
  EXPECT_EQ(msg.values_fp16[0], 0x3C00);
  EXPECT_EQ(msg.values_fp16[2], 0xC000);
  const uint16_t inf = 0x7C00;
  std::memcpy(buf.data() + 3, &inf, 2);
  Frames bad;
  bad.push_back(testing::HeaderFrame(DataHeader(pb::MSG_DENSE, 0, 3, pb::FLAG_DENSE | 1)));
  bad.emplace_back(buf.data() + 1, 6, nullptr, nullptr);
  ExpectRejected(std::move(bad), pb::ERROR_NON_FINITE);
}

}  // namespace
}  // namespace sieve

namespace sieve {
namespace {

// INIT (worker 0's initial weights) is always a whole shard: without FLAG_DENSE, with another
// count, with indices or non-finite values it is rejected like a bad DENSE; a good one decodes.
TEST_F(ProtoCodecMalformedTest, InitMustBeAWholeFiniteShard) {
  std::vector<float> shard(100, 0.5f);
  ExpectOk(RawData(DataHeader(pb::MSG_INIT, 0, 100, pb::FLAG_DENSE), nullptr, shard));
  ExpectRejected(RawData(DataHeader(pb::MSG_INIT, 0, 100), nullptr, shard),
                 pb::ERROR_MALFORMED_HEADER);
  std::vector<float> short_shard(99, 0.5f);
  ExpectRejected(RawData(DataHeader(pb::MSG_INIT, 0, 99, pb::FLAG_DENSE), nullptr, short_shard),
                 pb::ERROR_BAD_COUNT);
  std::vector<uint32_t> idx = {1, 2};
  ExpectRejected(RawData(DataHeader(pb::MSG_INIT, 0, 100, pb::FLAG_DENSE), &idx, shard),
                 pb::ERROR_BAD_FRAME_COUNT);
  shard[42] = std::numeric_limits<float>::quiet_NaN();
  ExpectRejected(RawData(DataHeader(pb::MSG_INIT, 0, 100, pb::FLAG_DENSE), nullptr, shard),
                 pb::ERROR_NON_FINITE);
}

}  // namespace
}  // namespace sieve
