// Round trips of every message type through EncodeControl/EncodeData and Decode, and the
// zero-copy contract on both sides.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "tests/proto/test_util.h"

namespace sieve {
namespace {

// The raw index layout (uint32 array, protocol 6's and `--wire=v4`'s): what these round trips
// check byte by byte. The compact codings have their own tests (codec_compact_test.cc).
const EncodeOptions kRawIndices{.checksum = true, .compact_indices = false};

using google::protobuf::util::MessageDifferencer;
using testing::Bytes;

// Shard lengths the receiver knows: shard 0 has 1000 indices, shard 1 has 999, shard 2 has 7.
const std::vector<uint64_t> kShardLengths = {1000, 999, 7};

DecodeLimits Limits() { return DecodeLimits{kShardLengths, true}; }

pb::Header Base(pb::MsgType type, int sender, int recipient) {
  pb::Header h;
  h.set_type(type);
  h.set_sender(sender);
  h.set_recipient(recipient);
  h.set_round(123456789012ull);
  h.set_shard(-1);
  return h;
}

// Encodes `h` as a control message, decodes it and checks that every field came back.
void ExpectControlRoundTrip(const pb::Header& h) {
  SCOPED_TRACE(MsgTypeName(h.type()));
  auto frames = EncodeControl(h);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 1u);
  Message msg;
  const Status s = Decode(std::move(frames).value(), Limits(), &msg);
  const pb::ErrorCode code = WireCodeOf(s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(code, pb::ERROR_NONE);
  pb::Header want = h;
  want.set_version(kProtocolVersion);
  want.set_count(0);
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(want, msg.header)) << diff;
  EXPECT_EQ(msg.type(), h.type());
  EXPECT_EQ(msg.header.version(), kProtocolVersion);
  EXPECT_TRUE(msg.indices.empty());
  EXPECT_TRUE(msg.values.empty());
  EXPECT_TRUE(msg.values_fp16.empty());
  EXPECT_EQ(msg.storage.size(), 1u);
}

// A checksum computed once by the caller (DataChecksum) is the one EncodeData computes, and a
// wrong one is caught by the receiver.
TEST(ProtoCodecTest, PrecomputedChecksumEqualsTheComputedOne) {
  auto arrays = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<float>>>(
      std::vector<uint32_t>{2, 5, 9, 40}, std::vector<float>{0.5f, -1.0f, 3.0f, 7.25f});
  pb::Header h;
  h.set_type(pb::MSG_UPDATE);
  h.set_sender(1);
  h.set_shard(0);
  h.set_round(3);
  DataPayload p;
  p.indices = arrays->first;
  p.values = std::as_bytes(std::span<const float>(arrays->second));
  p.keepalive = arrays;
  const uint32_t crc = DataChecksum(p);
  EncodeOptions given = kRawIndices;
  given.precomputed_checksum = &crc;
  auto a = EncodeData(h, p, kRawIndices);
  auto b = EncodeData(h, p, given);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint64_t> shard_lengths = {100};
  DecodeLimits limits{shard_lengths, true};
  Message ma, mb;
  ASSERT_TRUE(Decode(std::move(a).value(), limits, &ma).ok());
  ASSERT_TRUE(Decode(std::move(b).value(), limits, &mb).ok());
  EXPECT_EQ(ma.header.checksum(), crc);
  EXPECT_EQ(mb.header.checksum(), crc);
  const uint32_t wrong = crc ^ 1u;
  given.precomputed_checksum = &wrong;
  auto c = EncodeData(h, p, given);
  ASSERT_TRUE(c.ok());
  Message mc;
  const Status s = Decode(std::move(c).value(), limits, &mc);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(WireCodeOf(s), pb::ERROR_CHECKSUM);
}

TEST(ProtoCodecTest, RegisterRoundTrip) {
  pb::Header h = Base(pb::MSG_REGISTER, -1, kSchedulerId);
  auto* r = h.mutable_register_();
  r->set_role(pb::ROLE_WORKER);
  r->set_host("10.1.2.3");
  r->set_port(45678);
  r->set_protocol_version(kProtocolVersion);
  r->set_rank(3);
  r->set_instance(0xDEADBEEFCAFEF00Dull);
  r->set_num_params(199210);
  ExpectControlRoundTrip(h);
  r->set_rank(-1);
  r->set_role(pb::ROLE_SERVER);
  r->set_num_params(0);
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, RegisterAckRoundTrip) {
  pb::Header h = Base(pb::MSG_REGISTER_ACK, kSchedulerId, -1);
  h.mutable_register_ack()->set_waiting_for(4);
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, NodeTableRoundTrip) {
  pb::Header h = Base(pb::MSG_NODE_TABLE, kSchedulerId, 2);
  auto* t = h.mutable_node_table();
  t->set_num_params(1999);
  t->set_num_servers(2);
  t->set_num_workers(3);
  t->set_generation(5);
  for (int id = 1; id <= 5; ++id) {
    auto* n = t->add_nodes();
    n->set_id(id);
    n->set_role(id <= 2 ? pb::ROLE_SERVER : pb::ROLE_WORKER);
    n->set_rank(id <= 2 ? id - 1 : id - 3);
    n->set_host("host-" + std::to_string(id));
    n->set_port(static_cast<uint32_t>(9000 + id));
    if (id <= 2) {
      n->set_shard_lo(id == 1 ? 0 : 1000);
      n->set_shard_hi(id == 1 ? 1000 : 1999);
    }
    n->set_instance(1000u * static_cast<uint64_t>(id) + 1);
  }
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, BarrierAndReleaseRoundTrip) {
  for (pb::MsgType type : {pb::MSG_BARRIER, pb::MSG_BARRIER_RELEASE}) {
    for (uint32_t group : {kGroupServers, kGroupWorkers, kGroupAll}) {
      pb::Header h = Base(type, type == pb::MSG_BARRIER ? 4 : kSchedulerId,
                          type == pb::MSG_BARRIER ? kSchedulerId : 4);
      h.mutable_barrier()->set_group(group);
      h.mutable_barrier()->set_seq(17);
      ExpectControlRoundTrip(h);
    }
  }
}

TEST(ProtoCodecTest, HeartbeatRoundTrip) {
  pb::Header h = Base(pb::MSG_HEARTBEAT, 3, kSchedulerId);
  h.mutable_heartbeat();
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, NodeDeadRoundTrip) {
  pb::Header h = Base(pb::MSG_NODE_DEAD, kSchedulerId, 1);
  auto* d = h.mutable_node_dead();
  d->set_id(4);
  d->set_role(pb::ROLE_WORKER);
  d->set_rank(1);
  d->set_reason("no heartbeat for 10000 ms");
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, ShutdownRoundTrip) {
  for (bool failed : {false, true}) {
    pb::Header h = Base(pb::MSG_SHUTDOWN, kSchedulerId, 2);
    h.mutable_shutdown()->set_reason(failed ? "server 0 died" : "training finished");
    h.mutable_shutdown()->set_failed(failed);
    ExpectControlRoundTrip(h);
  }
}

TEST(ProtoCodecTest, FinishedRoundTrip) {
  pb::Header h = Base(pb::MSG_FINISHED, 5, kSchedulerId);
  h.mutable_finished();
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, ErrorRoundTrip) {
  pb::Header h = Base(pb::MSG_ERROR, 1, 4);
  h.mutable_error()->set_code(pb::ERROR_INDEX_ORDER);
  h.mutable_error()->set_message("indices not strictly increasing at position 3");
  h.mutable_error()->set_rejected_type(pb::MSG_PUSH);
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, PullDenseRoundTrip) {
  pb::Header h = Base(pb::MSG_PULL_DENSE, 4, 2);
  h.set_shard(1);
  ExpectControlRoundTrip(h);
}

TEST(ProtoCodecTest, ControlEncodeOverridesVersionAndCount) {
  pb::Header h = Base(pb::MSG_HEARTBEAT, 3, kSchedulerId);
  h.set_version(99);
  h.set_count(12);
  h.mutable_heartbeat();
  auto frames = EncodeControl(h);
  ASSERT_TRUE(frames.ok());
  pb::Header parsed;
  ASSERT_TRUE(parsed.ParseFromArray((*frames)[0].data(), static_cast<int>((*frames)[0].size())));
  EXPECT_EQ(parsed.version(), kProtocolVersion);
  EXPECT_EQ(parsed.count(), 0u);
}

// The arrays of a data message, kept alive by a shared_ptr the way a sender would.
struct Arrays {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  std::vector<uint16_t> halves;
};

// Strictly increasing indices in [0, len), `count` of them, deterministic.
std::vector<uint32_t> SortedIndices(uint64_t len, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> all(len);
  for (uint64_t i = 0; i < len; ++i) all[i] = static_cast<uint32_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<float> RandomValues(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  if (count > 1) v[1] = -0.0f;
  return v;
}

// The checksum the encoder must set: CRC-32C over the data frames in order.
uint32_t ExpectedCrc(std::span<const std::byte> a, std::span<const std::byte> b) {
  return testing::ReferenceCrc32c(testing::ReferenceCrc32c(0, a), b);
}

// Checks the header fields EncodeData must set and those it must preserve.
void ExpectDataHeader(const pb::Header& got, const pb::Header& sent, uint64_t count, uint32_t flags,
                      uint32_t crc) {
  EXPECT_EQ(got.version(), kProtocolVersion);
  EXPECT_EQ(got.type(), sent.type());
  EXPECT_EQ(got.sender(), sent.sender());
  EXPECT_EQ(got.recipient(), sent.recipient());
  EXPECT_EQ(got.round(), sent.round());
  EXPECT_EQ(got.shard(), sent.shard());
  EXPECT_EQ(got.count(), count);
  EXPECT_EQ(got.flags(), flags);
  EXPECT_EQ(got.checksum(), crc);
  EXPECT_EQ(got.body_case(), pb::Header::BODY_NOT_SET);
}

TEST(ProtoCodecTest, SparsePushFp32RoundTripIsZeroCopy) {
  auto arrays = std::make_shared<Arrays>();
  arrays->indices = SortedIndices(1000, 600, 1);
  arrays->values = RandomValues(600, 2);
  DataPayload p;
  p.indices = arrays->indices;
  p.values = Bytes(arrays->values);
  p.keepalive = arrays;
  EXPECT_EQ(arrays.use_count(), 2);

  pb::Header h = testing::DataHeader(pb::MSG_PUSH, 0, 0);
  h.set_version(0);       // EncodeData fills it in
  h.mutable_heartbeat();  // a stray body is cleared
  auto frames = EncodeData(h, p, kRawIndices);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 3u);
  // Zero-copy on send: the data frames are the caller's arrays, each holding a keepalive.
  EXPECT_EQ((*frames)[1].data(), static_cast<const void*>(arrays->indices.data()));
  EXPECT_EQ((*frames)[2].data(), static_cast<const void*>(arrays->values.data()));
  EXPECT_EQ((*frames)[1].size(), 600u * 4);
  EXPECT_EQ((*frames)[2].size(), 600u * 4);
  EXPECT_EQ(arrays.use_count(), 4);

  {
    Message msg;
    const Status s = Decode(std::move(frames).value(), Limits(), &msg);
    const pb::ErrorCode code = WireCodeOf(s);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(code, pb::ERROR_NONE);
    const uint32_t crc =
        ExpectedCrc(std::as_bytes(std::span(arrays->indices)), Bytes(arrays->values));
    ExpectDataHeader(msg.header, h, 600, pb::FLAG_CHECKSUM, crc);
    EXPECT_FALSE(msg.dense());
    ASSERT_EQ(msg.indices.size(), 600u);
    ASSERT_EQ(msg.values.size(), 600u);
    EXPECT_TRUE(msg.values_fp16.empty());
    for (size_t i = 0; i < 600; ++i) {
      EXPECT_EQ(msg.indices[i], arrays->indices[i]) << i;
      EXPECT_EQ(std::memcmp(&msg.values[i], &arrays->values[i], 4), 0) << i;
    }
    // Zero-copy on receive: the views point into the frames, here the caller's own arrays.
    ASSERT_EQ(msg.storage.size(), 3u);
    EXPECT_EQ(static_cast<const void*>(msg.indices.data()), msg.storage[1].data());
    EXPECT_EQ(static_cast<const void*>(msg.values.data()), msg.storage.back().data());
    EXPECT_EQ(msg.values.data(), arrays->values.data());
    EXPECT_TRUE(msg.realigned.empty());
    EXPECT_EQ(arrays.use_count(), 4);  // the Message holds the frames

    // The views survive a move of the Message.
    Message moved = std::move(msg);
    EXPECT_EQ(moved.values.data(), arrays->values.data());
    EXPECT_EQ(moved.indices[599], arrays->indices[599]);
  }
  EXPECT_EQ(arrays.use_count(), 2);  // frames gone: the keepalive is released
  p.keepalive.reset();
  EXPECT_EQ(arrays.use_count(), 1);
}

TEST(ProtoCodecTest, KeepaliveReleasedWhenFramesDropped) {
  auto arrays = std::make_shared<Arrays>();
  arrays->indices = {1, 2, 3};
  arrays->values = {1.0f, 2.0f, 3.0f};
  {
    DataPayload p{arrays->indices, Bytes(arrays->values), ValueType::kFp32, false, arrays, nullptr};
    auto frames = EncodeData(testing::DataHeader(pb::MSG_UPDATE, 2, 0), p, kRawIndices);
    ASSERT_TRUE(frames.ok());
    EXPECT_EQ(arrays.use_count(), 4);
  }
  EXPECT_EQ(arrays.use_count(), 1);
}

TEST(ProtoCodecTest, ReceivedCopiesAreViewedInPlace) {
  // A frame received from a socket owns its bytes; Decode must view them, not copy them.
  const std::vector<uint32_t> idx = SortedIndices(999, 500, 3);
  const std::vector<float> val = RandomValues(500, 4);
  pb::Header h = testing::DataHeader(pb::MSG_PUSH, 1, 500);
  Message msg;
  Status s = Decode(testing::RawData(h, &idx, val), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(static_cast<const void*>(msg.indices.data()), msg.storage[1].data());
  EXPECT_EQ(static_cast<const void*>(msg.values.data()), msg.storage.back().data());
  EXPECT_NE(msg.values.data(), val.data());
  EXPECT_TRUE(msg.realigned.empty());
  EXPECT_TRUE(std::equal(idx.begin(), idx.end(), msg.indices.begin(), msg.indices.end()));
  EXPECT_TRUE(std::equal(val.begin(), val.end(), msg.values.begin(), msg.values.end()));
}

TEST(ProtoCodecTest, SparsePushFp16RoundTrip) {
  auto arrays = std::make_shared<Arrays>();
  arrays->indices = SortedIndices(999, 300, 5);
  std::mt19937 rng(6);
  for (size_t i = 0; i < 300; ++i) {
    uint16_t bits;
    do {
      bits = static_cast<uint16_t>(rng());
    } while ((bits & 0x7C00u) == 0x7C00u);  // finite binary16 patterns only
    arrays->halves.push_back(bits);
  }
  arrays->halves[0] = 0x7BFF;  // largest finite
  arrays->halves[1] = 0x0001;  // smallest subnormal
  arrays->halves[2] = 0x8000;  // -0
  DataPayload p{arrays->indices, Bytes(arrays->halves), ValueType::kFp16, false, arrays, nullptr};
  pb::Header h = testing::DataHeader(pb::MSG_PUSH, 1, 0);
  auto frames = EncodeData(h, p, kRawIndices);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 3u);
  EXPECT_EQ((*frames)[2].size(), 300u * 2);
  EXPECT_EQ((*frames)[2].data(), static_cast<const void*>(arrays->halves.data()));
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const uint32_t crc =
      ExpectedCrc(std::as_bytes(std::span(arrays->indices)), Bytes(arrays->halves));
  ExpectDataHeader(msg.header, h, 300, pb::FLAG_FP16 | pb::FLAG_CHECKSUM, crc);
  EXPECT_TRUE(msg.values.empty());
  ASSERT_EQ(msg.values_fp16.size(), 300u);
  ASSERT_EQ(msg.indices.size(), 300u);
  for (size_t i = 0; i < 300; ++i) {
    EXPECT_EQ(msg.values_fp16[i], arrays->halves[i]) << i;
    EXPECT_EQ(msg.indices[i], arrays->indices[i]) << i;
  }
  EXPECT_EQ(static_cast<const void*>(msg.values_fp16.data()), msg.storage.back().data());
  EXPECT_EQ(ValueSize(msg.header.flags()), 2u);
}

TEST(ProtoCodecTest, DensePushRoundTrip) {
  auto arrays = std::make_shared<Arrays>();
  arrays->values = RandomValues(1000, 7);
  DataPayload p{{}, Bytes(arrays->values), ValueType::kFp32, true, arrays, nullptr};
  pb::Header h = testing::DataHeader(pb::MSG_PUSH, 0, 0);
  auto frames = EncodeData(h, p, kRawIndices);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 2u);  // no indices frame
  EXPECT_EQ((*frames)[1].data(), static_cast<const void*>(arrays->values.data()));
  EXPECT_EQ(arrays.use_count(), 3);  // one borrowed frame
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectDataHeader(msg.header, h, 1000, pb::FLAG_DENSE | pb::FLAG_CHECKSUM,
                   ExpectedCrc({}, Bytes(arrays->values)));
  EXPECT_TRUE(msg.dense());
  EXPECT_TRUE(msg.indices.empty());
  ASSERT_EQ(msg.values.size(), 1000u);
  for (size_t i = 0; i < 1000; ++i) EXPECT_EQ(msg.values[i], arrays->values[i]) << i;
  EXPECT_EQ(msg.values.data(), arrays->values.data());
}

