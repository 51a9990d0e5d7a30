// Replication between two ShardServices without sockets: a primary of shard 0 (server 0) and its
// mirror on server 1, each behind a recording ServerLink. The test carries REPLICATE and
// REPLICATE_ACK between them through the real codec, so it decides when (and whether, twice or out
// of order) each event arrives. The references: the primary's own weights (a mirror must hold the
// same bytes), a shard without replication fed the same pushes, and a dense replay (the oracle)
// of what every worker saw.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"
#include "server/checkpoint/checkpoint.h"
#include "server/checkpoint/checkpointer.h"
#include "server/service/shard_service.h"

namespace sieve {
namespace {

constexpr int kServers = 2;
constexpr uint32_t kShardLen = 48;

// A server's node as the service sees it: server `rank` (id 1 + rank) of a 2-server job.
class Link : public ServerLink {
 public:
  explicit Link(int rank) : rank_(rank) {}
  int id() const override { return 1 + rank_; }
  int WorkerId(int rank) const override { return 1 + kServers + rank; }
  int WorkerRankOf(int id) const override { return id - 1 - kServers; }
  int ShardPrimary(int shard) const override {
    auto it = primary.find(shard);
    return it == primary.end() ? shard : it->second;
  }
  bool WorkerDead(int rank) const override { return dead.count(rank) > 0; }
  bool ServerDead(int rank) const override { return dead_servers.count(rank) > 0; }
  // The scheduler's failover as this node sees it: server `from` is dead and `shard` is served
  // by server `to` (call the service's OnServerDead / OnTable after it).
  void FailOver(int shard, int from, int to) {
    dead_servers.insert(from);
    primary[shard] = to;
  }
  // Both sends land in `sent`, in order. Only the replication stream (REPLICATE) may go the way
  // that waits for queue space; every reply (REPLICATE_ACK, the workers' UPDATEs, DENSE, acks)
  // must go the way that never waits, or a peer that does not read could stall the server.
  Status Reply(int peer, Frames frames) override {
    sent.push_back({peer, std::move(frames)});
    return Status::Ok();
  }
  Status Send(int peer, Frames frames) override {
    pb::Header h;
    if (!frames.empty() && h.ParseFromArray(frames[0].data(), static_cast<int>(frames[0].size()))) {
      EXPECT_EQ(h.type(), pb::MSG_REPLICATE) << "a reply sent the way that waits on the peer";
    }
    sent.push_back({peer, std::move(frames)});
    return Status::Ok();
  }
  Status SendError(int peer, pb::ErrorCode code, const std::string& message, pb::MsgType,
                   uint64_t round, int shard) override {
    errors.push_back({peer, code, message, round, shard});
    return Status::Ok();
  }

  struct Error {
    int peer;
    pb::ErrorCode code;
    std::string message;
    uint64_t round;
    int shard;
  };
  std::map<int, int> primary;  // shard -> server rank (absent: the shard's own)
  std::set<int> dead;          // dead worker ranks
  std::set<int> dead_servers;  // dead server ranks
  std::vector<std::pair<int, Frames>> sent;
  std::vector<Error> errors;

