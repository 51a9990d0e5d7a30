// ShardServer against independent references: a dense brute-force replay of the same pushes.
#include "server/shard/shard_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "proto/codec.h"

namespace sieve {
namespace {

struct SparsePush {
  std::vector<uint32_t> idx;
  std::vector<float> val;
};

SparsePush RandomPush(std::mt19937& rng, uint32_t n, uint32_t k) {
  std::set<uint32_t> s;
  std::uniform_int_distribution<uint32_t> pick(0, n - 1);
  while (s.size() < k) s.insert(pick(rng));
  SparsePush p;
  p.idx.assign(s.begin(), s.end());
  std::normal_distribution<float> v(0.0f, 1.0f);
  for (size_t j = 0; j < p.idx.size(); ++j) p.val.push_back(v(rng));
  return p;
}

// A worker drawn at random among those not blocked (waiting for their reply); -1 when all are.
int RandomReadyWorker(const std::vector<bool>& blocked, std::mt19937& rng) {
  std::vector<int> ready;
  for (size_t w = 0; w < blocked.size(); ++w) {
    if (!blocked[w]) ready.push_back(static_cast<int>(w));
  }
  return ready.empty() ? -1 : ready[rng() % ready.size()];
}

std::unique_ptr<ShardServer> Make(ShardServerOptions o, std::vector<float> init) {
  auto s = ShardServer::Create(o, std::move(init));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Worker `w`'s sparse push of round `round`: the single pair (i, v).
void PushOne(ShardServer* s, int w, uint64_t round, uint32_t i, float v, Outbox* out) {
  std::vector<uint32_t> idx = {i};
  std::vector<float> val = {v};
  s->OnPush(w, round, idx, val, false, out);
}

// A BSP shard of `n` zeros for `workers` workers.
std::unique_ptr<ShardServer> ZeroBsp(uint32_t workers, uint32_t n) {
  ShardServerOptions o;
  o.num_workers = workers;
  return Make(o, std::vector<float>(n, 0.0f));
}

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(i);
  return v;
}

TEST(ServerShardTest, BspAveragesUnionAndRepliesEveryWorker) {
  const uint32_t n = 500, workers = 3;
  ShardServerOptions o;
  o.num_workers = workers;
  auto s = Make(o, Iota(n));
  std::vector<float> ref = Iota(n);
  std::mt19937 rng(7);
  uint64_t union_pairs = 0;  // Σ over rounds of the union's size: the summary's reply_pairs
  for (uint64_t round = 0; round < 5; ++round) {
    std::vector<float> sum(n, 0.0f);
    std::set<uint32_t> uni;
    Outbox out;
    for (uint32_t w = 0; w < workers; ++w) {
      SparsePush p = RandomPush(rng, n, 20 + w);
      for (size_t j = 0; j < p.idx.size(); ++j) {
        sum[p.idx[j]] += p.val[j];
        uni.insert(p.idx[j]);
      }
      s->OnPush(static_cast<int>(w), round, p.idx, p.val, false, &out);
      if (w + 1 < workers) {
        EXPECT_TRUE(out.empty()) << "replied before the round completed";
      }
    }
    for (uint32_t i : uni) ref[i] -= sum[i] / static_cast<float>(workers);
    ASSERT_EQ(out.size(), workers);
    std::set<int> recipients;
    for (const Reply& r : out) {
      recipients.insert(r.worker);
      EXPECT_EQ(r.type, ReplyType::kUpdate);
      EXPECT_EQ(r.round, round);
      ASSERT_EQ(r.buffer->indices.size(), uni.size());
      EXPECT_TRUE(std::equal(uni.begin(), uni.end(), r.buffer->indices.begin()));
      for (size_t j = 0; j < r.buffer->indices.size(); ++j) {
        EXPECT_EQ(r.buffer->values[j], ref[r.buffer->indices[j]]);
      }
    }
    EXPECT_EQ(recipients.size(), workers);
    union_pairs += uni.size();
    EXPECT_EQ(s->stats().reply_pairs_sum, union_pairs);
  }
  for (uint32_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(s->weights()[i], ref[i]) << i;
  EXPECT_EQ(s->round(), 5u);
}

// A BSP reply larger than reply_part_pairs comes out in parts, each handed to the sink as soon as
// it is ready, that tile the union exactly; the weights and the reply's content equal those of a
// server that replies whole.
TEST(ServerShardTest, BspSplitReplyTilesTheUnionAndEqualsTheWholeReply) {
  const uint32_t n = 200, workers = 3;
  ShardServerOptions o;
  o.num_workers = workers;
  auto whole = Make(o, Iota(n));
  o.reply_part_pairs = 7;
  auto split = Make(o, Iota(n));
  std::vector<Outbox> emitted;  // what the sink saw, one outbox per call
  split->set_part_sink([&](Outbox* out) {
    emitted.push_back(*out);
    out->clear();
  });
  std::mt19937 rng(21);
  for (uint64_t round = 0; round < 5; ++round) {
    Outbox out_whole, out_split;
    emitted.clear();
    for (uint32_t w = 0; w < workers; ++w) {
      SparsePush p = RandomPush(rng, n, 5 + rng() % 30);
      whole->OnPush(static_cast<int>(w), round, p.idx, p.val, false, &out_whole);
      split->OnPush(static_cast<int>(w), round, p.idx, p.val, false, &out_split);
    }
    ASSERT_EQ(out_whole.size(), workers);
    const ReplyBuffer& ref = *out_whole[0].buffer;
    const uint32_t parts = static_cast<uint32_t>((ref.indices.size() + 6) / 7);
    ASSERT_GT(parts, 1u);
    EXPECT_TRUE(out_split.empty());  // every part went through the sink
    ASSERT_EQ(emitted.size(), parts);
    for (uint32_t w = 0; w < workers; ++w) {
      std::vector<uint32_t> idx;
      std::vector<float> val;
      for (uint32_t p = 0; p < parts; ++p) {
        ASSERT_EQ(emitted[p].size(), workers);  // one part for every live worker per call
        const Reply& r = emitted[p][w];
        EXPECT_EQ(r.worker, static_cast<int>(w));
        EXPECT_EQ(r.round, round);
        EXPECT_EQ(r.part, p);
        EXPECT_EQ(r.parts, parts);
        EXPECT_FALSE(r.dense);
        ASSERT_LE(r.end - r.begin, 7u);
        ASSERT_EQ(r.begin, idx.size());  // consecutive slices
        idx.insert(idx.end(), r.buffer->indices.begin() + r.begin,
                   r.buffer->indices.begin() + r.end);
        val.insert(val.end(), r.buffer->values.begin() + r.begin, r.buffer->values.begin() + r.end);
      }
      EXPECT_EQ(idx, ref.indices);
      EXPECT_EQ(val, ref.values);
    }
    ASSERT_TRUE(std::equal(whole->weights().begin(), whole->weights().end(),
                           split->weights().begin(), split->weights().end()));
  }
  // A resend of the completed round is answered whole (one message completes it too).
  Outbox again;
  SparsePush p = RandomPush(rng, n, 3);
  split->OnPush(0, 4, p.idx, p.val, false, &again);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].parts, 1u);
}

// More parts than kMaxReplyParts would be needed: the parts grow instead, none is empty, and
// they still tile the reply.
TEST(ServerShardTest, BspSplitReplyNeverExceedsTheMostPartsNorSendsAnEmptyOne) {
  const uint32_t n = 20000;
  ShardServerOptions o;
  o.reply_part_pairs = 1;
  auto s = Make(o, Iota(n));
  std::mt19937 rng(8);
  SparsePush p = RandomPush(rng, n, 5000);
  Outbox out;
  s->OnPush(0, 0, p.idx, p.val, false, &out);
  ASSERT_FALSE(out.empty());
  const uint32_t parts = out[0].parts;
  EXPECT_LE(parts, kMaxReplyParts);
  ASSERT_EQ(out.size(), parts);
  size_t next = 0;
  for (uint32_t q = 0; q < parts; ++q) {
    EXPECT_EQ(out[q].part, q);
    EXPECT_EQ(out[q].begin, next);
    EXPECT_GT(out[q].end, out[q].begin);
    next = out[q].end;
  }
  EXPECT_EQ(next, p.idx.size());
  // A round where nobody selected anything in the shard: one empty UPDATE, split or not.
  for (uint64_t per : {uint64_t{0}, uint64_t{4}}) {
    o.reply_part_pairs = per;
    auto e = Make(o, Iota(n));
    Outbox none;
    e->OnPush(0, 0, {}, {}, false, &none);
    ASSERT_EQ(none.size(), 1u) << per;
    EXPECT_EQ(none[0].parts, 1u);
    EXPECT_TRUE(none[0].buffer->indices.empty());
  }
}

TEST(ServerShardTest, BspDuplicatePushIsAppliedOnceAndResentReplyIsIdentical) {
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, std::vector<float>(10, 1.0f));
  std::vector<uint32_t> idx = {2, 5};
  std::vector<float> val = {1.0f, 2.0f};
  Outbox out;
  s->OnPush(0, 0, idx, val, false, &out);
  s->OnPush(0, 0, idx, val, false, &out);  // duplicate within the round
  EXPECT_TRUE(out.empty());
  s->OnPush(1, 0, idx, val, false, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(s->weights()[2], 1.0f - 1.0f);  // (1+1)/2
  EXPECT_FLOAT_EQ(s->weights()[5], 1.0f - 2.0f);
  const auto first = out[0].buffer;
  out.clear();
  s->OnPush(1, 0, idx, val, false, &out);  // resent after completion -> same reply, no apply
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].buffer, first);
  EXPECT_FLOAT_EQ(s->weights()[2], 0.0f);
  EXPECT_EQ(s->stats().duplicates, 2u);
  EXPECT_EQ(s->stats().pushes_applied, 2u);
}