TEST(ProtoCodecTest, SparseUpdateRoundTrip) {
  auto arrays = std::make_shared<Arrays>();
  arrays->indices = {0, 1, 3, 6};  // shard 2 has length 7: the last index is in range
  arrays->values = {0.5f, -1.25f, 3e-38f, -3.4e38f};
  DataPayload p{arrays->indices, Bytes(arrays->values), ValueType::kFp32, false, arrays, nullptr};
  pb::Header h = testing::DataHeader(pb::MSG_UPDATE, 2, 0);
  h.set_sender(3);
  h.set_recipient(6);
  auto frames = EncodeData(h, p, kRawIndices);
  ASSERT_TRUE(frames.ok());
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectDataHeader(msg.header, h, 4, pb::FLAG_CHECKSUM,
                   ExpectedCrc(std::as_bytes(std::span(arrays->indices)), Bytes(arrays->values)));
  EXPECT_EQ(msg.type(), pb::MSG_UPDATE);
  ASSERT_EQ(msg.indices.size(), 4u);
  ASSERT_EQ(msg.values.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(msg.indices[i], arrays->indices[i]);
    EXPECT_EQ(msg.values[i], arrays->values[i]);
  }
}

TEST(ProtoCodecTest, DenseRoundTripSetsDenseFlag) {
  auto arrays = std::make_shared<Arrays>();
  arrays->values = RandomValues(999, 8);
  // MSG_DENSE is dense even when the payload does not say so.
  DataPayload p{{}, Bytes(arrays->values), ValueType::kFp32, false, arrays, nullptr};
  pb::Header h = testing::DataHeader(pb::MSG_DENSE, 1, 0);
  auto frames = EncodeData(h, p, EncodeOptions{.checksum = false, .compact_indices = false});
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 2u);
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectDataHeader(msg.header, h, 999, pb::FLAG_DENSE, 0);
  EXPECT_TRUE(msg.dense());
  ASSERT_EQ(msg.values.size(), 999u);
  for (size_t i = 0; i < 999; ++i) EXPECT_EQ(msg.values[i], arrays->values[i]) << i;
  EXPECT_EQ(static_cast<const void*>(msg.values.data()), msg.storage.back().data());
}