 private:
  const int rank_;
};

Message Decode(Frames frames) {
  const std::vector<uint64_t> lengths(kServers, kShardLen);
  Message m;
  Status s = sieve::Decode(std::move(frames), {lengths, true}, &m);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

// A sparse message sent as `frames`, its header changed by `edit`, encoded and decoded again.
Message Edited(Frames frames, const std::function<void(pb::Header*)>& edit) {
  auto m = std::make_shared<Message>(Decode(std::move(frames)));
  pb::Header h = m->header;
  edit(&h);
  DataPayload pl;
  pl.indices = m->indices;
  pl.values = std::as_bytes(m->values);
  pl.keepalive = m;  // the new frames borrow the old message's arrays
  auto f = EncodeData(h, pl);
  EXPECT_TRUE(f.ok());
  return Decode(std::move(f).value());
}

Message Control(int worker, pb::MsgType type, uint64_t round) {
  auto frames = EncodeControl(MakeDataHeader(type, 1 + kServers + worker, 1, 0, round));
  EXPECT_TRUE(frames.ok());
  return Decode(std::move(frames).value());
}

Message Push(int worker, uint64_t round, const std::vector<uint32_t>& idx,
             const std::vector<float>& val) {
  pb::Header h = MakeDataHeader(pb::MSG_PUSH, 1 + kServers + worker, 1, 0, round);
  auto a = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<float>>>(idx, val);
  DataPayload p;
  p.indices = a->first;
  p.values = std::as_bytes(std::span<const float>(a->second));
  p.keepalive = a;
  auto frames = EncodeData(h, p);
  EXPECT_TRUE(frames.ok());
  return Decode(std::move(frames).value());
}

std::vector<float> Init() {
  std::vector<float> w(kShardLen);
  for (uint32_t i = 0; i < kShardLen; ++i) w[i] = 1.0f - 0.03f * static_cast<float>(i);
  return w;
}

// A random sparse push: ascending distinct indices, values in [-1, 1).
std::pair<std::vector<uint32_t>, std::vector<float>> RandomPush(std::mt19937* rng) {
  std::vector<uint32_t> idx;
  for (uint32_t i = 0; i < kShardLen; ++i)
    if ((*rng)() % 4 == 0) idx.push_back(i);
  std::uniform_real_distribution<float> v(-1.0f, 1.0f);
  std::vector<float> val(idx.size());
  for (float& x : val) x = v(*rng);
  return {idx, val};
}

struct Replica {
  Replica(const ShardServerOptions& so, int server_rank, bool mirror, std::vector<int> backups,
          bool replicate_rounds = false,
          const std::function<void(ShardServiceOptions*)>& tweak = nullptr,
          int shard0_primary = -1,  // shard 0's primary in this server's table (-1: server 0)
          const std::string& checkpoint_dir = "")  // checkpoints of shard 0 every round there
      : link(server_rank) {
    if (shard0_primary >= 0) link.primary[0] = shard0_primary;
    auto created = ShardServer::Create(so, Init());
    EXPECT_TRUE(created.ok());
    shard = std::move(created).value();
    ShardServiceOptions o;
    o.rank = 0;
    o.server_rank = server_rank;
    o.num_workers = so.num_workers;
    o.bsp = so.consistency == Consistency::kBsp;
    o.mirror = mirror;
    o.backups = std::move(backups);
    o.replicate_resend = std::chrono::milliseconds(0);  // every OnTick resends
    o.replicate_rounds = replicate_rounds;
    o.rebuildable = true;  // as the daemon sets it
    if (tweak) tweak(&o);
    ShardCheckpointer* ckpt = nullptr;
    if (!checkpoint_dir.empty()) {
      CheckpointerOptions co;
      co.dir = checkpoint_dir;
      co.every_rounds = 1;
      co.restore = "never";
      EXPECT_TRUE(checkpointer.Init(co, CheckpointConfigFor(), 0, shard.get()).ok());
      ckpt = &checkpointer;
    }
    service = std::make_unique<ShardService>(o, shard.get(), &link, nullptr, ckpt);
  }
  // The configuration the checkpoints of these tests are written for.
  static CheckpointConfig CheckpointConfigFor() {
    CheckpointConfig c;
    c.model = "test";
    c.num_params = kServers * kShardLen;
    c.hi = kShardLen;
    c.consistency = "bsp";
    return c;
  }
  std::vector<float> Weights() const { return {shard->weights().begin(), shard->weights().end()}; }
  // The primary died: the table this server reads names server 1 shard 0's primary.
  void FailOverToServer1() {
    link.FailOver(0, 0, 1);
    service->OnTable();
  }
  // Takes the messages sent to `peer` so far (the others stay).
  std::vector<Frames> Take(int peer) {
    std::vector<Frames> out;
    std::vector<std::pair<int, Frames>> keep;
    for (auto& [p, f] : link.sent) {
      if (p == peer) {
        out.push_back(std::move(f));
      } else {
        keep.push_back({p, std::move(f)});
      }
    }
    link.sent = std::move(keep);
    return out;
  }
  Link link;
  ShardCheckpointer checkpointer;
  std::unique_ptr<ShardServer> shard;
  std::unique_ptr<ShardService> service;
};

constexpr int kPrimaryId = 1, kMirrorId = 2;

// `a` and `b` applied the same number of pushes, of the same sum.
void ExpectSamePushTotals(const Replica& a, const Replica& b) {
  EXPECT_EQ(a.shard->stats().pushes_applied, b.shard->stats().pushes_applied);
  EXPECT_EQ(a.shard->stats().pushed_sum, b.shard->stats().pushed_sum);
}

// Delivers `resend`, a push `r` has applied already, and checks that it is not applied again.
void ExpectResendNotApplied(Replica* r, Message resend, const std::string& why) {
  const uint64_t applied = r->shard->stats().pushes_applied;
  r->service->OnData(std::move(resend));
  EXPECT_EQ(r->shard->stats().pushes_applied, applied) << why;
}

// Delivers everything server `a` sent to server `b` and back, until neither sends more; returns
// how many messages went from a to b.
size_t CarryBetween(Replica* a, Replica* b) {
  size_t carried = 0;
  for (;;) {
    auto there = a->Take(b->link.id());
    for (Frames& f : there) b->service->OnData(Decode(std::move(f)));
    auto back = b->Take(a->link.id());
    for (Frames& f : back) a->service->OnData(Decode(std::move(f)));
    carried += there.size();
    if (there.empty() && back.empty()) return carried;
  }
}

// A primary of shard 0 on server 0 with its mirror on server 1, and a shard without replication
// (`plain`) fed the same pushes.
struct Pair {
  // replicate_rounds: the primary replicates BSP rounds by their result instead of their pushes.
  explicit Pair(ShardServerOptions so, bool replicate_rounds = false)
      : primary(so, 0, false, {1}, replicate_rounds),
        mirror(so, 1, true, {}),
        plain(so, 0, false, {}) {}
  // Delivers every REPLICATE the primary sent and every ack the mirror sent back; returns how many
  // REPLICATEs went.
  size_t Carry() { return CarryBetween(&primary, &mirror); }
  // A push to the primary and to the plain shard.
  void PushBoth(int worker, uint64_t round, const std::vector<uint32_t>& idx,
                const std::vector<float>& val) {
    primary.service->OnData(Push(worker, round, idx, val));
    plain.service->OnData(Push(worker, round, idx, val));
  }
  // Worker 0's push of 1.0 at `index` in round 0 to the primary; its one REPLICATE goes to the
  // mirror edited by `edit`.
  void DeliverEditedReplicate(uint32_t index, const std::function<void(pb::Header*)>& edit) {
    primary.service->OnData(Push(0, 0, {index}, {1.0f}));
    auto events = primary.Take(kMirrorId);
    ASSERT_EQ(events.size(), 1u);
    mirror.service->OnData(Edited(std::move(events[0]), edit));
  }
  // The mirror has refused `errors` messages, the last as not a replica's, and applied none.
  void ExpectMirrorRefusedAReplicate(size_t errors) {
    ASSERT_EQ(mirror.link.errors.size(), errors);
    EXPECT_EQ(mirror.link.errors.back().code, pb::ERROR_NOT_REPLICA);
    EXPECT_EQ(mirror.Weights(), Init());
  }
  Replica primary, mirror, plain;
};

ShardServerOptions Bsp(uint32_t workers) {
  ShardServerOptions so;
  so.num_workers = workers;
  return so;
}

int WorkerId(int rank) { return 1 + kServers + rank; }

// The UPDATEs sent to worker `rank` so far, decoded.
std::vector<Message> UpdatesTo(Replica* r, int rank) {
  std::vector<Message> out;
  for (Frames& f : r->Take(WorkerId(rank))) {
    Message m = Decode(std::move(f));
    if (m.type() == pb::MSG_UPDATE) out.push_back(std::move(m));
  }
  return out;
}

class ShardReplicationModes : public ::testing::TestWithParam<bool> {};

// Both ways of replicating BSP: every push replayed, or every round's result written.
TEST_P(ShardReplicationModes, MirrorHoldsThePrimarysBytesThroughBspRounds) {
  const bool by_result = GetParam();
  Pair p(Bsp(3), by_result);
  std::mt19937 rng(7);
  for (uint64_t round = 0; round < 20; ++round) {
    for (int w : {2, 0, 1}) {
      auto [idx, val] = RandomPush(&rng);
      p.PushBoth(w, round, idx, val);
    }
    p.Carry();
    ASSERT_EQ(p.mirror.Weights(), p.primary.Weights()) << "round " << round;
  }
  // Replication changes nothing in the math: the plain shard, fed the same pushes, agrees.
  EXPECT_EQ(p.primary.Weights(), p.plain.Weights());
  EXPECT_EQ(p.mirror.shard->round(), 20u);
  EXPECT_EQ(p.mirror.service->replication().replayed, by_result ? 20u : 60u);
  EXPECT_EQ(p.primary.service->replication().events, by_result ? 20u : 60u);
  // The workers' UPDATEs came from the mirror, the same bytes the plain shard sends.
  for (int w = 0; w < 3; ++w) {
    auto from_mirror = UpdatesTo(&p.mirror, w), from_plain = UpdatesTo(&p.plain, w);
    ASSERT_EQ(from_mirror.size(), 20u);
    ASSERT_EQ(from_plain.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(std::vector<float>(from_mirror[i].values.begin(), from_mirror[i].values.end()),
                std::vector<float>(from_plain[i].values.begin(), from_plain[i].values.end()));
    }
  }
  EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty());
}

// Every worker dies (worker 0 after its push of round 3, which completes round 3 with it) and
// rejoins a few rounds ahead: the primary passes the rounds nobody will push, and the copy passes
// the same ones (replicated by pushes: replaying the JOIN; by results: told with REPLICA_IDLE),
// then both follow the rounds the joiners push. Reference: a shard without replication fed the
// same events.
TEST_P(ShardReplicationModes, RoundsNobodyWillPushPassOnTheCopyToo) {
  const bool by_result = GetParam();
  Pair p(Bsp(3), by_result);
  std::mt19937 rng(11);
  auto push = [&](int w, uint64_t round) {
    auto [idx, val] = RandomPush(&rng);
    p.PushBoth(w, round, idx, val);
  };
  auto event = [&](const std::function<void(ShardService*)>& e) {
    e(p.primary.service.get());
    e(p.plain.service.get());
  };
  for (uint64_t round = 0; round < 3; ++round) {
    for (int w : {0, 1, 2}) push(w, round);
  }
  push(0, 3);
  for (int w : {1, 2, 0}) event([w](ShardService* s) { s->OnWorkerDead(w); });
  for (int w : {0, 1, 2}) event([w](ShardService* s) { s->OnWorkerRejoined(w); });
  p.Carry();
  EXPECT_EQ(p.mirror.shard->round(), 4u);
  EXPECT_EQ(p.mirror.Weights(), p.plain.Weights());
  for (int w = 0; w < 3; ++w) UpdatesTo(&p.mirror, w);  // rounds 0 to 3's, answered
  for (auto [w, join] : {std::pair{1, 7}, {2, 7}, {0, 8}}) {
    event([w = w, join = join](ShardService* s) {
      s->OnData(Control(w, pb::MSG_JOIN, static_cast<uint64_t>(join)));
    });
  }
  p.Carry();
  for (Replica* r : {&p.primary, &p.mirror, &p.plain}) {
    EXPECT_EQ(r->shard->round(), 7u);
    EXPECT_EQ(r->shard->stats().idle_rounds, 3u);  // rounds 4, 5 and 6
    EXPECT_TRUE(r->shard->counts(1));
    EXPECT_TRUE(r->shard->counts(2));
    EXPECT_FALSE(r->shard->counts(0));
  }
  EXPECT_TRUE(UpdatesTo(&p.mirror, 1).empty());  // no UPDATE for a round that passed empty
  for (uint64_t round = 7; round < 10; ++round) {
    for (int w : {2, 1, 0}) {
      if (round > 7 || w != 0) push(w, round);
    }
    p.Carry();
    ASSERT_EQ(p.mirror.Weights(), p.plain.Weights()) << "round " << round;
    ASSERT_EQ(p.primary.Weights(), p.plain.Weights()) << "round " << round;
  }
  EXPECT_EQ(p.mirror.shard->round(), 10u);
  // The joiners' UPDATEs come from the copy (the replier): the first one the whole shard.
  auto u0 = UpdatesTo(&p.mirror, 0), u1 = UpdatesTo(&p.mirror, 1);
  ASSERT_EQ(u0.size(), 2u);
  ASSERT_EQ(u1.size(), 3u);
  EXPECT_TRUE(u0[0].dense());
  EXPECT_EQ(u0[0].header.round(), 8u);
  EXPECT_TRUE(u1[0].dense());
  EXPECT_EQ(u1[0].header.round(), 7u);
  EXPECT_FALSE(u1[1].dense());
}

// A copy replicated by results refuses REPLICA_IDLE for rounds its own state does not have idle
// (here a round event edited into one: live workers, nobody waiting to join).
TEST(ShardReplicationTest, AnIdleRoundsEventTheCopyCannotConfirmIsRefused) {
  Pair p(Bsp(1), true);
  ASSERT_NO_FATAL_FAILURE(p.DeliverEditedReplicate(2, [](pb::Header* h) {
    h->set_event(pb::REPLICA_IDLE);
    h->set_round(5);
  }));
  ASSERT_NO_FATAL_FAILURE(p.ExpectMirrorRefusedAReplicate(1));
  EXPECT_EQ(p.mirror.shard->round(), 0u);
  EXPECT_TRUE(p.mirror.shard->counts(0));
}

// The replies of a replicated round come from the backup (the event's replier), once it applied
// the round; the primary sends none of them. A reply to an event that is not replicated (a
// PULL_DENSE) comes from the primary, once the backup acknowledged what it reflects.
TEST(ShardReplicationTest, TheBackupAnswersTheRoundAndThePrimaryWaitsForItsAck) {
  Pair p(Bsp(2));
  p.primary.service->OnData(Push(0, 0, {1, 2}, {0.5f, -0.5f}));
  p.primary.service->OnData(Push(1, 0, {2, 3}, {1.0f, 2.0f}));
  EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty()) << "an UPDATE left before the backup had the round";
  p.primary.service->OnData(Control(1, pb::MSG_PULL_DENSE, 0));
  EXPECT_TRUE(p.primary.Take(WorkerId(1)).empty())
      << "a DENSE left before the backup had the round";
  // The events reach the mirror, which answers the workers; its acks are lost.
  for (Frames& f : p.primary.Take(kMirrorId)) p.mirror.service->OnData(Decode(std::move(f)));
  p.mirror.Take(kPrimaryId);
  auto u0 = UpdatesTo(&p.mirror, 0), u1 = UpdatesTo(&p.mirror, 1);
  ASSERT_EQ(u0.size(), 1u);
  ASSERT_EQ(u1.size(), 1u);
  EXPECT_EQ(std::vector<uint32_t>(u0[0].indices.begin(), u0[0].indices.end()),
            (std::vector<uint32_t>{1, 2, 3}));
  std::vector<float> want = Init();
  want[1] -= 0.5f / 2;
  want[2] -= (-0.5f + 1.0f) / 2;
  want[3] -= 2.0f / 2;
  EXPECT_EQ(std::vector<float>(u0[0].values.begin(), u0[0].values.end()),
            (std::vector<float>{want[1], want[2], want[3]}));
  EXPECT_TRUE(p.primary.Take(WorkerId(1)).empty());
  // The primary resends (OnTick); the mirror applies nothing twice, answers no worker again and
  // acknowledges. The primary then sends the DENSE, and no UPDATE.
  p.primary.service->OnTick();
  EXPECT_EQ(p.Carry(), 2u);
  EXPECT_EQ(p.mirror.service->replication().replayed, 2u);
  EXPECT_TRUE(UpdatesTo(&p.mirror, 0).empty());
  EXPECT_EQ(p.mirror.Weights(), p.primary.Weights());
  EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty());
  auto dense = p.primary.Take(WorkerId(1));
  ASSERT_EQ(dense.size(), 1u);
  Message d = Decode(std::move(dense[0]));
  EXPECT_EQ(d.type(), pb::MSG_DENSE);
  EXPECT_EQ(std::vector<float>(d.values.begin(), d.values.end()), want);
}