TEST(ServerShardTest, BspUnknownRoundIsRejectedWithoutChange) {
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, Iota(8));
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {5.0f};
  Outbox out;
  s->OnPush(0, 3, idx, val, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kError);
  EXPECT_EQ(out[0].code, pb::ERROR_UNKNOWN_ROUND);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(s->weights()[i], Iota(8)[i]);
  out.clear();
  s->OnPush(7, 0, idx, val, false, &out);  // no such worker
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_NOT_REGISTERED);
}

TEST(ServerShardTest, BspDeadWorkerNoLongerBlocksTheRound) {
  ShardServerOptions o;
  o.num_workers = 3;
  auto s = Make(o, std::vector<float>(4, 0.0f));
  Outbox out;
  PushOne(s.get(), 0, 0, 0, 3.0f, &out);
  PushOne(s.get(), 1, 0, 0, 3.0f, &out);
  EXPECT_TRUE(out.empty());
  s->OnWorkerDead(2, &out);
  ASSERT_EQ(out.size(), 2u);                // workers 0 and 1
  EXPECT_FLOAT_EQ(s->weights()[0], -3.0f);  // mean of the two pushes
  out.clear();
  PushOne(s.get(), 2, 1, 0, 3.0f, &out);  // a dead worker's push is refused
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kError);
}