TEST(ProtoCodecTest, DenseFp16RoundTrip) {
  auto arrays = std::make_shared<Arrays>();
  arrays->halves = {0x3C00, 0xBC00, 0x0000, 0x7BFF, 0x03FF, 0x8001, 0x4248};
  DataPayload p{{}, Bytes(arrays->halves), ValueType::kFp16, false, arrays, nullptr};
  auto frames = EncodeData(testing::DataHeader(pb::MSG_DENSE, 2, 0), p, kRawIndices);
  ASSERT_TRUE(frames.ok());
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(msg.header.flags(), pb::FLAG_DENSE | pb::FLAG_FP16 | pb::FLAG_CHECKSUM);
  ASSERT_EQ(msg.values_fp16.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(msg.values_fp16[i], arrays->halves[i]);
}

TEST(ProtoCodecTest, EmptySparsePush) {
  DataPayload p;  // count 0, no arrays, no keepalive
  auto frames = EncodeData(testing::DataHeader(pb::MSG_PUSH, 0, 0), p, kRawIndices);
  ASSERT_TRUE(frames.ok()) << frames.status().ToString();
  ASSERT_EQ(frames->size(), 3u);
  EXPECT_EQ((*frames)[1].size(), 0u);
  EXPECT_EQ((*frames)[2].size(), 0u);
  Message msg;
  Status s = Decode(std::move(frames).value(), Limits(), &msg);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(msg.header.count(), 0u);
  EXPECT_EQ(msg.header.checksum(), 0u);  // CRC-32C of no bytes
  EXPECT_TRUE(msg.indices.empty());
  EXPECT_TRUE(msg.values.empty());
  EXPECT_EQ(msg.storage.size(), 3u);
}

TEST(ProtoCodecTest, CallerFlagsOtherThanDataBitsAreReplaced) {
  // FP16/DENSE/CHECKSUM come from the payload and options, not from the caller's header.
  std::vector<uint32_t> idx = {4};
  std::vector<float> val = {1.0f};
  pb::Header h =
      testing::DataHeader(pb::MSG_PUSH, 0, 0, pb::FLAG_FP16 | pb::FLAG_DENSE | pb::FLAG_CHECKSUM);
  h.set_checksum(0x12345678);
  auto frames =
      EncodeData(h, DataPayload{idx, Bytes(val), ValueType::kFp32, false, nullptr, nullptr},
                 EncodeOptions{.checksum = false, .compact_indices = false});
  ASSERT_TRUE(frames.ok());
  ASSERT_EQ(frames->size(), 3u);
  Message msg;
  ASSERT_TRUE(Decode(std::move(frames).value(), Limits(), &msg).ok());
  EXPECT_EQ(msg.header.flags(), 0u);
  EXPECT_EQ(msg.header.checksum(), 0u);
}

TEST(ProtoCodecTest, EncodeRejectsInconsistentPayloads) {
  std::vector<uint32_t> idx = {1, 2, 3};
  std::vector<float> val = {1.0f, 2.0f};
  auto mismatch =
      EncodeData(testing::DataHeader(pb::MSG_PUSH, 0, 0),
                 DataPayload{idx, Bytes(val), ValueType::kFp32, false, nullptr, nullptr});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);

  std::vector<std::byte> odd(6);  // 1.5 fp32 values
  auto partial = EncodeData(testing::DataHeader(pb::MSG_PUSH, 0, 0),
                            DataPayload{{}, odd, ValueType::kFp32, true, nullptr, nullptr});
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().code(), StatusCode::kInvalidArgument);

  std::vector<std::byte> odd16(3);  // 1.5 fp16 values
  auto partial16 = EncodeData(testing::DataHeader(pb::MSG_PUSH, 0, 0),
                              DataPayload{{}, odd16, ValueType::kFp16, true, nullptr, nullptr});
  EXPECT_FALSE(partial16.ok());
}

TEST(ProtoCodecTest, MsgTypeNames) {
  EXPECT_EQ(MsgTypeName(pb::MSG_PUSH), "PUSH");
  EXPECT_EQ(MsgTypeName(pb::MSG_REGISTER_ACK), "REGISTER_ACK");
  EXPECT_EQ(MsgTypeName(pb::MSG_PULL_DENSE), "PULL_DENSE");
  EXPECT_EQ(MsgTypeName(static_cast<pb::MsgType>(99)), "UNKNOWN");
  EXPECT_EQ(ValueSize(0), 4u);
  EXPECT_EQ(ValueSize(pb::FLAG_FP16 | pb::FLAG_DENSE), 2u);
}

}  // namespace
}  // namespace sieve