TEST(ShardReplicationTest, AReplicatedEventAppliesOnceAndAGapIsRefused) {
  Pair p(Bsp(1));
  p.primary.service->OnData(Push(0, 0, {4}, {1.0f}));
  p.primary.service->OnData(Push(0, 1, {5}, {1.0f}));  // held: round 0's UPDATE has not left
  auto events = p.primary.Take(kMirrorId);
  // Round 0's reply was held, so worker 0 cannot have pushed round 1 yet: the second push is a
  // refusal (unknown round) on both copies alike, still event 2.
  ASSERT_EQ(events.size(), 2u);
  std::vector<Frames> copies;
  for (const Frames& f : events) {
    Frames c;
    for (const auto& part : f) c.emplace_back(part.data(), part.size());
    copies.push_back(std::move(c));
  }
  // Event 2 before event 1: refused, nothing changes.
  const std::vector<float> before = p.mirror.Weights();
  p.mirror.service->OnData(Decode(std::move(events[1])));
  ASSERT_EQ(p.mirror.link.errors.size(), 1u);
  EXPECT_EQ(p.mirror.link.errors[0].code, pb::ERROR_NOT_REPLICA);
  EXPECT_EQ(p.mirror.Weights(), before);
  // Event 1 twice: applied once.
  p.mirror.service->OnData(Decode(std::move(events[0])));
  const std::vector<float> once = p.mirror.Weights();
  p.mirror.service->OnData(Decode(std::move(copies[0])));
  EXPECT_EQ(p.mirror.Weights(), once);
  EXPECT_EQ(p.mirror.service->replication().replayed, 1u);
  EXPECT_EQ(p.mirror.shard->stats().pushes_applied, 1u);
  p.mirror.service->OnData(Decode(std::move(copies[1])));
  EXPECT_EQ(p.mirror.service->replication().replayed, 2u);
}

TEST(ShardReplicationTest, OnlyTheShardsPrimaryReplicatesAndOnlyThePrimaryServesWorkers) {
  Pair p(Bsp(1));
  // A mirror refuses workers.
  p.mirror.service->OnData(Push(0, 0, {1}, {1.0f}));
  ASSERT_EQ(p.mirror.link.errors.size(), 1u);
  EXPECT_EQ(p.mirror.link.errors[0].code, pb::ERROR_NOT_PRIMARY);
  EXPECT_EQ(p.mirror.link.errors[0].shard, 0);
  // A REPLICATE from a server that is not the shard's primary in the mirror's table is refused.
  // A worker's node claims to replicate it.
  ASSERT_NO_FATAL_FAILURE(p.DeliverEditedReplicate(1, [](pb::Header* h) { h->set_sender(3); }));
  ASSERT_NO_FATAL_FAILURE(p.ExpectMirrorRefusedAReplicate(2));
}

// A copy whose primary died while the node table names a third server the shard's primary
// retires: it neither replays (a REPLICATE is refused) nor serves (a worker is refused), and a
// later table leaves it retired.
TEST(ShardReplicationTest, ACopyWhoseShardFailedOverElsewhereRetires) {
  Pair p(Bsp(1));
  EXPECT_EQ(p.primary.service->role(), ShardService::Role::kPrimary);
  EXPECT_EQ(p.mirror.service->role(), ShardService::Role::kMirror);
  p.mirror.link.FailOver(0, 0, 2);
  p.mirror.service->OnServerDead(0);
  EXPECT_EQ(p.mirror.service->role(), ShardService::Role::kRetired);
  EXPECT_FALSE(p.mirror.service->primary());
  EXPECT_FALSE(p.mirror.service->mirror());
  ASSERT_NO_FATAL_FAILURE(p.DeliverEditedReplicate(1, [](pb::Header*) {}));
  ASSERT_NO_FATAL_FAILURE(p.ExpectMirrorRefusedAReplicate(1));
  p.mirror.service->OnData(Push(0, 0, {1}, {1.0f}));
  ASSERT_EQ(p.mirror.link.errors.size(), 2u);
  EXPECT_EQ(p.mirror.link.errors.back().code, pb::ERROR_NOT_PRIMARY);
  p.mirror.service->OnTable();
  EXPECT_EQ(p.mirror.service->role(), ShardService::Role::kRetired);
  EXPECT_EQ(p.mirror.Weights(), Init());
}