// A worker that died and was re-admitted joins at a future round boundary: rounds before it
// complete without it, its early PUSH of the join round is held, from the join round on it is
// counted again, and its first UPDATE is the whole shard. Reference: a dense replay averaging
// over the pushes of each round.
TEST(ServerShardTest, BspRejoinedWorkerIsCountedFromItsJoinRound) {
  const uint32_t n = 50;
  ShardServerOptions o;
  o.num_workers = 3;
  auto s = Make(o, Iota(n));
  std::vector<float> ref = Iota(n);
  std::mt19937 rng(5);
  std::map<int, SparsePush> pushes;
  // Pushes `who` for `round` and checks the replies when the round completes.
  auto round_with = [&](uint64_t round, std::vector<int> who, std::vector<int> expect_replies) {
    std::vector<float> sum(n, 0.0f);
    Outbox out;
    for (int w : who) {
      SparsePush p = RandomPush(rng, n, 6);
      for (size_t j = 0; j < p.idx.size(); ++j) sum[p.idx[j]] += p.val[j];
      s->OnPush(w, round, p.idx, p.val, false, &out);
    }
    for (uint32_t i = 0; i < n; ++i) ref[i] -= sum[i] / static_cast<float>(who.size());
    std::vector<int> got;
    for (const Reply& r : out) {
      EXPECT_EQ(r.type, ReplyType::kUpdate);
      EXPECT_EQ(r.round, round);
      got.push_back(r.worker);
    }
    EXPECT_EQ(got, expect_replies) << "round " << round;
    return out;
  };
  round_with(0, {0, 1, 2}, {0, 1, 2});
  Outbox out;
  s->OnWorkerDead(2, &out);
  EXPECT_TRUE(out.empty());
  round_with(1, {0, 1}, {0, 1});

  s->OnPullDense(2, &out);  // dead and not re-admitted: refused
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_NOT_REGISTERED);
  EXPECT_EQ(out[0].rejected, pb::MSG_PULL_DENSE);
  out.clear();
  s->OnJoin(2, 4, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_NOT_REGISTERED);
  out.clear();

  s->OnWorkerRejoined(2);
  s->OnPullDense(2, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kDense);
  EXPECT_EQ(out[0].round, 2u);  // the round being aggregated
  out.clear();
  s->OnJoin(2, 1, &out);  // already passed: refused, nothing changes
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_JOIN_TOO_LATE);
  out.clear();
  s->OnJoin(2, 4, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  EXPECT_EQ(out[0].round, 4u);
  out.clear();
  SparsePush early = RandomPush(rng, n, 6);
  s->OnPush(2, 3, early.idx, early.val, false, &out);  // not its join round
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_UNKNOWN_ROUND);
  out.clear();
  s->OnPush(2, 4, early.idx, early.val, false, &out);  // held until round 4
  EXPECT_TRUE(out.empty());

  round_with(2, {0, 1}, {0, 1});
  round_with(3, {0, 1}, {0, 1});
  EXPECT_EQ(s->stats().rejoins, 1u);
  // Round 4: the held push counts; worker 2's reply is the whole shard.
  for (size_t j = 0; j < early.idx.size(); ++j) ref[early.idx[j]] -= early.val[j] / 3.0f;
  std::vector<float> sum(n, 0.0f);
  Outbox r4;
  for (int w : {0, 1}) {
    SparsePush p = RandomPush(rng, n, 6);
    for (size_t j = 0; j < p.idx.size(); ++j) sum[p.idx[j]] += p.val[j];
    s->OnPush(w, 4, p.idx, p.val, false, &r4);
  }
  for (uint32_t i = 0; i < n; ++i) ref[i] -= sum[i] / 3.0f;
  ASSERT_EQ(r4.size(), 3u);
  for (const Reply& r : r4) {
    EXPECT_EQ(r.dense, r.worker == 2);
    if (r.worker == 2) {
      std::vector<float> whole(s->weights().begin(), s->weights().end());
      EXPECT_EQ(r.buffer->values, whole);
    }
  }
  for (uint32_t i = 0; i < n; ++i) EXPECT_NEAR(s->weights()[i], ref[i], 1e-5f) << i;
  // Round 5 waits for worker 2 again.
  Outbox r5;
  for (int w : {0, 1}) {
    SparsePush p = RandomPush(rng, n, 6);
    s->OnPush(w, 5, p.idx, p.val, false, &r5);
  }
  EXPECT_TRUE(r5.empty());
  SparsePush last = RandomPush(rng, n, 6);
  s->OnPush(2, 5, last.idx, last.val, false, &r5);
  ASSERT_EQ(r5.size(), 3u);
  for (const Reply& r : r5) EXPECT_FALSE(r.dense);
}

TEST(ServerShardTest, BspJoinAtTheCurrentRoundCountsAtOnce) {
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, std::vector<float>(4, 0.0f));
  Outbox out;
  s->OnWorkerDead(1, &out);
  s->OnWorkerRejoined(1);
  s->OnJoin(1, 0, &out);  // round 0 is being aggregated: counted now
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  out.clear();
  PushOne(s.get(), 0, 0, 1, 2.0f, &out);
  EXPECT_TRUE(out.empty());  // waits for worker 1
  PushOne(s.get(), 1, 0, 1, 2.0f, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(s->weights()[1], -2.0f);
  out.clear();
  s->OnJoin(1, 0, &out);  // repeated JOIN: acknowledged again, nothing else
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  EXPECT_EQ(s->stats().rejoins, 1u);
}

