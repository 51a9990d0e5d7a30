// ShardService driven without sockets: messages are encoded and decoded by the real codec, sent
// through a recording ServerLink, and the replies decoded again. The expected weights come from a
// dense replay of the pushes (the oracle), not from ShardServer.
#include "server/service/shard_service.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "kernels/sparse_ops.h"
#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"

namespace sieve {
namespace {

constexpr int kServers = 2;  // this server is rank 0 (id 1); the other server is id 2
constexpr uint32_t kShardLen = 64;

struct SentError {
  int peer;
  pb::ErrorCode code;
  std::string message;
  pb::MsgType rejected;
  uint64_t round;
};

class RecordingLink : public ServerLink {
 public:
  int id() const override { return 1; }
  int WorkerId(int rank) const override { return 1 + kServers + rank; }
  int WorkerRankOf(int id) const override { return id - 1 - kServers; }
  // Replies: what a worker reads (never waits on the peer).
  Status Reply(int peer, Frames frames) override {
    sent.push_back({peer, std::move(frames)});
    return Status::Ok();
  }
  // The replication stream only (it may wait for queue space): a service without backups sends
  // nothing this way, so every test here checks that no reply could stall the event loop.
  Status Send(int peer, Frames frames) override {
    ADD_FAILURE() << "a send to node " << peer << " that may wait for a peer that does not read";
    streamed.push_back({peer, std::move(frames)});
    return Status::Ok();
  }
  Status SendError(int peer, pb::ErrorCode code, const std::string& message, pb::MsgType rejected,
                   uint64_t round, int /*shard*/) override {
    errors.push_back({peer, code, message, rejected, round});
    return Status::Ok();
  }