TEST(ShardReplicationTest, ABackupThatDiesReleasesTheHeldReplies) {
  Pair p(Bsp(1));
  p.primary.service->OnData(Push(0, 0, {7}, {2.0f}));
  EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty());
  p.primary.service->OnServerDead(1);
  auto u = UpdatesTo(&p.primary, 0);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].values[0], Init()[7] - 2.0f);
  EXPECT_TRUE(p.primary.service->backups().empty());
  // Without backups, replies leave at once and nothing is replicated.
  p.primary.service->OnData(Push(0, 1, {7}, {1.0f}));
  EXPECT_EQ(UpdatesTo(&p.primary, 0).size(), 1u);
  EXPECT_EQ(p.primary.service->replication().events, 1u);
}

// Failover in the middle of a round: the primary completed round 1 and replicated it, worker 0
// got its UPDATE (and pushed round 2) but worker 1's was lost. The promoted mirror answers worker
// 1's resend of round 1 with the same UPDATE the primary sent worker 0, and round 2 completes as
// the plain shard's does.
TEST_P(ShardReplicationModes, APromotedMirrorGoesOnFromTheRoundInFlight) {
  Pair p(Bsp(2), GetParam());
  std::mt19937 rng(11);
  std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> pushes;
  for (int i = 0; i < 6; ++i) pushes.push_back(RandomPush(&rng));
  for (uint64_t round = 0; round < 2; ++round) {
    for (int w = 0; w < 2; ++w) {
      p.PushBoth(w, round, pushes[2 * round + w].first, pushes[2 * round + w].second);
    }
    p.Carry();
  }
  // The mirror (the rounds' replier) answered both workers; the primary none.
  EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty());
  auto sent0 = UpdatesTo(&p.mirror, 0);
  ASSERT_EQ(sent0.size(), 2u);
  ASSERT_EQ(UpdatesTo(&p.mirror, 1).size(), 2u);
  const Message& round1 = sent0[1];
  // The primary dies; the table names server 1 shard 0's primary.
  p.mirror.FailOverToServer1();
  EXPECT_TRUE(p.mirror.service->primary());
  EXPECT_TRUE(p.mirror.service->replication().promoted);
  // Worker 1 resends round 1: the same UPDATE, bitwise.
  p.mirror.service->OnData(Push(1, 1, pushes[3].first, pushes[3].second));
  auto resent = UpdatesTo(&p.mirror, 1);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].header.round(), 1u);
  ASSERT_EQ(resent[0].values.size(), round1.values.size());
  EXPECT_EQ(0,
            std::memcmp(resent[0].values.data(), round1.values.data(), round1.values.size_bytes()));
  EXPECT_EQ(p.mirror.shard->stats().duplicates, 1u) << "the resend was not answered as one";
  // Round 2 on the promoted copy and on the plain shard.
  for (int w = 0; w < 2; ++w) {
    p.mirror.service->OnData(Push(w, 2, pushes[4 + w].first, pushes[4 + w].second));
    p.plain.service->OnData(Push(w, 2, pushes[4 + w].first, pushes[4 + w].second));
  }
  EXPECT_EQ(p.mirror.Weights(), p.plain.Weights());
  EXPECT_EQ(UpdatesTo(&p.mirror, 0).size(), 1u) << "a promoted shard without backups holds nothing";
}

// The scheduler declared worker 1 dead, the primary died before it replicated that death: the
// promoted mirror applies it itself, so its round completes without worker 1.
TEST(ShardReplicationTest, PromotionAppliesTheDeathsThePrimaryDidNotReplicate) {
  Pair p(Bsp(2));
  p.primary.service->OnData(Push(0, 0, {3}, {1.0f}));
  p.Carry();
  p.mirror.service->OnWorkerDead(1);  // a mirror follows its primary only
  EXPECT_TRUE(p.mirror.shard->counts(1));
  p.mirror.link.dead.insert(1);
  p.mirror.FailOverToServer1();
  EXPECT_FALSE(p.mirror.shard->counts(1));
  EXPECT_EQ(p.mirror.shard->round(), 1u) << "round 0 waited only for worker 1";
  auto u = UpdatesTo(&p.mirror, 0);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].values[0], Init()[3] - 1.0f);
}

// ASP: the mirror replays every push with the same clocks, so after a failover a push the dead
// primary had applied (and replicated) is a duplicate: nothing pushed is applied twice or lost.
TEST(ShardReplicationTest, AspMirrorKeepsClocksSoAResendIsNotAppliedTwice) {
  ShardServerOptions so;
  so.num_workers = 2;
  so.consistency = Consistency::kAsp;
  Pair p(so);
  std::mt19937 rng(5);
  double pushed = 0;
  std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> last(2);
  for (uint64_t clock = 0; clock < 5; ++clock) {
    for (int w = 0; w < 2; ++w) {
      last[w] = RandomPush(&rng);
      for (float v : last[w].second) pushed += v;
      p.PushBoth(w, clock, last[w].first, last[w].second);
      p.Carry();
    }
  }
  EXPECT_EQ(p.mirror.Weights(), p.primary.Weights());
  p.mirror.FailOverToServer1();
  // Worker 1's last push again (its reply was lost with the primary).
  p.mirror.service->OnData(Push(1, 4, last[1].first, last[1].second));
  EXPECT_EQ(p.mirror.shard->stats().pushes_applied, 10u);
  EXPECT_NEAR(p.mirror.shard->stats().pushed_sum, pushed, 1e-9);
  EXPECT_EQ(p.mirror.Weights(), p.plain.Weights());
}

// ordered_rounds: the round's result is the same bits whatever order the pushes arrive in, and
// it is the rank-order sum (the oracle: w -= (v0 + v1 + v2) / 3 added in rank order, in fp32).
TEST(ShardReplicationTest, OrderedRoundsDoNotDependOnArrivalOrder) {
  ShardServerOptions so = Bsp(3);
  so.ordered_rounds = true;
  std::mt19937 rng(3);
  std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> pushes;
  for (int w = 0; w < 3; ++w) pushes.push_back(RandomPush(&rng));
  std::vector<std::vector<float>> results;
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}}) {
    Replica r(so, 0, false, {});
    for (int w : order) r.service->OnData(Push(w, 0, pushes[w].first, pushes[w].second));
    results.push_back(r.Weights());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  std::vector<float> want = Init(), sum(kShardLen, 0.0f);
  std::vector<bool> touched(kShardLen, false);
  for (int w = 0; w < 3; ++w) {
    for (size_t j = 0; j < pushes[w].first.size(); ++j) {
      sum[pushes[w].first[j]] += pushes[w].second[j];
      touched[pushes[w].first[j]] = true;
    }
  }
  for (uint32_t i = 0; i < kShardLen; ++i)
    if (touched[i]) want[i] -= sum[i] / 3.0f;
  EXPECT_EQ(results[0], want);
}