TEST(ServerShardTest, BspJoinRetryMovesAnUnpushedJoinerToTheLaterRound) {
  // Worker 1 died and rejoins; this server accepted its join round 1, another refused it, so it
  // retries at round 3. Reference: a dense replay of exactly the pushes each round must count.
  const uint32_t n = 8;
  auto s = ZeroBsp(2, n);
  std::vector<float> ref(n, 0.0f);
  auto push = [&](int w, uint64_t round, uint32_t i, float v, Outbox* out) {
    PushOne(s.get(), w, round, i, v, out);
  };
  Outbox out;
  s->OnWorkerDead(1, &out);
  push(0, 0, 0, 1.0f, &out);  // round 0 without worker 1
  ref[0] -= 1.0f;
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  s->OnWorkerRejoined(1);
  s->OnJoin(1, 1, &out);  // the first attempt: round 1 is being aggregated, counted at once
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  out.clear();
  push(0, 1, 2, 4.0f, &out);
  EXPECT_TRUE(out.empty());  // round 1 now waits for worker 1
  EXPECT_EQ(s->stats().rejoins, 1u);

  s->OnJoin(1, 3, &out);  // the retry: uncounted, so round 1 completes with worker 0 alone
  ref[2] -= 4.0f;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  EXPECT_EQ(out[0].round, 3u);
  EXPECT_EQ(out[1].type, ReplyType::kUpdate);
  EXPECT_EQ(out[1].worker, 0);
  EXPECT_EQ(out[1].round, 1u);
  EXPECT_EQ(s->stats().rejoins, 0u);
  out.clear();
  s->OnJoin(1, 1, &out);  // the first attempt's resend, arriving late: refused as too late
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_JOIN_TOO_LATE);
  out.clear();
  s->OnJoin(1, 2, &out);  // an older attempt than the pending one (round 3): ignored, no reply
  EXPECT_TRUE(out.empty());
  push(1, 1, 5, 9.0f, &out);  // round 1 is no longer its to push
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_UNKNOWN_ROUND);
  out.clear();

  push(0, 2, 3, 2.0f, &out);  // round 2 without worker 1
  ref[3] -= 2.0f;
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  push(0, 3, 4, 6.0f, &out);
  EXPECT_TRUE(out.empty());  // round 3 waits for the joiner
  push(1, 3, 4, 2.0f, &out);
  ref[4] -= (6.0f + 2.0f) / 2.0f;
  ASSERT_EQ(out.size(), 2u);
  for (const Reply& r : out) EXPECT_EQ(r.dense, r.worker == 1);  // the joiner gets the shard
  EXPECT_EQ(s->stats().rejoins, 1u);
  out.clear();
  s->OnJoin(1, 5, &out);  // after its first push a JOIN changes nothing
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  out.clear();
  push(0, 4, 1, 1.0f, &out);
  EXPECT_TRUE(out.empty());  // still counted: round 4 waits for it
  push(1, 4, 1, 3.0f, &out);
  ref[1] -= 2.0f;
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> w(s->weights().begin(), s->weights().end());
  EXPECT_EQ(w, ref);  // every value is exact in binary: equality, not tolerance
}

// Every worker died and rejoined, each counted from a round past the server's (a few rounds
// ahead, as PULL_DENSE + margin makes it): nobody will push the rounds in between, so they pass
// empty at the earliest join round, and training goes on from there. Reference: a dense replay of
// exactly the pushes each counted round holds (every value exact in binary).
TEST(ServerShardTest, BspRoundsNobodyWillPushPassEmptyUpToTheEarliestJoin) {
  const uint32_t n = 8;
  auto s = ZeroBsp(3, n);
  std::vector<float> ref(n, 0.0f);
  Outbox out;
  for (int w = 0; w < 3; ++w) PushOne(s.get(), w, 0, static_cast<uint32_t>(w), 3.0f, &out);
  for (uint32_t i = 0; i < 3; ++i) ref[i] -= 1.0f;
  ASSERT_EQ(out.size(), 3u);
  out.clear();
  EXPECT_FALSE(s->rounds()->IdleUntil().has_value());  // live workers push round 1
  PushOne(s.get(), 0, 1, 5, 4.0f,
          &out);  // worker 0 pushed round 1 before it died: round 1 completes with it
  for (int w = 0; w < 3; ++w) s->OnWorkerDead(w, &out);
  ref[5] -= 4.0f;
  EXPECT_TRUE(out.empty());  // nobody live to answer
  EXPECT_EQ(s->round(), 2u);
  EXPECT_FALSE(s->rounds()->IdleUntil().has_value());  // nobody waits to be counted
  s->rounds()->PassIdleRounds(&out);                   // a no-op then
  EXPECT_EQ(s->round(), 2u);

  for (int w = 0; w < 3; ++w) s->OnWorkerRejoined(w);
  s->OnJoin(1, 5, &out);
  s->OnJoin(0, 4, &out);
  ASSERT_EQ(out.size(), 2u);  // two JOIN_ACKs, nothing counted yet
  out.clear();
  PushOne(s.get(), 0, 4, 6, 2.0f, &out);  // held until round 4
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(s->rounds()->IdleUntil().has_value());
  EXPECT_EQ(*s->rounds()->IdleUntil(), 4u);
  s->rounds()->PassIdleRounds(
      &out);                  // rounds 2 and 3 pass; worker 0 counted at 4, its held push with it
  EXPECT_EQ(s->round(), 5u);  // round 4 had only worker 0 to wait for
  ref[6] -= 2.0f;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 0);
  EXPECT_EQ(out[0].round, 4u);
  EXPECT_TRUE(out[0].dense);  // a joiner's first UPDATE: the whole shard
  out.clear();
  EXPECT_EQ(s->stats().idle_rounds, 2u);
  EXPECT_EQ(s->stats().rounds_completed, 3u);  // 0, 1 and 4
  EXPECT_FALSE(s->rounds()->IdleUntil().has_value());
  s->OnJoin(2, 5, &out);  // joins the round the server is at: counted at once
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  PushOne(s.get(), 0, 5, 7, 1.0f, &out);
  PushOne(s.get(), 2, 5, 7, 5.0f, &out);
  EXPECT_TRUE(out.empty());  // round 5 waits for worker 1, counted from it
  PushOne(s.get(), 1, 5, 7, 3.0f, &out);
  ref[7] -= 3.0f;
  ASSERT_EQ(out.size(), 3u);
  for (const Reply& r : out) EXPECT_EQ(r.dense, r.worker != 0);  // 1 and 2 joined at 5
  std::vector<float> w(s->weights().begin(), s->weights().end());
  EXPECT_EQ(w, ref);
}