  std::vector<std::pair<int, Frames>> sent;
  std::vector<std::pair<int, Frames>> streamed;
  std::vector<SentError> errors;
};

// Decodes a frame set as a worker would (checksums verified).
Message DecodeOrDie(Frames frames) {
  const std::vector<uint64_t> lengths(kServers, kShardLen);
  Message m;
  Status s = Decode(std::move(frames), {lengths, true}, &m);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

// A PUSH from node `sender` for `shard`, through the codec (fp16: values sent as binary16).
Message Push(int sender, int shard, uint64_t round, const std::vector<uint32_t>& idx,
             const std::vector<float>& val, bool fp16 = false) {
  pb::Header h = MakeDataHeader(pb::MSG_PUSH, sender, 1, shard, round);
  struct Arrays {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    std::vector<uint16_t> half;
  };
  auto a = std::make_shared<Arrays>(Arrays{idx, val, std::vector<uint16_t>(val.size())});
  DataPayload p;
  p.indices = a->idx;
  p.value_type = fp16 ? ValueType::kFp16 : ValueType::kFp32;
  if (fp16) {
    EXPECT_TRUE(PackFp16(a->val, a->half).ok());
    p.values = std::as_bytes(std::span<const uint16_t>(a->half));
  } else {
    p.values = std::as_bytes(std::span<const float>(a->val));
  }
  p.keepalive = a;
  auto frames = EncodeData(h, p);
  EXPECT_TRUE(frames.ok()) << frames.status().ToString();
  return DecodeOrDie(std::move(frames).value());
}

Message Control(int sender, pb::MsgType type, uint64_t round, int shard = 0) {
  pb::Header h = MakeDataHeader(type, sender, 1, shard, round);
  auto frames = EncodeControl(h);
  EXPECT_TRUE(frames.ok());
  return DecodeOrDie(std::move(frames).value());
}

std::vector<float> Init() {
  std::vector<float> w(kShardLen);
  for (uint32_t i = 0; i < kShardLen; ++i) w[i] = 0.5f + 0.25f * static_cast<float>(i);
  return w;
}

struct Fixture {
  explicit Fixture(uint32_t workers, uint64_t reply_part_pairs = 0,
                   ValueType reply_values = ValueType::kFp32) {
    ShardServerOptions so;
    so.num_workers = workers;
    so.reply_part_pairs = 0;  // the service splits whole replies itself
    auto created = ShardServer::Create(so, Init());
    EXPECT_TRUE(created.ok());
    shard = std::move(created).value();
    ShardServiceOptions o;
    o.rank = 0;
    o.num_workers = workers;
    o.reply_part_pairs = reply_part_pairs;
    o.reply_values = reply_values;
    service = std::make_unique<ShardService>(o, shard.get(), &link, nullptr, nullptr);
  }
  std::vector<float> Weights() const {
    auto w = shard->weights();
    return {w.begin(), w.end()};
  }
  int Worker(int rank) const { return link.WorkerId(rank); }

  RecordingLink link;
  std::unique_ptr<ShardServer> shard;
  std::unique_ptr<ShardService> service;
};

TEST(ShardServiceTest, BspRoundAnswersEveryWorkerWithTheAveragedWeights) {
  Fixture f(2);
  const std::vector<uint32_t> i0 = {1, 5, 9}, i1 = {5, 20};
  const std::vector<float> v0 = {1.0f, 2.0f, 3.0f}, v1 = {4.0f, 8.0f};
  f.service->OnData(Push(f.Worker(0), 0, 0, i0, v0));
  EXPECT_TRUE(f.link.sent.empty()) << "answered before the round completed";
  f.service->OnData(Push(f.Worker(1), 0, 0, i1, v1));
  // Oracle: a dense accumulator, w -= sum / 2 at every pushed index.
  std::vector<float> want = Init(), sum(kShardLen, 0.0f);
  for (size_t j = 0; j < i0.size(); ++j) sum[i0[j]] += v0[j];
  for (size_t j = 0; j < i1.size(); ++j) sum[i1[j]] += v1[j];
  for (uint32_t i : {1u, 5u, 9u, 20u}) want[i] -= sum[i] / 2.0f;
  EXPECT_EQ(f.Weights(), want);
  ASSERT_EQ(f.link.sent.size(), 2u);
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(f.link.sent[w].first, f.Worker(w));
    Message m = DecodeOrDie(std::move(f.link.sent[w].second));
    EXPECT_EQ(m.type(), pb::MSG_UPDATE);
    EXPECT_EQ(m.header.sender(), 1);
    EXPECT_EQ(m.header.recipient(), f.Worker(w));
    EXPECT_EQ(m.header.shard(), 0);
    EXPECT_EQ(m.header.round(), 0u);
    ASSERT_EQ(std::vector<uint32_t>(m.indices.begin(), m.indices.end()),
              (std::vector<uint32_t>{1, 5, 9, 20}));
    for (size_t j = 0; j < m.indices.size(); ++j) EXPECT_EQ(m.values[j], want[m.indices[j]]);
  }
  EXPECT_TRUE(f.link.errors.empty());
}

TEST(ShardServiceTest, Fp16PushIsUnpackedToTheValuesItEncodes) {
  // Values fp16 cannot hold exactly: the shard must apply exactly what the halves decode to.
  const std::vector<uint32_t> idx = {0, 3, 63};
  const std::vector<float> val = {0.1f, -3.14159f, 1000.7f};
  std::vector<uint16_t> halves(val.size());
  ASSERT_TRUE(PackFp16(val, halves).ok());
  std::vector<float> decoded(val.size());
  ASSERT_TRUE(UnpackFp16(halves, decoded).ok());
  ASSERT_NE(decoded, val);

  Fixture half(1), full(1);
  half.service->OnData(Push(half.Worker(0), 0, 0, idx, val, /*fp16=*/true));
  full.service->OnData(Push(full.Worker(0), 0, 0, idx, decoded));
  EXPECT_EQ(half.Weights(), full.Weights());
  std::vector<float> want = Init();
  for (size_t j = 0; j < idx.size(); ++j) want[idx[j]] -= decoded[j];
  EXPECT_EQ(half.Weights(), want);
}

// 16-bit replies: the shard stays fp32, and every UPDATE and DENSE carries each weight rounded to
// the reply precision (bf16: FloatToBf16 of the server's weight at that index; fp16: saturating at
// ±65504), whole or in parts, the same bytes for every worker (converted once per slice).
TEST(ShardServiceTest, Bf16RepliesCarryEachServerWeightRoundedToBf16) {
  for (ValueType type : {ValueType::kBf16, ValueType::kFp16}) {
    SCOPED_TRACE(ValueTypeName(type));
    auto packed = [&](float w) {
      if (type == ValueType::kBf16) return FloatToBf16(w);
      return std::fabs(w) > 65504.0f
                 ? static_cast<uint16_t>(FloatToHalf(std::copysign(65504.0f, w)))
                 : FloatToHalf(w);
    };
    Fixture f(2, /*reply_part_pairs=*/3, type);
    std::vector<float> want = Init();
    for (uint64_t round = 0; round < 3; ++round) {
      const std::vector<uint32_t> i0 = {1, 5, 9, 30, 40, 63}, i1 = {5, 20, 21, 40};
      const std::vector<float> v0 = {0.1f, -0.37f, 3.3f, 1e-3f, 0.7f, -2e5f},
                               v1 = {0.013f, 0.2f, -0.9f, 0.05f};
      f.service->OnData(Push(f.Worker(0), 0, round, i0, v0));
      f.service->OnData(Push(f.Worker(1), 0, round, i1, v1));
      std::vector<float> sum(kShardLen, 0.0f);
      for (size_t j = 0; j < i0.size(); ++j) sum[i0[j]] += v0[j];
      for (size_t j = 0; j < i1.size(); ++j) sum[i1[j]] += v1[j];
      for (uint32_t i : {1u, 5u, 9u, 20u, 21u, 30u, 40u, 63u}) want[i] -= sum[i] / 2.0f;
      ASSERT_EQ(f.Weights(), want) << "the shard itself stays fp32";
      // 8 changed indices in parts of 3: 3 parts per worker.
      ASSERT_EQ(f.link.sent.size(), 6u);
      std::vector<std::vector<uint16_t>> got(2);
      for (size_t k = 0; k < f.link.sent.size(); ++k) {
        const int w = f.link.WorkerRankOf(f.link.sent[k].first);
        Message m = DecodeOrDie(std::move(f.link.sent[k].second));
        ASSERT_EQ(m.type(), pb::MSG_UPDATE);
        EXPECT_TRUE(m.values.empty() &&
                    (type == ValueType::kBf16 ? m.values_fp16.empty() : m.values_bf16.empty()));
        const std::span<const uint16_t> v =
            type == ValueType::kBf16 ? m.values_bf16 : m.values_fp16;
        ASSERT_EQ(v.size(), m.indices.size());
        for (size_t j = 0; j < v.size(); ++j) {
          EXPECT_EQ(v[j], packed(want[m.indices[j]])) << "index " << m.indices[j];
          got[w].push_back(v[j]);
        }
      }
      EXPECT_EQ(got[0].size(), 8u);
      EXPECT_EQ(got[0], got[1]) << "every worker gets the same values";
      f.link.sent.clear();
    }
    // The dense pull: the whole shard, rounded the same way.
    f.service->OnData(Control(f.Worker(1), pb::MSG_PULL_DENSE, 0));
    ASSERT_EQ(f.link.sent.size(), 1u);
    Message dense = DecodeOrDie(std::move(f.link.sent[0].second));
    ASSERT_EQ(dense.type(), pb::MSG_DENSE);
    const std::span<const uint16_t> v =
        type == ValueType::kBf16 ? dense.values_bf16 : dense.values_fp16;
    ASSERT_EQ(v.size(), kShardLen);
    for (uint32_t i = 0; i < kShardLen; ++i) EXPECT_EQ(v[i], packed(want[i])) << "index " << i;
    EXPECT_GT(std::fabs(want[63]), 65504.0f) << "a weight beyond fp16's range (saturates)";
  }
}

TEST(ShardServiceTest, WrongShardIsRefusedAndChangesNothing) {
  Fixture f(1);
  f.service->OnData(Push(f.Worker(0), 1, 0, {2}, {5.0f}));
  EXPECT_EQ(f.Weights(), Init());
  EXPECT_TRUE(f.link.sent.empty());
  ASSERT_EQ(f.link.errors.size(), 1u);
  EXPECT_EQ(f.link.errors[0].peer, f.Worker(0));
  EXPECT_EQ(f.link.errors[0].code, pb::ERROR_WRONG_SHARD);
  EXPECT_EQ(f.link.errors[0].rejected, pb::MSG_PUSH);
  EXPECT_NE(f.link.errors[0].message.find("this is server 0, message is for shard 1"),
            std::string::npos);
  // The round is still open: the worker's correct push completes it.
  f.service->OnData(Push(f.Worker(0), 0, 0, {2}, {5.0f}));
  EXPECT_EQ(f.link.sent.size(), 1u);
  EXPECT_EQ(f.Weights()[2], Init()[2] - 5.0f);
}

TEST(ShardServiceTest, OnlyWorkersPushPullOrJoin) {
  Fixture f(1);
  const int other_server = 2, beyond_workers = f.Worker(1);
  for (int sender : {other_server, beyond_workers}) {
    f.service->OnData(Push(sender, 0, 0, {2}, {5.0f}));
    f.service->OnData(Control(sender, pb::MSG_PULL_DENSE, 0));
    f.service->OnData(Control(sender, pb::MSG_JOIN, 0));
  }
  EXPECT_EQ(f.Weights(), Init());
  EXPECT_TRUE(f.link.sent.empty());
  ASSERT_EQ(f.link.errors.size(), 6u);
  for (const SentError& e : f.link.errors) {
    EXPECT_EQ(e.code, pb::ERROR_UNEXPECTED_TYPE);
    EXPECT_TRUE(e.peer == other_server || e.peer == beyond_workers);
  }
  EXPECT_EQ(f.link.errors[0].message, "only workers push or pull");
  EXPECT_EQ(f.link.errors[2].message, "only workers join");
}

TEST(ShardServiceTest, TypesAServerDoesNotTakeAreRefusedByName) {
  Fixture f(1);
  f.service->OnData(Control(f.Worker(0), pb::MSG_JOIN_ACK, 7));
  ASSERT_EQ(f.link.errors.size(), 1u);
  EXPECT_EQ(f.link.errors[0].code, pb::ERROR_UNEXPECTED_TYPE);
  EXPECT_EQ(f.link.errors[0].rejected, pb::MSG_JOIN_ACK);
  EXPECT_EQ(f.link.errors[0].round, 7u);
  EXPECT_EQ(f.link.errors[0].message, "a server does not accept JOIN_ACK");
  EXPECT_EQ(f.Weights(), Init());
}

TEST(ShardServiceTest, PullDenseAnswersTheWholeShard) {
  Fixture f(1);
  f.service->OnData(Control(f.Worker(0), pb::MSG_PULL_DENSE, 0));
  ASSERT_EQ(f.link.sent.size(), 1u);
  Message m = DecodeOrDie(std::move(f.link.sent[0].second));
  EXPECT_EQ(m.type(), pb::MSG_DENSE);
  EXPECT_TRUE(m.dense());
  EXPECT_EQ(std::vector<float>(m.values.begin(), m.values.end()), Init());
}

TEST(ShardServiceTest, ARejoinedWorkersJoinIsAcknowledged) {
  Fixture f(2);
  f.service->OnWorkerDead(1);
  f.service->OnWorkerRejoined(1);
  f.service->OnData(Control(f.Worker(1), pb::MSG_JOIN, 0));
  ASSERT_EQ(f.link.sent.size(), 1u);
  EXPECT_EQ(f.link.sent[0].first, f.Worker(1));
  Message m = DecodeOrDie(std::move(f.link.sent[0].second));
  EXPECT_EQ(m.type(), pb::MSG_JOIN_ACK);
  EXPECT_EQ(m.header.sender(), 1);
  EXPECT_EQ(m.header.recipient(), f.Worker(1));
  EXPECT_EQ(m.header.shard(), 0);
}

TEST(ShardServiceTest, ALargeUpdateGoesOutInPartsThatConcatenateToTheWhole) {
  Fixture f(1, /*reply_part_pairs=*/10);
  std::vector<uint32_t> idx(35);
  std::iota(idx.begin(), idx.end(), 3u);
  std::vector<float> val(idx.size());
  for (size_t j = 0; j < val.size(); ++j) val[j] = 0.125f * static_cast<float>(j);
  f.service->OnData(Push(f.Worker(0), 0, 0, idx, val));
  ASSERT_EQ(f.link.sent.size(), 4u);  // ceil(35 / 10)
  std::vector<uint32_t> got_idx;
  std::vector<float> got_val;
  for (uint32_t p = 0; p < 4; ++p) {
    Message m = DecodeOrDie(std::move(f.link.sent[p].second));
    EXPECT_EQ(m.header.part(), p);
    EXPECT_EQ(m.header.parts(), 4u);
    EXPECT_FALSE(m.indices.empty()) << "no empty part";
    got_idx.insert(got_idx.end(), m.indices.begin(), m.indices.end());
    got_val.insert(got_val.end(), m.values.begin(), m.values.end());
  }
  EXPECT_EQ(got_idx, idx);
  const std::vector<float> w = f.Weights();
  for (size_t j = 0; j < idx.size(); ++j) {
    EXPECT_EQ(w[idx[j]], Init()[idx[j]] - val[j]);
    EXPECT_EQ(got_val[j], w[idx[j]]);
  }
}

// Every reply type a worker gets (INIT_ACK, UPDATE whole and in parts, DENSE, JOIN_ACK, ERROR)
// goes out through the send that never waits (ServerLink::Reply, or SendError): a peer that sends
// and never reads cannot stall the server (RecordingLink::Send fails the test otherwise).
TEST(ShardServiceTest, EveryReplyGoesOutWithoutWaitingOnThePeer) {
  ShardServerOptions so;
  so.num_workers = 2;
  so.await_initial_weights = true;
  auto created = ShardServer::Create(so, std::vector<float>(kShardLen, 0.0f));
  ASSERT_TRUE(created.ok());
  std::unique_ptr<ShardServer> shard = std::move(created).value();
  RecordingLink link;
  ShardServiceOptions o;
  o.rank = 0;
  o.num_workers = 2;
  o.reply_part_pairs = 2;
  ShardService service(o, shard.get(), &link, nullptr, nullptr);
  auto types_sent = [&] {
    std::multiset<pb::MsgType> types;
    for (auto& [peer, frames] : link.sent) types.insert(DecodeOrDie(std::move(frames)).type());
    link.sent.clear();
    return types;
  };
  // INIT from worker 0: INIT_ACK.
  const std::vector<float> init = Init();
  DataPayload p;
  p.dense = true;
  p.values = std::as_bytes(std::span<const float>(init));
  auto frames = EncodeData(MakeDataHeader(pb::MSG_INIT, link.WorkerId(0), 1, 0, 0), p);
  ASSERT_TRUE(frames.ok());
  service.OnData(DecodeOrDie(std::move(frames).value()));
  EXPECT_EQ(types_sent(), (std::multiset<pb::MsgType>{pb::MSG_INIT_ACK}));
  // A BSP round: each worker's UPDATE in parts (5 pairs, 2 a part).
  service.OnData(Push(link.WorkerId(0), 0, 0, {1, 2, 3}, {1.0f, 1.0f, 1.0f}));
  service.OnData(Push(link.WorkerId(1), 0, 0, {3, 4, 5}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(types_sent(),
            (std::multiset<pb::MsgType>{pb::MSG_UPDATE, pb::MSG_UPDATE, pb::MSG_UPDATE,
                                        pb::MSG_UPDATE, pb::MSG_UPDATE, pb::MSG_UPDATE}));
  service.OnData(Control(link.WorkerId(1), pb::MSG_PULL_DENSE, 0));
  EXPECT_EQ(types_sent(), (std::multiset<pb::MsgType>{pb::MSG_DENSE}));
  service.OnWorkerDead(1);
  service.OnWorkerRejoined(1);
  service.OnData(Control(link.WorkerId(1), pb::MSG_JOIN, 3));
  EXPECT_EQ(types_sent(), (std::multiset<pb::MsgType>{pb::MSG_JOIN_ACK}));
  service.OnData(Push(link.WorkerId(0), 0, 99, {1}, {1.0f}));  // a round far ahead: an ERROR
  EXPECT_FALSE(link.errors.empty());
  EXPECT_TRUE(link.streamed.empty());
}

// Counts the log lines that contain `needle`.
// Counts every log line while installed (no line's text is read: the messages are for people).
class CountingSink : public google::LogSink {
 public:
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*, const char*,
            size_t) override {
    ++count;
  }
  int count = 0;
};

// A peer's ERRORs (an insider, or errors reflected at the server by forged requests) are logged
// within the rejection limit, not one line each.
TEST(ShardServiceTest, AFloodOfErrorsFromAPeerIsLoggedInBoundedLines) {
  Fixture f(1);
  CountingSink sink;  // only the flood below logs while it is installed
  google::AddLogSink(&sink);
  for (int n = 0; n < 3000; ++n) {
    pb::Header h =
        MakeErrorHeader(f.Worker(0), 1, 0, pb::ERROR_UNKNOWN_ROUND, "forged", pb::MSG_UPDATE);
    auto frames = EncodeControl(h);
    ASSERT_TRUE(frames.ok());
    f.service->OnData(DecodeOrDie(std::move(frames).value()));
  }
  google::RemoveLogSink(&sink);
  EXPECT_GE(sink.count, 1);
  EXPECT_LE(sink.count, 40) << "one line per ERROR";
  EXPECT_EQ(f.Weights(), Init());
  EXPECT_TRUE(f.link.sent.empty() && f.link.errors.empty()) << "an ERROR is never answered";
}

}  // namespace
}  // namespace sieve
