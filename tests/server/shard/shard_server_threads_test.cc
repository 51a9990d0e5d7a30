// ShardServer with options.threads > 1 (sieve-server --server_threads): the same pushes give
// bitwise the same weights, the same replies (every part, in the same order, with the same
// content) and the same stats as one thread, which is the independent reference; a brute-force
// dense replay of the BSP rounds is a second one. Small rounds are split too
// (parallel_min_pairs lowered), so the split paths run on every round; one test keeps the
// default threshold with rounds large enough to cross it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "server/shard/shard_server.h"

namespace sieve {
namespace {

// One event of a script, replayed the same way on every server.
struct Event {
  enum Kind { kPush, kDead } kind = kPush;
  int worker = 0;
  uint64_t round = 0;
  bool dense = false;
  std::vector<uint32_t> idx;
  std::vector<float> val;
};

// A reply as it was when it was emitted (a part: its slice, captured in the part sink).
struct Seen {
  int worker = 0;
  ReplyType type = ReplyType::kUpdate;
  uint64_t round = 0;
  bool dense = false;
  uint32_t part = 0, parts = 1;
  size_t begin = 0, end = 0;
  std::vector<uint32_t> idx;
  std::vector<float> val;
};

struct Trace {
  std::vector<Seen> replies;
  std::vector<float> weights;
  ShardServerStats stats;
  uint64_t parallel_regions = 0;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// k distinct ascending indices of [0, n): about half from a hot range [0, hot), so pushes of
// different workers overlap; normal values (so a different summation order changes bits).
void RandomSparse(std::mt19937& rng, uint32_t n, uint32_t hot, uint32_t k, Event* e) {
  std::uniform_int_distribution<uint32_t> any(0, n - 1), hot_pick(0, hot - 1);
  std::vector<uint32_t> idx;
  for (uint32_t j = 0; j < k; ++j) idx.push_back(rng() % 2 ? hot_pick(rng) : any(rng));
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::normal_distribution<float> v(0.0f, 1.0f);
  e->idx = idx;
  e->val.clear();
  for (size_t j = 0; j < idx.size(); ++j) e->val.push_back(v(rng));
}

void RandomDense(std::mt19937& rng, uint32_t n, Event* e) {
  std::normal_distribution<float> v(0.0f, 1.0f);
  e->dense = true;
  e->idx.clear();
  e->val.resize(n);
  for (float& x : e->val) x = v(rng);
}

std::vector<float> Initial(uint32_t n) {
  std::vector<float> w(n);
  for (uint32_t i = 0; i < n; ++i) w[i] = 0.001f * static_cast<float>(i % 1000) - 0.5f;
  return w;
}

// BSP, `rounds` rounds of W = 4 workers pushing in a random order each round: random k (every
// 7th round small, so its reply is not split), overlapping indices, a dense push in a few
// rounds, and worker 3 declared dead before round `death` (N = 3 from then on).
std::vector<Event> BspScript(uint32_t n, uint32_t rounds, uint32_t kmax, uint32_t death,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Event> script;
  for (uint32_t r = 0; r < rounds; ++r) {
    if (r == death) {
      Event d;
      d.kind = Event::kDead;
      d.worker = 3;
      script.push_back(d);
    }
    std::vector<int> order = {0, 1, 2, 3};
    if (r >= death) order.pop_back();
    std::shuffle(order.begin(), order.end(), rng);
    const bool dense_round = r % 33 == 13;
    for (int w : order) {
      Event e;
      e.worker = w;
      e.round = r;
      if (dense_round && w == order[1]) {
        RandomDense(rng, n, &e);
      } else {
        const uint32_t k = r % 7 == 3 ? rng() % 150 : rng() % kmax;
        RandomSparse(rng, n, std::max<uint32_t>(n / 10, 1), k, &e);
      }
      script.push_back(std::move(e));
    }
  }
  return script;
}

// Replays `script` and records every reply when it is emitted; checks that a part's slice is
// never changed after it was handed out.
Trace Replay(ShardServerOptions o, uint32_t n, const std::vector<Event>& script) {
  auto made = ShardServer::Create(o, Initial(n));
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  ShardServer& s = **made;
  Trace trace;
  std::vector<std::pair<Seen, std::shared_ptr<const ReplyBuffer>>> parts;  // of this event
  auto record = [&](const Reply& r) {
    Seen seen{r.worker, r.type, r.round, r.dense, r.part, r.parts, r.begin, r.end, {}, {}};
    if (r.buffer) {
      const ReplyBuffer& b = *r.buffer;
      if (r.parts > 1) {
        seen.idx.assign(b.indices.begin() + r.begin, b.indices.begin() + r.end);
        seen.val.assign(b.values.begin() + r.begin, b.values.begin() + r.end);
        parts.emplace_back(seen, r.buffer);
      } else {
        seen.idx = b.indices;
        seen.val = b.values;
      }
    }
    trace.replies.push_back(std::move(seen));
  };
  s.set_part_sink([&](Outbox* out) {
    for (const Reply& r : *out) record(r);
    out->clear();
  });
  for (const Event& e : script) {
    Outbox out;
    parts.clear();
    if (e.kind == Event::kDead) {
      s.OnWorkerDead(e.worker, &out);
    } else {
      s.OnPush(e.worker, e.round, e.idx, e.val, e.dense, &out);
    }
    for (const Reply& r : out) record(r);
    for (const auto& [seen, buf] : parts) {  // what went out early is what the buffer holds now
      std::vector<float> now(buf->values.begin() + seen.begin, buf->values.begin() + seen.end);
      EXPECT_TRUE(SameBits(now, seen.val)) << "a part changed after it was sent";
      EXPECT_TRUE(std::equal(seen.idx.begin(), seen.idx.end(), buf->indices.begin() + seen.begin));
    }
  }
  trace.weights.assign(s.weights().begin(), s.weights().end());
  trace.stats = s.stats();
  trace.parallel_regions = s.parallel_regions();
  return trace;
}

void ExpectSameTrace(const Trace& ref, const Trace& got, const std::string& what) {
  ASSERT_EQ(ref.replies.size(), got.replies.size()) << what;
  for (size_t j = 0; j < ref.replies.size(); ++j) {
    const Seen& a = ref.replies[j];
    const Seen& b = got.replies[j];
    ASSERT_EQ(a.worker, b.worker) << what << " reply " << j;
    ASSERT_EQ(a.type, b.type) << what << " reply " << j;
    ASSERT_EQ(a.round, b.round) << what << " reply " << j;
    ASSERT_EQ(a.dense, b.dense) << what << " reply " << j;
    ASSERT_EQ(a.part, b.part) << what << " reply " << j;
    ASSERT_EQ(a.parts, b.parts) << what << " reply " << j;
    ASSERT_EQ(a.begin, b.begin) << what << " reply " << j;
    ASSERT_EQ(a.end, b.end) << what << " reply " << j;
    ASSERT_EQ(a.idx, b.idx) << what << " reply " << j;
    ASSERT_TRUE(SameBits(a.val, b.val)) << what << " reply " << j << " values differ";
  }
  EXPECT_TRUE(SameBits(ref.weights, got.weights)) << what << ": weights differ";
  EXPECT_EQ(std::bit_cast<uint64_t>(ref.stats.pushed_sum),
            std::bit_cast<uint64_t>(got.stats.pushed_sum))
      << what;
  EXPECT_EQ(ref.stats.pushes_applied, got.stats.pushes_applied) << what;
  EXPECT_EQ(ref.stats.rounds_completed, got.stats.rounds_completed) << what;
  EXPECT_EQ(ref.stats.released_replies, got.stats.released_replies) << what;
  EXPECT_EQ(ref.stats.staleness_sum, got.stats.staleness_sum) << what;
}

// `script` on 2 and 4 threads (splitting some regions) replays like on o.threads = 1.
void ExpectSameOnTwoAndFourThreads(ShardServerOptions o, uint32_t n,
                                   const std::vector<Event>& script) {
  o.threads = 1;
  const Trace ref = Replay(o, n, script);
  for (uint32_t threads : {2u, 4u}) {
    o.threads = threads;
    const Trace got = Replay(o, n, script);
    EXPECT_GT(got.parallel_regions, 0u);
    ExpectSameTrace(ref, got, std::to_string(threads) + " threads");
  }
}

// The brute-force reference of a BSP script: per round, a dense accumulator of the dense pushes
// and a dense array of the sparse pushes' sums (both from 0.0f, in arrival order, as the server
// promises), then w[i] -= a[i]/N. Returns the weights after each round and each round's reply
// (indices, values; dense: the whole shard).
struct OracleRound {
  std::vector<float> weights;
  bool dense = false;
  std::vector<uint32_t> idx;
  std::vector<float> val;
};
std::vector<OracleRound> BspOracle(uint32_t n, const std::vector<Event>& script) {
  std::vector<float> w = Initial(n);
  std::vector<OracleRound> rounds;
  size_t e = 0;
  while (e < script.size()) {
    if (script[e].kind == Event::kDead) {
      ++e;
      continue;
    }
    const uint64_t r = script[e].round;
    std::vector<float> dense_acc(n, 0.0f), sparse_sum(n, 0.0f);
    std::vector<bool> in_union(n, false);
    bool dense = false;
    uint32_t pushes = 0;
    for (; e < script.size() && script[e].kind == Event::kPush && script[e].round == r; ++e) {
      const Event& p = script[e];
      ++pushes;
      if (p.dense) {
        dense = true;
        for (uint32_t i = 0; i < n; ++i) dense_acc[i] += p.val[i];
      } else {
        for (size_t j = 0; j < p.idx.size(); ++j) {
          sparse_sum[p.idx[j]] += p.val[j];
          in_union[p.idx[j]] = true;
        }
      }
    }
    const float count = static_cast<float>(pushes);
    OracleRound out;
    out.dense = dense;
    if (dense) {
      for (uint32_t i = 0; i < n; ++i) {
        float a = dense_acc[i];
        if (in_union[i]) a += sparse_sum[i];
        w[i] -= a / count;
      }
      out.val = w;
    } else {
      for (uint32_t i = 0; i < n; ++i) {
        if (!in_union[i]) continue;
        w[i] -= sparse_sum[i] / count;
        out.idx.push_back(i);
        out.val.push_back(w[i]);
      }
    }
    out.weights = w;
    rounds.push_back(std::move(out));
  }
  return rounds;
}

ShardServerOptions BspOptions(uint32_t threads, uint64_t min_pairs) {
  ShardServerOptions o;
  o.num_workers = 4;
  o.reply_part_pairs = 900;
  o.threads = threads;
  o.parallel_min_pairs = min_pairs;
  return o;
}

TEST(ServerShardThreadsTest, BspRoundsAreBitwiseTheSameOnTwoThreeAndFourThreads) {
  const uint32_t n = 30000;
  const std::vector<Event> script = BspScript(n, 100, 4000, 70, 11);
  const Trace ref = Replay(BspOptions(1, 64), n, script);
  EXPECT_EQ(ref.parallel_regions, 0u);
  uint32_t split = 0, whole = 0, dense = 0;
  for (const Seen& r : ref.replies) {
    split += r.parts > 1 && r.part == 0 ? 1 : 0;
    whole += r.parts == 1 && !r.dense ? 1 : 0;
    dense += r.dense ? 1 : 0;
  }
  EXPECT_GT(split, 100u);  // the script has split replies, whole ones and dense rounds
  EXPECT_GT(whole, 20u);
  EXPECT_GT(dense, 4u);
  EXPECT_EQ(ref.stats.rounds_completed, 100u);
  for (uint32_t threads : {2u, 3u, 4u}) {
    const Trace got = Replay(BspOptions(threads, 64), n, script);
    EXPECT_GT(got.parallel_regions, 200u) << threads << " threads split no round";
    ExpectSameTrace(ref, got, std::to_string(threads) + " threads");
  }
}

// The dense brute-force replay agrees with the server's weights and replies bit for bit, on one
// thread and on three.
TEST(ServerShardThreadsTest, BspRoundsEqualABruteForceDenseReplay) {
  const uint32_t n = 5000;
  const std::vector<Event> script = BspScript(n, 40, 1500, 30, 5);
  const std::vector<OracleRound> oracle = BspOracle(n, script);
  ASSERT_EQ(oracle.size(), 40u);
  for (uint32_t threads : {1u, 3u}) {
    ShardServerOptions o = BspOptions(threads, 16);
    o.reply_part_pairs = 0;  // whole replies: one per worker per round
    auto made = ShardServer::Create(o, Initial(n));
    ASSERT_TRUE(made.ok());
    ShardServer& s = **made;
    size_t round = 0;
    for (const Event& e : script) {
      Outbox out;
      if (e.kind == Event::kDead) {
        s.OnWorkerDead(e.worker, &out);
        ASSERT_TRUE(out.empty());
        continue;
      }
      s.OnPush(e.worker, e.round, e.idx, e.val, e.dense, &out);
      if (out.empty()) continue;
      const OracleRound& want = oracle[round];
      ASSERT_EQ(out.size(), round >= 30 ? 3u : 4u);
      for (const Reply& r : out) {
        ASSERT_EQ(r.round, round);
        ASSERT_EQ(r.dense, want.dense) << "round " << round;
        ASSERT_EQ(r.buffer->indices, want.idx) << "round " << round;
        ASSERT_TRUE(SameBits(r.buffer->values, want.val)) << "round " << round;
      }
      const std::vector<float> w(s.weights().begin(), s.weights().end());
      ASSERT_TRUE(SameBits(w, want.weights)) << threads << " threads, round " << round;
      ++round;
    }
    EXPECT_EQ(round, 40u);
    if (threads > 1) {
      EXPECT_GT(s.parallel_regions(), 0u);
    }
  }
}

// The default threshold (16384 pairs per thread): rounds of up to ~4 x 30000 pairs cross it, and
// the result is still bitwise that of one thread.
TEST(ServerShardThreadsTest, BspAtTheDefaultThresholdIsBitwiseTheSame) {
  const uint32_t n = 400000;
  const std::vector<Event> script = BspScript(n, 12, 60000, 1000, 17);
  ShardServerOptions o = BspOptions(1, ShardServerOptions{}.parallel_min_pairs);
  o.reply_part_pairs = 32768;
  ExpectSameOnTwoAndFourThreads(o, n, script);
}

TEST(ServerShardThreadsTest, TwoWayCompressionIsBitwiseTheSame) {
  const uint32_t n = 30000;
  const std::vector<Event> script = BspScript(n, 15, 4000, 1000, 23);
  ShardServerOptions o = BspOptions(1, 64);
  o.server_compressor = Compressor::kTopk;
  o.server_density = 0.02;
  ExpectSameOnTwoAndFourThreads(o, n, script);
}

// ASP and SSP(2): 4 workers push 100 rounds each, interleaved at random (a worker pushes again
// once its previous push was answered), with a dense push now and then. Same replies, weights
// and stats as one thread; the weights equal the pushes applied in arrival order.
TEST(ServerShardThreadsTest, AspAndSspAreBitwiseTheSame) {
  const uint32_t n = 30000, workers = 4, rounds = 100;
  for (Consistency c : {Consistency::kAsp, Consistency::kSsp}) {
    ShardServerOptions o;
    o.num_workers = workers;
    o.consistency = c;
    o.staleness = 2;
    o.parallel_min_pairs = 64;
    // The script depends on which pushes were answered: it is made while replaying it on one
    // thread, then replayed as is.
    std::vector<Event> script;
    {
      auto made = ShardServer::Create(o, Initial(n));
      ASSERT_TRUE(made.ok());
      ShardServer& s = **made;
      std::mt19937 rng(c == Consistency::kAsp ? 31 : 32);
      std::vector<uint64_t> next(workers, 0);
      std::vector<bool> answered(workers, true);
      std::vector<float> ref = Initial(n);
      const float scale = 1.0f / static_cast<float>(workers);
      for (;;) {
        std::vector<int> ready;
        for (uint32_t w = 0; w < workers; ++w)
          if (answered[w] && next[w] < rounds) ready.push_back(static_cast<int>(w));
        if (ready.empty()) break;
        Event e;
        e.worker = ready[rng() % ready.size()];
        e.round = next[e.worker]++;
        if (rng() % 40 == 0) {
          RandomDense(rng, n, &e);
          for (uint32_t i = 0; i < n; ++i) ref[i] -= scale * e.val[i];
        } else {
          RandomSparse(rng, n, n / 10, rng() % 4000, &e);
          for (size_t j = 0; j < e.idx.size(); ++j) ref[e.idx[j]] -= scale * e.val[j];
        }
        answered[e.worker] = false;
        Outbox out;
        s.OnPush(e.worker, e.round, e.idx, e.val, e.dense, &out);
        for (const Reply& r : out) answered[r.worker] = true;
        script.push_back(std::move(e));
      }
      ASSERT_EQ(script.size(), workers * rounds);
      const std::vector<float> got(s.weights().begin(), s.weights().end());
      EXPECT_TRUE(SameBits(got, ref)) << "the pushes applied in arrival order";
    }
    const Trace one = Replay(o, n, script);
    for (uint32_t threads : {2u, 3u, 4u}) {
      o.threads = threads;
      const Trace got = Replay(o, n, script);
      EXPECT_GT(got.parallel_regions, 100u);
      ExpectSameTrace(one, got, std::string(ConsistencyName(c)) + " " + std::to_string(threads));
    }
  }
}

TEST(ServerShardThreadsTest, ThreadCountIsValidated) {
  for (uint32_t bad : {0u, ThreadTeam::kMaxThreads + 1}) {
    ShardServerOptions o;
    o.threads = bad;
    auto made = ShardServer::Create(o, Initial(10));
    ASSERT_FALSE(made.ok()) << bad;
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  }
  ShardServerOptions o;
  o.parallel_min_pairs = 0;
  EXPECT_FALSE(ShardServer::Create(o, Initial(10)).ok());
  o = ShardServerOptions{};
  o.threads = 3;
  auto made = ShardServer::Create(o, Initial(10));
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->threads(), 3u);
}

}  // namespace
}  // namespace sieve