// A restored shard whose workers all died before its resync finished has nobody to wait for: the
// resync ends when a rejoined worker is to be counted, even at the restored round itself.
TEST(ServerShardTest, BspResyncWithNoLiveWorkerEndsAtTheJoinRound) {
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, std::vector<float>(4, 0.0f));
  ASSERT_TRUE(s->Restore(7, {1.0f, 2.0f, 3.0f, 4.0f}).ok());
  EXPECT_TRUE(s->rounds()->resyncing());
  Outbox out;
  for (int w = 0; w < 2; ++w) s->OnWorkerDead(w, &out);
  s->OnWorkerRejoined(0);
  s->OnJoin(0, 7, &out);
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  ASSERT_TRUE(s->rounds()->IdleUntil().has_value());
  EXPECT_EQ(*s->rounds()->IdleUntil(), 7u);
  s->rounds()->PassIdleRounds(&out);
  EXPECT_FALSE(s->rounds()->resyncing());
  EXPECT_EQ(s->stats().idle_rounds, 0u);
  std::vector<uint32_t> idx = {0};
  std::vector<float> val = {1.0f};
  s->OnPush(0, 7, idx, val, false, &out);  // counted at once, no longer held by a resync
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].round, 7u);
  EXPECT_TRUE(out[0].dense);
  EXPECT_FLOAT_EQ(s->weights()[0], 0.0f);
}

// Only BSP has rounds: its shard is its own RoundShard; ASP and SSP have none, and report round 0.
TEST(ServerShardTest, OnlyBspHasARoundShard) {
  for (Consistency c : {Consistency::kBsp, Consistency::kAsp, Consistency::kSsp}) {
    ShardServerOptions o;
    o.consistency = c;
    auto s = Make(o, std::vector<float>(4, 0.0f));
    const ShardServer& view = *s;
    EXPECT_EQ(s->rounds() != nullptr, c == Consistency::kBsp) << ConsistencyName(c);
    EXPECT_EQ(view.rounds(), s->rounds()) << ConsistencyName(c);
    EXPECT_EQ(s->round(), 0u) << ConsistencyName(c);
  }
}

TEST(ServerShardTest, AspRejoinedWorkerContinuesPastTheSlowestClock) {
  auto s = Make({.num_workers = 2, .consistency = Consistency::kAsp, .async_scale = 1.0f},
                std::vector<float>(4, 0.0f));
  Outbox out;
  PushOne(s.get(), 1, 0, 3, 1.0f, &out);
  s->OnWorkerDead(1, &out);
  for (uint64_t r = 0; r < 5; ++r) PushOne(s.get(), 0, r, 3, 1.0f, &out);
  out.clear();
  s->OnWorkerRejoined(1);
  s->OnPullDense(1, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].round, 5u);  // worker 0's clock
  out.clear();
  s->OnJoin(1, 7, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  out.clear();
  PushOne(s.get(), 1, 7, 3, 1.0f, &out);
  EXPECT_FLOAT_EQ(s->weights()[3], -7.0f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].dense);  // the first reply after a rejoin resynchronizes the replica
  out.clear();
  PushOne(s.get(), 1, 6, 3, 1.0f, &out);  // below its join round: a replay, not applied
  EXPECT_FLOAT_EQ(s->weights()[3], -7.0f);
  EXPECT_EQ(s->stats().rejoins, 1u);
}

TEST(ServerShardTest, BspDensePushesAreMomentumSgdOnTheAverage) {
  const uint32_t n = 6;
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, Iota(n));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1, 0, 1, 0, -1, 2};
  Outbox out;
  s->OnPush(0, 0, {}, a, true, &out);
  s->OnPush(1, 0, {}, b, true, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].dense);
  for (uint32_t i = 0; i < n; ++i) {
    const float want = Iota(n)[i] - (a[i] + b[i]) / 2.0f;
    EXPECT_FLOAT_EQ(s->weights()[i], want);
    EXPECT_FLOAT_EQ(out[0].buffer->values[i], want);
  }
}