// A backup whose copy cannot follow (here: it waits for a snapshot that never came, so it refuses
// every event) is dropped after ShardService::kMaxRefusals refusals: the primary answers the
// workers itself instead of waiting for it for ever.
TEST(ShardReplicationTest, ABackupThatKeepsRefusingIsDropped) {
  struct {
    Replica primary{Bsp(1), 0, false, {1}, true};
    Replica mirror{Bsp(1), 1,     true,
                   {},     false, [](ShardServiceOptions* o) { o->awaiting_snapshot = true; }};
  } p;
  p.primary.service->OnData(Push(0, 0, {5}, {1.0f}));
  for (int i = 0; i < ShardService::kMaxRefusals; ++i) {
    EXPECT_TRUE(UpdatesTo(&p.primary, 0).empty()) << "refusal " << i;
    for (Frames& f : p.primary.Take(kMirrorId)) p.mirror.service->OnData(Decode(std::move(f)));
    ASSERT_EQ(p.mirror.link.errors.size(), 1u);
    const Link::Error e = p.mirror.link.errors[0];
    p.mirror.link.errors.clear();
    EXPECT_EQ(e.code, pb::ERROR_NOT_REPLICA);
    pb::Header h =
        MakeErrorHeader(kMirrorId, kPrimaryId, e.round, e.code, e.message, pb::MSG_REPLICATE);
    h.set_shard(e.shard);
    auto frames = EncodeControl(h);
    ASSERT_TRUE(frames.ok());
    p.primary.service->OnData(Decode(std::move(frames).value()));
    p.primary.service->OnTick();  // resends (replicate_resend is 0 here)
  }
  EXPECT_TRUE(p.primary.service->backups().empty());
  auto u = UpdatesTo(&p.primary, 0);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].values[0], Init()[5] - 1.0f);
}

// A primary (rounds by their result) restored from an older checkpoint while its copy follows it
// resyncs to the workers' round by a jump that no round event carries: the copy is sent a
// snapshot after the jump and holds the primary's bytes and round again, then follows the next
// rounds. Before, the jump stopped the server (a CHECK). The oracle: the primary's own weights.
TEST(ShardReplicationTest, ARoundJumpAfterARestoreRebasesTheCopies) {
  Pair p(Bsp(2), /*replicate_rounds=*/true);
  std::mt19937 rng(11);
  auto round = [&](uint64_t r) {
    for (int w : {0, 1}) {
      auto [idx, val] = RandomPush(&rng);
      p.primary.service->OnData(Push(w, r, idx, val));
    }
    p.Carry();
  };
  for (uint64_t r = 0; r < 3; ++r) round(r);
  const std::vector<float> at3 = p.primary.Weights();
  for (uint64_t r = 3; r < 7; ++r) round(r);
  ASSERT_EQ(p.mirror.Weights(), p.primary.Weights());
  // The checkpoint of round 3; the workers push round 7.
  ASSERT_TRUE(p.primary.shard->Restore(3, at3).ok());
  round(7);
  EXPECT_EQ(p.primary.service->replication().rebases, 1u);
  EXPECT_EQ(p.primary.service->backups(), std::vector<int>{1});
  EXPECT_EQ(p.mirror.shard->round(), p.primary.shard->round());
  EXPECT_EQ(p.mirror.Weights(), p.primary.Weights());
  EXPECT_TRUE(p.mirror.service->mirror());
  for (uint64_t r = p.primary.shard->round(); r < 12; ++r) {
    round(r);
    ASSERT_EQ(p.mirror.Weights(), p.primary.Weights()) << "round " << r;
    ASSERT_EQ(p.mirror.shard->round(), r + 1);
  }
}