TEST(ServerShardTest, TwoWayCompressionMatchesAResidualTopkReference) {
  const uint32_t n = 1000, k = 10;
  ShardServerOptions o;
  o.num_workers = 2;
  o.server_compressor = Compressor::kTopk;
  o.server_density = 0.01;  // k' = 10
  auto s = Make(o, std::vector<float>(n, 0.0f));
  std::vector<float> w(n, 0.0f), e(n, 0.0f);  // reference weights and server residual
  std::mt19937 rng(3);
  for (uint64_t round = 0; round < 6; ++round) {
    Outbox out;
    std::vector<float> sum(n, 0.0f);
    std::set<uint32_t> uni;
    for (int wk = 0; wk < 2; ++wk) {
      SparsePush p = RandomPush(rng, n, 50);
      for (size_t j = 0; j < p.idx.size(); ++j) {
        sum[p.idx[j]] += p.val[j];
        uni.insert(p.idx[j]);
      }
      s->OnPush(wk, round, p.idx, p.val, false, &out);
    }
    for (uint32_t i : uni) e[i] += sum[i] / 2.0f;
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return std::abs(e[a]) > std::abs(e[b]); });
    std::vector<uint32_t> sel(order.begin(), order.begin() + k);
    std::sort(sel.begin(), sel.end());
    for (uint32_t i : sel) {
      w[i] -= e[i];
      e[i] = 0.0f;
    }
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].buffer->indices, sel) << "round " << round;
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(s->weights()[i], w[i]) << i;
  }
}

// Two finite pushes whose sum overflows make the server's residual non-finite: the server-side
// selection fails, which is counted (and logged) and leaves the weights alone; the round still
// completes with an empty reply to every worker.
TEST(ServerShardTest, TwoWayCompressionCountsAFailedSelection) {
  auto s = Make({.num_workers = 2, .server_compressor = Compressor::kTopk, .server_density = 0.1},
                std::vector<float>(20, 1.0f));
  Outbox out;
  PushOne(s.get(), 0, 0, 4, 3e38f, &out);
  PushOne(s.get(), 1, 0, 4, 3e38f, &out);  // (3e38 + 3e38) / 2 overflows in float
  EXPECT_EQ(s->stats().selection_failures, 1u);
  EXPECT_EQ(s->stats().rounds_completed, 1u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].buffer->indices.empty());
  for (float v : s->weights()) EXPECT_EQ(v, 1.0f);
}

// A flood of PULL_DENSE gets one whole-shard reply per worker in flight: while the first DENSE's
// buffer is held (by ZeroMQ, here by the test), further requests are dropped and counted; once it
// is released the next request is answered, with the current weights.
TEST(ServerShardTest, OneDensePerWorkerInFlight) {
  ShardServerOptions o;
  o.num_workers = 2;
  auto s = Make(o, Iota(1000));
  Outbox first;
  s->OnPullDense(0, &first);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].type, ReplyType::kDense);
  for (int i = 0; i < 100; ++i) {
    Outbox more;
    s->OnPullDense(0, &more);
    EXPECT_TRUE(more.empty());
  }
  EXPECT_EQ(s->stats().dense_pulls_dropped, 100u);
  Outbox other;
  s->OnPullDense(1, &other);  // another worker is not held back
  EXPECT_EQ(other.size(), 1u);
  first.clear();  // ZeroMQ let go of the first reply
  Outbox again;
  s->OnPullDense(0, &again);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].buffer->values, Iota(1000));
  EXPECT_EQ(s->stats().dense_pulls_dropped, 100u);
}

TEST(ServerShardTest, AspAppliesAtOnceAndRepliesWithPerWorkerDirtySets) {
  const uint32_t n = 50;
  ShardServerOptions o;
  o.num_workers = 2;
  o.consistency = Consistency::kAsp;
  auto s = Make(o, std::vector<float>(n, 0.0f));
  Outbox out;
  std::vector<uint32_t> i0 = {1, 3}, i1 = {3, 7};
  std::vector<float> v0 = {2.0f, 4.0f}, v1 = {6.0f, 8.0f};
  s->OnPush(0, 0, i0, v0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 0);
  EXPECT_EQ(out[0].buffer->indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(out[0].buffer->values, (std::vector<float>{-1.0f, -2.0f}));  // scale 1/2
  out.clear();
  s->OnPush(1, 0, i1, v1, false, &out);
  ASSERT_EQ(out.size(), 1u);
  // Worker 1 has not heard of worker 0's change at 1 yet: dirty set {1, 3, 7}.
  EXPECT_EQ(out[0].buffer->indices, (std::vector<uint32_t>{1, 3, 7}));
  EXPECT_EQ(out[0].buffer->values, (std::vector<float>{-1.0f, -5.0f, -4.0f}));
  out.clear();
  EXPECT_EQ(s->stats().reply_pairs_sum, 2u + 3u);  // the two released replies
  s->OnPush(0, 0, i0, v0, false, &out);            // replay: answered, not applied
  EXPECT_FLOAT_EQ(s->weights()[1], -1.0f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].buffer->indices, (std::vector<uint32_t>{3, 7}));
  EXPECT_EQ(s->stats().reply_pairs_sum, 5u);  // an answer to a replay is not counted
}

TEST(ServerShardTest, AspConservesEveryPushedValue) {
  const uint32_t n = 300, workers = 4;
  ShardServerOptions o;
  o.num_workers = workers;
  o.consistency = Consistency::kAsp;
  o.async_scale = 0.5f;
  auto s = Make(o, std::vector<float>(n, 0.0f));
  std::mt19937 rng(11);
  std::vector<double> ref(n, 0.0);
  std::vector<uint64_t> next(workers, 0);
  for (int step = 0; step < 200; ++step) {
    const int w = static_cast<int>(rng() % workers);
    SparsePush p = RandomPush(rng, n, 1 + rng() % 20);
    for (size_t j = 0; j < p.idx.size(); ++j) ref[p.idx[j]] -= 0.5 * p.val[j];
    Outbox out;
    s->OnPush(w, next[w]++, p.idx, p.val, false, &out);
    ASSERT_EQ(out.size(), 1u);
  }
  for (uint32_t i = 0; i < n; ++i) EXPECT_NEAR(s->weights()[i], ref[i], 1e-4) << i;
  EXPECT_EQ(s->stats().pushes_applied, 200u);
}

// The contract a worker relies on: applying each UPDATE it gets to its replica makes the replica
// equal the shard's weights at the moment the reply was produced, at every index. Exercised with
// random pushes of all sizes (dirty lists that turn into dense replies past half the shard),
// replays, a dense push, and for SSP held replies; the reference is the shard itself, compared
// element by element.
TEST(ServerShardTest, AsyncRepliesKeepEveryReplicaEqualToTheShard) {
  const uint32_t n = 64, workers = 3;
  for (Consistency c : {Consistency::kAsp, Consistency::kSsp}) {
    ShardServerOptions o;
    o.num_workers = workers;
    o.consistency = c;
    o.staleness = 1;
    auto s = Make(o, Iota(n));
    std::vector<std::vector<float>> replica(workers, Iota(n));
    std::mt19937 rng(c == Consistency::kAsp ? 3 : 4);
    std::vector<uint64_t> next(workers, 0);
    std::vector<bool> blocked(workers, false);
    int dense_replies = 0;
    auto deliver = [&](const Outbox& out) {
      for (const Reply& r : out) {
        ASSERT_EQ(r.type, ReplyType::kUpdate);
        std::vector<float>& rep = replica[r.worker];
        if (r.dense) {
          ASSERT_EQ(r.buffer->values.size(), n);
          rep = r.buffer->values;
          ++dense_replies;
        } else {
          ASSERT_TRUE(std::is_sorted(r.buffer->indices.begin(), r.buffer->indices.end()));
          for (size_t j = 0; j < r.buffer->indices.size(); ++j)
            rep[r.buffer->indices[j]] = r.buffer->values[j];
        }
        blocked[r.worker] = false;
        for (uint32_t i = 0; i < n; ++i) {
          ASSERT_EQ(rep[i], s->weights()[i]) << "worker " << r.worker << " index " << i;
        }
      }
    };
    for (int step = 0; step < 600; ++step) {
      const int w = RandomReadyWorker(blocked, rng);
      ASSERT_GE(w, 0) << "deadlock";
      Outbox out;
      blocked[w] = true;
      if (step == 300) {
        std::vector<float> all(n, 0.25f);
        s->OnPush(w, next[w]++, {}, all, true, &out);
      } else if (step % 97 == 0 && next[w] > 0) {
        SparsePush p = RandomPush(rng, n, 3);
        s->OnPush(w, next[w] - 1, p.idx, p.val, false, &out);  // a replay: answered, not applied
      } else {
        // Mostly small pushes, sometimes most of the shard.
        const uint32_t k = rng() % 8 == 0 ? 20 + rng() % 40 : 1 + rng() % 6;
        SparsePush p = RandomPush(rng, n, k);
        s->OnPush(w, next[w]++, p.idx, p.val, false, &out);
      }
      ASSERT_NO_FATAL_FAILURE(deliver(out));
    }
    EXPECT_GT(dense_replies, 0);  // the dense paths ran
  }
}

TEST(ServerShardTest, SspHoldsWorkersAheadOfTheBound) {
  auto s = Make({.num_workers = 2, .consistency = Consistency::kSsp, .staleness = 1},
                std::vector<float>(4, 0.0f));
  Outbox out;
  PushOne(s.get(), 0, 0, 0, 1.0f, &out);  // clock 1 vs 0: lead 1 <= 1
  ASSERT_EQ(out.size(), 1u);
  out.clear();
  PushOne(s.get(), 0, 1, 0, 1.0f, &out);  // clock 2 vs 0: held
  EXPECT_TRUE(out.empty());
  PushOne(s.get(), 1, 0, 0, 1.0f, &out);  // worker 1 reaches clock 1: both released
  ASSERT_EQ(out.size(), 2u);
  std::set<int> got = {out[0].worker, out[1].worker};
  EXPECT_EQ(got, (std::set<int>{0, 1}));
  EXPECT_LE(s->stats().max_staleness, 1);
  // Leads of the released replies: 1 (first push), then 1 (worker 0) and 0 (worker 1).
  EXPECT_EQ(s->stats().released_replies, 3u);
  EXPECT_EQ(s->stats().staleness_sum, 2u);
  out.clear();
  PushOne(s.get(), 0, 2, 0, 1.0f, &out);  // clock 3 vs 1: held until worker 1 dies
  EXPECT_TRUE(out.empty());
  s->OnWorkerDead(1, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 0);
}