// The rebuild of a replacement: a primary (rounds by their result) that has lost its backup sends
// the re-admitted server a snapshot in the middle of a round; the new copy then follows the
// rounds with the primary's bytes, answers the workers as the replier, and once promoted answers
// a resend of the round before the snapshot with the whole shard (it has no earlier UPDATE).
TEST(ShardReplicationTest, AReplacementIsRebuiltFromASnapshotAndFollowsTheRounds) {
  Replica primary(Bsp(2), 0, false, {}, true,
                  [](ShardServiceOptions* o) { o->rebuild_into = {1}; });
  Replica copy(Bsp(2), 1, true, {}, false,
               [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  std::mt19937 rng(9);
  auto push = [&](int w, uint64_t round) {
    auto [idx, val] = RandomPush(&rng);
    primary.service->OnData(Push(w, round, idx, val));
  };
  auto carry = [&] { CarryBetween(&primary, &copy); };

  // Before: events to a copy that waits for its snapshot are refused, nothing changes.
  push(0, 0);
  push(1, 0);
  push(0, 1);  // round 1 is open (worker 1 has not pushed it) when the replacement arrives
  primary.service->OnServerRejoined(1);
  EXPECT_EQ(primary.service->backups(), std::vector<int>{1});
  carry();
  EXPECT_EQ(copy.Weights(), primary.Weights());
  EXPECT_EQ(copy.shard->round(), 1u);
  EXPECT_TRUE(copy.service->replication().rebuilt);
  push(1, 1);  // completes round 1: its result goes to the copy, which answers the workers
  carry();
  EXPECT_EQ(copy.Weights(), primary.Weights());
  ASSERT_EQ(UpdatesTo(&copy, 0).size(), 1u);
  for (uint64_t round = 2; round < 6; ++round) {
    push(0, round);
    push(1, round);
    carry();
    ASSERT_EQ(copy.Weights(), primary.Weights()) << "round " << round;
  }
  // Promoted (the primary died): worker 1 missed round 5's UPDATE and resends it; it gets the one
  // the copy sent, bitwise.
  const std::vector<Message> sent1 = UpdatesTo(&copy, 1);
  ASSERT_FALSE(sent1.empty());
  const Message& round5 = sent1.back();
  ASSERT_EQ(round5.header.round(), 5u);
  copy.FailOverToServer1();
  ASSERT_TRUE(copy.service->primary());
  copy.service->OnData(Push(1, 5, {1}, {1.0f}));
  auto again = UpdatesTo(&copy, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].header.round(), 5u);
  ASSERT_EQ(again[0].values.size(), round5.values.size());
  EXPECT_EQ(0,
            std::memcmp(again[0].values.data(), round5.values.data(), round5.values.size_bytes()));
}

// A worker's replica as the UPDATEs sent to it so far leave it (each applied in order).
void ApplyUpdates(const std::vector<Message>& updates, std::vector<float>* replica) {
  for (const Message& u : updates) {
    if (u.dense()) {
      replica->assign(u.values.begin(), u.values.end());
    } else {
      for (size_t j = 0; j < u.indices.size(); ++j) (*replica)[u.indices[j]] = u.values[j];
    }
  }
}

// ASP and SSP (staleness 0, so replies are held back): a replacement is rebuilt from a snapshot
// taken while a reply is held and clocks differ, then follows the pushes; the oracle is a shard
// without replication fed the same pushes. The copy answers the workers from the snapshot on (it
// is the last backup): each worker's replica, built from the copy's replies after the snapshot
// and the oracle's before it, equals the one the oracle's replies build, bitwise; the copy's
// weights equal the primary's at every step. Promoted, it does not apply a resent push again and
// goes on like the oracle.
class AsyncRebuild : public ::testing::TestWithParam<Consistency> {};

TEST_P(AsyncRebuild, AReplacementIsRebuiltFromClocksAndFollowsThePushes) {
  ShardServerOptions so;
  so.num_workers = 3;
  so.consistency = GetParam();
  so.staleness = 0;
  Replica primary(so, 0, false, {}, false, [](ShardServiceOptions* o) { o->rebuild_into = {1}; });
  Replica copy(so, 1, true, {}, false, [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  Replica plain(so, 0, false, {});
  std::mt19937 rng(11);
  std::vector<std::vector<float>> via_copy(3, Init()), via_plain(3, Init());
  std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> last(3);
  auto push = [&](int w, uint64_t clock) {
    last[w] = RandomPush(&rng);
    primary.service->OnData(Push(w, clock, last[w].first, last[w].second));
    plain.service->OnData(Push(w, clock, last[w].first, last[w].second));
    CarryBetween(&primary, &copy);
  };
  auto replies = [&](bool rebuilt) {
    for (int w = 0; w < 3; ++w) {
      ApplyUpdates(UpdatesTo(&plain, w), &via_plain[w]);
      // Before the rebuild the primary answers; after it, the copy (the primary's copies of those
      // replies are dropped once acknowledged).
      ApplyUpdates(UpdatesTo(rebuilt ? &copy : &primary, w), &via_copy[w]);
      if (rebuilt) (void)UpdatesTo(&primary, w);
      EXPECT_EQ(via_copy[w], via_plain[w]) << "worker " << w;
    }
  };
  // Clocks 3, 2 and 1 when the replacement arrives: with SSP, worker 0's reply of clock 2 is held.
  for (int w = 0; w < 3; ++w) push(w, 0);
  push(0, 1);
  push(1, 1);
  push(0, 2);
  replies(false);
  primary.service->OnServerRejoined(1);
  EXPECT_EQ(primary.service->backups(), std::vector<int>{1});
  CarryBetween(&primary, &copy);
  ASSERT_TRUE(copy.service->replication().rebuilt);
  EXPECT_EQ(copy.Weights(), primary.Weights());
  EXPECT_EQ(copy.shard->stats().pushes_applied, 6u);
  auto same_clocks = [&](const char* when) {
    const ShardSnapshot a = primary.shard->TakeSnapshot(), b = copy.shard->TakeSnapshot();
    EXPECT_EQ(a.version, b.version) << when;
    ASSERT_EQ(a.clocks.size(), 3u);
    ASSERT_EQ(b.clocks.size(), 3u);
    for (int w = 0; w < 3; ++w) {
      EXPECT_EQ(a.clocks[w].last_round, b.clocks[w].last_round) << when << ", worker " << w;
      EXPECT_EQ(a.clocks[w].waiting, b.clocks[w].waiting) << when << ", worker " << w;
      EXPECT_EQ(a.clocks[w].waiting_round, b.clocks[w].waiting_round) << when << ", worker " << w;
      EXPECT_EQ(a.clocks[w].reply_version, b.clocks[w].reply_version) << when << ", worker " << w;
    }
  };
  same_clocks("after the snapshot");
  EXPECT_EQ(primary.shard->TakeSnapshot().clocks[0].waiting, GetParam() == Consistency::kSsp);
  std::vector<int> clock = {3, 2, 1};
  for (int step = 0; step < 12; ++step) {
    const int w = (step * 2 + 2) % 3;  // 2, 1, 0, 2, ...: the slowest worker first
    push(w, static_cast<uint64_t>(clock[w]++));
    replies(true);
    ASSERT_EQ(copy.Weights(), primary.Weights()) << "step " << step;
  }
  same_clocks("after the pushes that followed it");
  ExpectSamePushTotals(copy, primary);
  // Promoted (the primary died): worker 1's last push again is not applied twice.
  copy.FailOverToServer1();
  ASSERT_TRUE(copy.service->primary());
  ExpectResendNotApplied(
      &copy, Push(1, static_cast<uint64_t>(clock[1] - 1), last[1].first, last[1].second), "");
  (void)UpdatesTo(&copy, 1);  // the resend's answer: nothing the worker lacks
  for (int step = 0; step < 6; ++step) {
    const int w = step % 3 == 0 ? 2 : step % 3 == 1 ? 1 : 0;
    last[w] = RandomPush(&rng);
    copy.service->OnData(Push(w, static_cast<uint64_t>(clock[w]), last[w].first, last[w].second));
    plain.service->OnData(
        Push(w, static_cast<uint64_t>(clock[w]++), last[w].first, last[w].second));
    EXPECT_EQ(copy.Weights(), plain.Weights()) << "promoted, step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(AspOrSsp, AsyncRebuild,
                         ::testing::Values(Consistency::kAsp, Consistency::kSsp),
                         [](const auto& info) {
                           return std::string(info.param == Consistency::kAsp ? "Asp" : "Ssp");
                         });

// A worker that dies and rejoins while a copy is being rebuilt (its snapshot on the way): the
// copy installs the snapshot, then applies the death, the re-admission and the JOIN in order, and
// ends counting the worker and holding the primary's weights, which equal those of a shard
// without replication fed the same events. BSP (rounds by their result), ASP and SSP.
class RejoinDuringRebuild : public ::testing::TestWithParam<Consistency> {};

TEST_P(RejoinDuringRebuild, TheCopyFollowsTheRejoin) {
  const bool bsp = GetParam() == Consistency::kBsp;
  ShardServerOptions so;
  so.num_workers = 2;
  so.consistency = GetParam();
  so.staleness = 1;
  auto rebuild = [](ShardServiceOptions* o) { o->rebuild_into = {1}; };
  Replica primary(so, 0, false, {}, bsp, rebuild);
  Replica copy(so, 1, true, {}, bsp, [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  Replica plain(so, 0, false, {});
  std::mt19937 rng(17);
  auto push = [&](int w, uint64_t round) {
    auto [idx, val] = RandomPush(&rng);
    primary.service->OnData(Push(w, round, idx, val));
    plain.service->OnData(Push(w, round, idx, val));
  };
  auto both = [&](const std::function<void(ShardService*)>& event) {
    event(primary.service.get());
    event(plain.service.get());
  };
  push(0, 0);
  push(1, 0);
  primary.service->OnServerRejoined(1);  // the snapshot is sent, not delivered yet
  both([](ShardService* s) { s->OnWorkerDead(1); });
  push(0, 1);  // BSP: round 1 completes with worker 0 alone
  both([](ShardService* s) { s->OnWorkerRejoined(1); });
  const uint64_t join = bsp ? 2 : 1;
  primary.service->OnData(Control(1, pb::MSG_JOIN, join));
  plain.service->OnData(Control(1, pb::MSG_JOIN, join));
  push(0, 2);
  push(1, join);
  CarryBetween(&primary, &copy);
  ASSERT_TRUE(copy.service->replication().rebuilt);
  EXPECT_TRUE(copy.shard->counts(1));
  EXPECT_TRUE(primary.shard->counts(1));
  EXPECT_EQ(copy.Weights(), primary.Weights());
  EXPECT_EQ(copy.Weights(), plain.Weights());
  for (uint64_t r = 3; r < 6; ++r) {
    push(0, r);
    push(1, r - (bsp ? 0 : 1));
    CarryBetween(&primary, &copy);
    ASSERT_EQ(copy.Weights(), plain.Weights()) << "round " << r;
  }
  EXPECT_EQ(copy.shard->round(), plain.shard->round());
}

INSTANTIATE_TEST_SUITE_P(AllRebuiltModes, RejoinDuringRebuild,
                         ::testing::Values(Consistency::kBsp, Consistency::kAsp, Consistency::kSsp),
                         [](const auto& info) {
                           return std::string(info.param == Consistency::kBsp   ? "Bsp"
                                              : info.param == Consistency::kAsp ? "Asp"
                                                                                : "Ssp");
                         });

// A snapshot whose clocks do not fit is refused and changes nothing; a BSP shard whose rounds are
// replicated by their pushes (backup workers) is not rebuilt from a snapshot.
TEST(ShardReplicationTest, ASnapshotThatDoesNotFitTheShardIsRefused) {
  ShardServerOptions so;
  so.num_workers = 2;
  so.consistency = Consistency::kAsp;
  auto created = ShardServer::Create(so, Init());
  ASSERT_TRUE(created.ok());
  ShardServer& asp = **created;
  ShardSnapshot snap;
  snap.weights.assign(kShardLen, 7.0f);
  snap.version = 4;
  snap.clocks.resize(3);  // three workers for a shard of two
  EXPECT_EQ(asp.InstallSnapshot(snap).code(), StatusCode::kInvalidArgument);
  snap.clocks.resize(2);
  snap.clocks[1].reply_version = 5;  // a reply built after the snapshot's version
  EXPECT_EQ(asp.InstallSnapshot(snap).code(), StatusCode::kInvalidArgument);
  snap.clocks[1] = {.last_round = 0, .waiting = true, .waiting_round = 1};  // waits for a later
  EXPECT_EQ(asp.InstallSnapshot(snap).code(), StatusCode::kInvalidArgument);
  snap.clocks[1] = {};
  snap.weights.resize(kShardLen - 1);
  EXPECT_EQ(asp.InstallSnapshot(snap).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(asp.weights().begin(), asp.weights().end()), Init());
  snap.weights.assign(kShardLen, 7.0f);
  EXPECT_TRUE(asp.InstallSnapshot(snap).ok());
  EXPECT_EQ(std::vector<float>(asp.weights().begin(), asp.weights().end()), snap.weights);

  // BSP replicated by pushes needs every worker's round state (and two-way the residual).
  ShardServerOptions bw = Bsp(3);
  bw.backup_workers = 1;
  bw.server_compressor = Compressor::kTopk;
  bw.server_density = 0.25;
  auto bsp = ShardServer::Create(bw, Init());
  ASSERT_TRUE(bsp.ok());
  ShardSnapshot b;
  b.round = 4;
  b.weights.assign(kShardLen, 7.0f);
  EXPECT_EQ((*bsp)->InstallSnapshot(b).code(), StatusCode::kInvalidArgument);  // no states
  b.bsp_clocks.resize(3);
  EXPECT_EQ((*bsp)->InstallSnapshot(b).code(), StatusCode::kInvalidArgument);  // no residual
  b.residual.assign(kShardLen, 0.5f);
  b.bsp_clocks[2].last_applied = 4;  // a push of the round the snapshot has not aggregated
  EXPECT_EQ((*bsp)->InstallSnapshot(b).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>((*bsp)->weights().begin(), (*bsp)->weights().end()), Init());
  b.bsp_clocks[2].last_applied = 3;
  EXPECT_TRUE((*bsp)->InstallSnapshot(b).ok());
  EXPECT_EQ((*bsp)->round(), 4u);
}

// BSP replicated by its pushes (backup workers applying late pushes in a later round; two-way
// compression with its server residual): a replacement's snapshot waits for the round in
// progress to end, then carries every worker's round state and the residual. The copy then
// follows the pushes (late ones included) with the primary's bytes, and promoted it goes on like
// a shard without replication fed the same pushes.
class ByPushesRebuild : public ::testing::TestWithParam<bool> {};

TEST_P(ByPushesRebuild, ASnapshotAtTheRoundsEndThenThePushes) {
  const bool two_way = GetParam();
  ShardServerOptions so = Bsp(3);
  if (two_way) {
    so.server_compressor = Compressor::kTopk;
    so.server_density = 0.25;
  } else {
    so.backup_workers = 1;
  }
  Replica primary(so, 0, false, {}, false, [](ShardServiceOptions* o) { o->rebuild_into = {1}; });
  Replica copy(so, 1, true, {}, false, [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  Replica plain(so, 0, false, {});
  std::mt19937 rng(23);
  auto push = [&](int w, uint64_t round) {
    auto [idx, val] = RandomPush(&rng);
    primary.service->OnData(Push(w, round, idx, val));
    plain.service->OnData(Push(w, round, idx, val));
    CarryBetween(&primary, &copy);
  };
  // Round 0 whole; round 1 open (two of three pushed) when the replacement arrives.
  for (int w = 0; w < 3; ++w) push(w, 0);
  push(0, 1);
  if (two_way) push(1, 1);
  primary.service->OnServerRejoined(1);
  EXPECT_TRUE(primary.service->backups().empty()) << "a snapshot of a round in progress";
  EXPECT_TRUE(primary.Take(copy.link.id()).empty());
  push(2, 1);  // ends round 1 (backup workers: worker 1 is late from here on)
  ASSERT_EQ(primary.service->backups(), std::vector<int>{1});
  ASSERT_TRUE(copy.service->replication().rebuilt);
  EXPECT_EQ(copy.Weights(), primary.Weights());
  EXPECT_EQ(copy.shard->round(), 2u);
  auto same_states = [&](const char* when) {
    ASSERT_TRUE(primary.shard->rounds()->SnapshotReady() && copy.shard->rounds()->SnapshotReady())
        << when;
    const ShardSnapshot a = primary.shard->TakeSnapshot(), b = copy.shard->TakeSnapshot();
    ASSERT_EQ(a.bsp_clocks.size(), 3u);
    ASSERT_EQ(b.bsp_clocks.size(), 3u);
    for (int w = 0; w < 3; ++w) {
      const BspWorkerClock &x = a.bsp_clocks[w], &y = b.bsp_clocks[w];
      EXPECT_EQ(x.counted_last, y.counted_last) << when << ", worker " << w;
      EXPECT_EQ(x.last_applied, y.last_applied) << when << ", worker " << w;
      EXPECT_EQ(x.miss_run, y.miss_run) << when << ", worker " << w;
      EXPECT_EQ(x.dense_reply_to, y.dense_reply_to) << when << ", worker " << w;
      EXPECT_EQ(x.join_round, y.join_round) << when << ", worker " << w;
    }
    EXPECT_EQ(a.residual, b.residual) << when;
  };
  same_states("after the snapshot");
  for (uint64_t round = 2; round < 7; ++round) {
    if (!two_way) push(1, round - 1);  // late: applied in this round
    push(0, round);
    push(2, round);
    if (two_way) push(1, round);
    ASSERT_EQ(copy.Weights(), primary.Weights()) << "round " << round;
    ASSERT_EQ(copy.Weights(), plain.Weights()) << "round " << round;
  }
  same_states("after the rounds that followed it");
  ExpectSamePushTotals(copy, plain);
  // Promoted: worker 1's late push of round 5 again is a duplicate; the rounds go on as the
  // oracle's.
  copy.FailOverToServer1();
  ASSERT_TRUE(copy.service->primary());
  if (!two_way) {
    ExpectResendNotApplied(&copy, Push(1, 5, {1}, {1.0f}), "a late push applied twice");
  }
  for (uint64_t round = 7; round < 9; ++round) {
    for (int w = 0; w < 3; ++w) {
      auto [idx, val] = RandomPush(&rng);
      copy.service->OnData(Push(w, round, idx, val));
      plain.service->OnData(Push(w, round, idx, val));
    }
    ASSERT_EQ(copy.Weights(), plain.Weights()) << "promoted, round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(BackupWorkersOrTwoWay, ByPushesRebuild, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "TwoWay" : "BackupWorkers";
                         });

// A copy rebuilt at a round boundary and promoted before any round completes has no previous
// UPDATE: a resend of the round before its snapshot is answered with the whole shard, which is
// what that UPDATE left on the worker.
TEST(ShardReplicationTest, APromotedRebuiltCopyAnswersAnOlderResendWithTheWholeShard) {
  Replica primary(Bsp(1), 0, false, {}, true,
                  [](ShardServiceOptions* o) { o->rebuild_into = {1}; });
  Replica copy(Bsp(1), 1, true, {}, false,
               [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  primary.service->OnData(Push(0, 0, {2, 9}, {1.0f, -2.0f}));
  primary.service->OnData(Push(0, 1, {9}, {0.5f}));
  primary.service->OnServerRejoined(1);
  for (Frames& f : primary.Take(kMirrorId)) copy.service->OnData(Decode(std::move(f)));
  ASSERT_EQ(copy.shard->round(), 2u);
  copy.FailOverToServer1();
  copy.service->OnData(Push(0, 1, {9}, {0.5f}));
  auto u = UpdatesTo(&copy, 0);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0].dense());
  EXPECT_EQ(u[0].header.round(), 1u);
  EXPECT_EQ(std::vector<float>(u[0].values.begin(), u[0].values.end()), primary.Weights());
  EXPECT_EQ(copy.shard->stats().pushes_applied, 0u) << "the resend was applied";
}

// Before its snapshot a rebuilt copy refuses events, and a snapshot that does not fit the shard
// is refused: nothing changes.
TEST(ShardReplicationTest, ARebuiltCopyRefusesEventsBeforeItsSnapshot) {
  Replica primary(Bsp(1), 0, false, {1}, true);
  Replica copy(Bsp(1), 1, true, {}, false,
               [](ShardServiceOptions* o) { o->awaiting_snapshot = true; });
  primary.service->OnData(Push(0, 0, {3}, {1.0f}));
  for (Frames& f : primary.Take(kMirrorId)) copy.service->OnData(Decode(std::move(f)));
  ASSERT_EQ(copy.link.errors.size(), 1u);
  EXPECT_EQ(copy.link.errors[0].code, pb::ERROR_NOT_REPLICA);
  EXPECT_EQ(copy.Weights(), Init());
  EXPECT_FALSE(copy.service->replication().rebuilt);
}

// Shard 0 served by server 1 after a failover (`taken`, a primary that rebuilds server 0) and
// server 0's replacement (`own`, awaiting its snapshot; its table: shard 0 at server 1, whose copy
// it is rebuilt from). Worker 0 has pushed round 0 to `taken`, which then learns that server 0
// rejoined.
struct HandBack {
  HandBack()
      : taken(
            Bsp(1), 1, false, {}, true, [](ShardServiceOptions* o) { o->rebuild_into = {0}; }, 1),
        own(
            Bsp(1), 0, true, {}, true,
            [](ShardServiceOptions* o) {
              o->awaiting_snapshot = true;
              o->rebuild_into = {1};
            },
            1) {
    taken.service->OnData(Push(0, 0, {4}, {1.0f}));
    taken.service->OnServerRejoined(0);
  }
  Replica taken, own;
};

// Taking its place back: server 1 serves shard 0 after a failover; server 0's replacement is
// rebuilt from it and, once nothing is in flight, gets the shard back (REPLICA_HANDOVER): it
// serves the workers, server 1 follows it as its backup (and its last: the replier) and refuses
// workers, also under a node table from before the handover.
TEST(ShardReplicationTest, TheRebuiltOwnServerTakesItsShardBack) {
  HandBack h;
  Replica& taken = h.taken;
  Replica& own = h.own;
  auto carry = [&] { CarryBetween(&taken, &own); };

  carry();
  EXPECT_TRUE(own.service->primary()) << "the shard was not handed back";
  EXPECT_EQ(taken.service->role(), ShardService::Role::kHandedOver);
  EXPECT_EQ(own.service->backups(), std::vector<int>{1});
  EXPECT_EQ(own.Weights(), taken.Weights());
  // A worker whose table is behind reaches server 1: refused, nothing changes.
  taken.service->OnData(Push(0, 1, {4}, {1.0f}));
  ASSERT_FALSE(taken.link.errors.empty());
  EXPECT_EQ(taken.link.errors.back().code, pb::ERROR_NOT_PRIMARY);
  taken.service->OnTable();  // a table from before the handover: no promotion
  EXPECT_FALSE(taken.service->primary());
  // Rounds at the shard's own server; server 1 answers the workers and keeps the same bytes.
  UpdatesTo(&taken, 0);
  for (uint64_t round = 1; round < 4; ++round) {
    own.service->OnData(Push(0, round, {4, 7}, {0.25f, 1.0f}));
    carry();
    ASSERT_EQ(taken.Weights(), own.Weights()) << "round " << round;
  }
  EXPECT_EQ(UpdatesTo(&taken, 0).size(), 3u);
  EXPECT_TRUE(UpdatesTo(&own, 0).empty());
  EXPECT_EQ(own.shard->round(), 4u);
  // The table that names the shard's own server: server 1 is a plain mirror of it again.
  EXPECT_EQ(taken.service->role(), ShardService::Role::kHandedOver);
  taken.link.primary[0] = 0;
  taken.service->OnTable();
  EXPECT_EQ(taken.service->role(), ShardService::Role::kMirror);
}

// The scheduler's table after a hand-back may reach the shard's own server before the
// REPLICA_HANDOVER (they travel on different connections): the copy is not promoted as in a
// failover (it would serve without its backup, which then stops following), it waits for the
// event and takes the shard over with the former primary as its backup. Only once the former
// primary is dead does the table promote it.
TEST(ShardReplicationTest, AHandoversTableBeforeItsEventDoesNotPromote) {
  HandBack h;
  Replica& taken = h.taken;
  Replica& own = h.own;
  for (Frames& f : taken.Take(own.link.id())) own.service->OnData(Decode(std::move(f)));
  for (Frames& f : own.Take(taken.link.id())) taken.service->OnData(Decode(std::move(f)));
  ASSERT_FALSE(taken.service->primary()) << "no handover";
  auto handover = taken.Take(own.link.id());
  ASSERT_EQ(handover.size(), 1u);
  own.link.primary[0] = 0;  // the table from the scheduler, first
  own.service->OnTable();
  EXPECT_FALSE(own.service->primary()) << "promoted before the handover arrived";
  own.service->OnData(Decode(std::move(handover[0])));
  ASSERT_TRUE(own.service->primary());
  EXPECT_EQ(own.service->backups(), std::vector<int>{1});
  own.service->OnData(Push(0, 1, {4, 7}, {0.25f, 1.0f}));
  CarryBetween(&own, &taken);
  EXPECT_EQ(taken.Weights(), own.Weights()) << "the former primary stopped following";
  EXPECT_EQ(taken.shard->round(), 2u);

  // A copy named by a table while the primary it follows is alive waits; once that primary is
  // dead (its NODE_DEAD), the same table promotes it.
  Pair p(Bsp(1), true);
  p.primary.service->OnData(Push(0, 0, {2}, {1.0f}));
  p.Carry();
  p.mirror.link.primary[0] = 1;
  p.mirror.service->OnTable();
  EXPECT_FALSE(p.mirror.service->primary());
  p.mirror.link.dead_servers.insert(0);
  p.mirror.service->OnServerDead(0);
  EXPECT_TRUE(p.mirror.service->primary());
}

INSTANTIATE_TEST_SUITE_P(ByPushOrByResult, ShardReplicationModes, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "RoundResults" : "PushReplay";
                         });

// Checkpoints keep bounding a later loss: a mirror does not write the shard's checkpoint (its
// primary does), and once promoted it writes it at the rounds it serves.
TEST(ShardReplicationTest, APromotedCopyWritesTheShardsCheckpoint) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sieve-repl-ckpt-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string primary_dir = (dir / "primary").string(),
                    mirror_dir = (dir / "mirror").string();
  Replica primary(Bsp(1), 0, false, {1}, true, nullptr, -1, primary_dir);
  Replica mirror(Bsp(1), 1, true, {}, false, nullptr, -1, mirror_dir);
  const uint64_t hash = ConfigHash(Replica::CheckpointConfigFor());
  for (uint64_t round = 0; round < 3; ++round) {
    primary.service->OnData(Push(0, round, {1, 5}, {0.5f, -1.0f}));
    CarryBetween(&primary, &mirror);
  }
  auto at_primary = ReadCheckpoint(CheckpointPath(primary_dir, 0), hash, 0, kShardLen);
  ASSERT_TRUE(at_primary.ok()) << at_primary.status().ToString();
  EXPECT_EQ(at_primary->round, 3u);
  EXPECT_EQ(ReadCheckpoint(CheckpointPath(mirror_dir, 0), hash, 0, kShardLen).status().code(),
            StatusCode::kNotFound)
      << "a mirror wrote the shard's checkpoint";
  mirror.FailOverToServer1();
  ASSERT_TRUE(mirror.service->primary());
  mirror.service->OnData(Push(0, 3, {2}, {1.0f}));
  auto at_mirror = ReadCheckpoint(CheckpointPath(mirror_dir, 0), hash, 0, kShardLen);
  ASSERT_TRUE(at_mirror.ok()) << at_mirror.status().ToString();
  EXPECT_EQ(at_mirror->round, 4u);
  EXPECT_EQ(at_mirror->weights, mirror.Weights());
  std::filesystem::remove_all(dir);
}

// A round result the copy cannot take (another round) is refused and changes nothing.
TEST(ShardReplicationTest, ARoundResultForAnotherRoundIsRefused) {
  Pair p(Bsp(1), true);
  ASSERT_NO_FATAL_FAILURE(p.DeliverEditedReplicate(2, [](pb::Header* h) { h->set_round(5); }));
  ASSERT_NO_FATAL_FAILURE(p.ExpectMirrorRefusedAReplicate(1));
  EXPECT_EQ(p.mirror.shard->round(), 0u);
}

}  // namespace
}  // namespace sieve