TEST(ServerShardTest, RandomizedSspNeverExceedsItsBound) {
  const uint32_t workers = 4;
  for (int bound : {0, 1, 3}) {
    ShardServerOptions o;
    o.num_workers = workers;
    o.consistency = Consistency::kSsp;
    o.staleness = bound;
    auto s = Make(o, std::vector<float>(16, 0.0f));
    std::mt19937 rng(bound + 5);
    std::vector<uint64_t> next(workers, 0);
    std::vector<bool> blocked(workers, false);
    std::vector<float> one = {1.0f};
    for (int step = 0; step < 400; ++step) {
      const int w = RandomReadyWorker(blocked, rng);
      ASSERT_GE(w, 0) << "deadlock";
      std::vector<uint32_t> idx = {static_cast<uint32_t>(rng() % 16)};
      Outbox out;
      blocked[w] = true;
      s->OnPush(w, next[w]++, idx, one, false, &out);
      for (const Reply& r : out) blocked[r.worker] = false;
      // Independent check: every running worker is within the bound of the slowest.
      uint64_t lo = UINT64_MAX;
      for (uint32_t u = 0; u < workers; ++u) lo = std::min(lo, next[u]);
      for (uint32_t u = 0; u < workers; ++u) {
        if (!blocked[u]) {
          EXPECT_LE(next[u] - lo, static_cast<uint64_t>(bound));
        }
      }
    }
    EXPECT_LE(s->stats().max_staleness, bound);
  }
}

TEST(ServerShardTest, PullDenseReturnsTheWholeShard) {
  ShardServerOptions o;
  auto s = Make(o, Iota(9));
  Outbox out;
  s->OnPullDense(0, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kDense);
  EXPECT_EQ(out[0].buffer->values, Iota(9));
}

TEST(ServerShardTest, BadOptionsAreRejected) {
  ShardServerOptions o;
  o.num_workers = 0;
  EXPECT_FALSE(ShardServer::Create(o, Iota(3)).ok());
  o.num_workers = 1;
  EXPECT_FALSE(ShardServer::Create(o, {}).ok());
  o.staleness = -1;
  EXPECT_FALSE(ShardServer::Create(o, Iota(3)).ok());
  o.staleness = 0;
  o.server_compressor = Compressor::kTopk;
  o.server_density = 0;
  EXPECT_FALSE(ShardServer::Create(o, Iota(3)).ok());
}

}  // namespace
}  // namespace sieve

namespace sieve {
namespace {

// A server started without a model: refuses pushes and pulls until worker 0's INIT, takes its
// weights exactly, then behaves as a server created with them (same BSP round, bitwise).
TEST(ServerShardInitTest, AwaitsWorkerZerosWeightsThenRunsAsIfCreatedWithThem) {
  const uint32_t n = 300;
  ShardServerOptions o;
  o.num_workers = 2;
  o.await_initial_weights = true;
  auto s = Make(o, std::vector<float>(n, 0.0f));
  auto ref = Make(ShardServerOptions{.num_workers = 2}, Iota(n));
  Outbox out;
  const std::vector<uint32_t> idx = {3, 50, 299};
  const std::vector<float> val = {1.0f, -2.0f, 0.5f};
  s->OnPush(0, 0, idx, val, false, &out);
  s->OnPullDense(1, &out);
  ASSERT_EQ(out.size(), 2u);
  for (const Reply& r : out) EXPECT_EQ(r.code, pb::ERROR_NOT_INITIALIZED);
  EXPECT_EQ(s->stats().pushes_applied, 0u);
  out.clear();
  // Worker 1 may not initialize; a wrong length is refused; neither changes anything.
  s->OnInit(1, Iota(n), &out);
  s->OnInit(0, std::vector<float>(n - 1, 1.0f), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].code, pb::ERROR_NOT_INITIALIZED);
  EXPECT_EQ(out[1].code, pb::ERROR_BAD_COUNT);
  EXPECT_TRUE(s->awaiting_initial_weights());
  out.clear();
  s->OnInit(0, Iota(n), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kInitAck);
  EXPECT_FALSE(s->awaiting_initial_weights());
  // A repeated INIT (a resend, or another offer) is acknowledged and changes nothing.
  out.clear();
  s->OnInit(0, std::vector<float>(n, 7.0f), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kInitAck);
  const std::vector<float> iota = Iota(n);
  EXPECT_TRUE(std::equal(s->weights().begin(), s->weights().end(), iota.begin()));
  // One BSP round on both: equal weights, bitwise.
  Outbox a, b;
  for (int w = 0; w < 2; ++w) {
    s->OnPush(w, 0, idx, val, false, &a);
    ref->OnPush(w, 0, idx, val, false, &b);
  }
  EXPECT_EQ(s->stats().rounds_completed, 1u);
  EXPECT_TRUE(std::equal(s->weights().begin(), s->weights().end(), ref->weights().begin()));
}

// A server with its own initial weights keeps them: INIT is acknowledged and ignored.
TEST(ServerShardInitTest, ServerWithItsOwnInitIgnoresInit) {
  const uint32_t n = 64;
  auto s = Make(ShardServerOptions{}, Iota(n));
  Outbox out;
  s->OnInit(0, std::vector<float>(n, 3.0f), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kInitAck);
  const std::vector<float> iota = Iota(n);
  EXPECT_TRUE(std::equal(s->weights().begin(), s->weights().end(), iota.begin()));
}

// A restored shard (a restarted model-less server with a checkpoint) no longer waits for INIT.
TEST(ServerShardInitTest, RestoreEndsTheWaitForInit) {
  const uint32_t n = 32;
  ShardServerOptions o;
  o.await_initial_weights = true;
  auto s = Make(o, std::vector<float>(n, 0.0f));
  ASSERT_TRUE(s->Restore(5, Iota(n)).ok());
  EXPECT_FALSE(s->awaiting_initial_weights());
  Outbox out;
  s->OnInit(0, std::vector<float>(n, 3.0f), &out);
  const std::vector<float> iota = Iota(n);
  EXPECT_TRUE(std::equal(s->weights().begin(), s->weights().end(), iota.begin()));
}

}  // namespace
}  // namespace sieve
