// BspShard's round: merging a round's pushes and completing it (a dense round, two-way
// compression, or the union applied and sent whole or in parts). server/shard/bsp_shard.h.
#include "server/shard/bsp_shard.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "base/prefetch.h"
#include "kernels/selection.h"
#include "proto/codec.h"
#include "server/shard/sorted_merge.h"

namespace sieve {
namespace {

// Position of the first index >= key in an ascending array.
size_t LowerBound(std::span<const uint32_t> v, uint64_t key) {
  return static_cast<size_t>(std::lower_bound(v.begin(), v.end(), key) - v.begin());
}

// The BSP update pass over len pairs of the union: w[i] -= sum/n, and the new value (and with
// kCopyIndex the index) into the reply, software-prefetched.
template <bool kCopyIndex>
void ApplyPairs(const uint32_t* idx, const float* sum, size_t len, float n, float* w,
                uint32_t* out_idx, float* out_val) {
  const size_t ahead = len > kScatterPrefetchDistance ? len - kScatterPrefetchDistance : 0;
  for (size_t j = 0; j < len; ++j) {
    if (j < ahead) PrefetchForWrite(w + idx[j + kScatterPrefetchDistance]);
    const uint32_t i = idx[j];
    w[i] -= sum[j] / n;
    out_val[j] = w[i];
    if constexpr (kCopyIndex) out_idx[j] = i;
  }
}

}  // namespace

BspShard::BspShard(const ShardServerOptions& options, std::vector<float> initial)
    : ShardServer(options, std::move(initial)), workers_(options.num_workers) {
  const size_t n = size();
  if (options.server_compressor != Compressor::kNone) residual_.assign(n, 0.0f);
  const size_t parts = options.threads == 1 ? 1 : size_t{options.threads} * kPartsPerThread;
  union_parts_.resize(parts);
  merge_parts_.resize(parts);
  union_keys_ = {0, n};
  if (options.threads > 1) chunk_done_ = std::make_unique<std::atomic<uint32_t>[]>(kMaxReplyParts);
}

void BspShard::Push(int worker, uint64_t round, std::span<const uint32_t> indices,
                    std::span<const float> values, bool dense, Outbox* out) {
  if (!counts(worker)) {
    if (readmitted(worker) && workers_[worker].join_round >= 0)
      return HoldJoinPush(worker, round, indices, values, dense, out);
    return RejectNotLive(worker, round, out);
  }
  if (resync_) return ResyncPush(worker, round, indices, values, dense, out);
  RoundPush(worker, round, indices, values, dense, out);
}

void BspShard::RoundPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                         std::span<const float> values, bool dense, Outbox* out) {
  const bool backups = options().backup_workers > 0;
  if (round + 1 == round_ && last_reply_ && (!backups || workers_[worker].counted_last)) {
    ++mutable_stats().duplicates;  // the previous round, resent: answer it again
    out->push_back(Reply::Update(worker, round, last_reply_dense_, last_reply_));
    return;
  }
  if (round + 1 == round_ && !last_reply_ && !resync_ &&
      (!backups || workers_[worker].counted_last)) {
    // A copy rebuilt from a snapshot of round_ has no previous reply: the whole shard is what
    // that UPDATE left on the worker (every replica equals the servers' weights after a round).
    ++mutable_stats().duplicates;
    out->push_back(Reply::Update(worker, round, true, CopyOfShard()));
    return;
  }
  if (backups && round < round_ && options().late_pushes == LatePushes::kApply) {
    return LatePush(worker, round, indices, values, dense, out);
  }
  if (backups && round < round_) {  // the round closed without it: never applied
    ++mutable_stats().late_pushes;
    return Reject(worker, round, pb::ERROR_LATE_PUSH,
                  "BSP round " + std::to_string(round) +
                      " closed without this push (backup workers); its values were not applied, "
                      "the server is aggregating round " +
                      std::to_string(round_),
                  out);
  }
  if (round != round_) {
    return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                  "BSP server is aggregating round " + std::to_string(round_) + ", got round " +
                      std::to_string(round),
                  out);
  }
  WorkerState& ws = workers_[worker];
  if (ws.arrived) {  // same round twice: applied once
    ++mutable_stats().duplicates;
    return;
  }
  if (options().ordered_rounds) {
    ws.ordered.Hold(round, dense, indices, values);  // added in rank order at the round's close
  } else {
    Aggregate(indices, values, dense);
  }
  ws.arrived = true;
  ws.unpushed_joiner = false;
  ws.last_applied = static_cast<int64_t>(round);
  MaybeComplete(out);
}

void BspShard::Aggregate(std::span<const uint32_t> indices, std::span<const float> values,
                         bool dense) {
  if (dense) {
    AccumulateDense(values);
  } else {
    MergeIntoUnion(indices, values);
  }
  ++contributions_;
  ++mutable_stats().pushes_applied;
}

Status BspShard::ApplyRound(uint64_t round, std::span<const uint32_t> indices,
                            std::span<const float> values, bool dense, Outbox* out) {
  if (options().backup_workers > 0 || options().server_compressor != Compressor::kNone) {
    return FailedPreconditionError(
        "a round result cannot be applied with backup workers or two-way compression");
  }
  if (round != round_) {
    return FailedPreconditionError("result of round " + std::to_string(round) +
                                   " for a copy at round " + std::to_string(round_));
  }
  if (dense ? values.size() != size() || !indices.empty() : indices.size() != values.size()) {
    return InvalidArgumentError("a round result of " + std::to_string(values.size()) +
                                " values for a shard of " + std::to_string(size()));
  }
  // Whatever this copy held for the round (nothing, unless a resync or a joiner's push) is the
  // primary's business now: the result says how the round ended.
  resync_ = false;
  dense_next_reply_ = false;
  for (WorkerState& ws : workers_) {
    ws.held.held = false;
    ws.ordered.held = false;
  }
  ClearUnion();
  auto buf = pool().Get();
  const std::span<float> shard = mutable_weights();
  if (dense) {
    std::copy(values.begin(), values.end(), shard.begin());
  } else {
    for (size_t j = 0; j < indices.size(); ++j) shard[indices[j]] = values[j];
    buf->indices.assign(indices.begin(), indices.end());
  }
  buf->values.assign(values.begin(), values.end());
  for (uint32_t w = 0; w < options().num_workers; ++w)
    workers_[w].arrived = counts(static_cast<int>(w));
  SendRoundReplies(std::move(buf), dense, false, out);
  return Status::Ok();
}

bool BspShard::SnapshotReady() const {
  // Restored from a checkpoint behind the workers: the round it resumes at is the workers' (the
  // resync), not the checkpoint's, so a copy waits for it.
  if (resync_) return false;
  if (!ByPushes()) return true;  // the open round's result reaches the copy when it completes
  if (contributions_ > 0) return false;
  for (const WorkerState& ws : workers_) {
    if (ws.held.held || ws.join_push.held || ws.ordered.held || ws.arrived) return false;
  }
  return true;
}

ShardSnapshot BspShard::TakeSnapshot() const {
  ShardSnapshot s = ShardServer::TakeSnapshot();
  if (!ByPushes()) return s;
  CHECK(SnapshotReady()) << "a snapshot of BSP round " << round_ << " in progress";
  s.bsp_clocks.assign(workers_.begin(), workers_.end());  // each state's BspWorkerClock
  s.residual = residual_;
  s.pushes_applied = stats().pushes_applied;
  s.pushed_sum = stats().pushed_sum;
  return s;
}

Status BspShard::InstallSnapshot(ShardSnapshot snapshot) {
  if (!snapshot.clocks.empty()) {
    return InvalidArgumentError("a BSP shard's snapshot carries no ASP/SSP clocks");
  }
  const size_t workers = ByPushes() ? workers_.size() : 0;
  const size_t residual = residual_.size();
  if (snapshot.bsp_clocks.size() != workers || snapshot.residual.size() != residual) {
    return InvalidArgumentError(
        "a BSP snapshot with " + std::to_string(snapshot.bsp_clocks.size()) +
        " worker states and a residual of " + std::to_string(snapshot.residual.size()) +
        " values, for a shard that needs " + std::to_string(workers) + " and " +
        std::to_string(residual));
  }
  for (const BspWorkerClock& c : snapshot.bsp_clocks) {
    if (c.last_applied < -1 || c.last_applied >= static_cast<int64_t>(snapshot.round) ||
        c.join_round < -1) {
      return InvalidArgumentError("a BSP snapshot of round " + std::to_string(snapshot.round) +
                                  " with a worker's last applied round " +
                                  std::to_string(c.last_applied));
    }
  }
  SIEVE_RETURN_IF_ERROR(Restore(snapshot.round, std::move(snapshot.weights)));
  resync_ = false;  // the primary's round, not a checkpoint's: nothing to resynchronize
  for (size_t w = 0; w < workers; ++w) {
    BspWorkerClock& clock = workers_[w];
    clock = snapshot.bsp_clocks[w];
  }
  if (residual > 0) residual_ = std::move(snapshot.residual);
  if (workers > 0) {
    mutable_stats().pushes_applied = snapshot.pushes_applied;
    mutable_stats().pushed_sum = snapshot.pushed_sum;
  }
  return Status::Ok();
}

void BspShard::AggregateInRankOrder() {
  for (WorkerState& ws : workers_) {
    if (!ws.ordered.held) continue;
    Aggregate(ws.ordered.indices, ws.ordered.values, ws.ordered.dense);
    ws.ordered.held = false;
  }
}

void BspShard::LatePush(int worker, uint64_t round, std::span<const uint32_t> indices,
                        std::span<const float> values, bool dense, Outbox* out) {
  WorkerState& ws = workers_[worker];
  // Either way acknowledged: the worker keeps the push until then (and sends it again to a new
  // primary after a failover), so a push is never lost with its server nor applied twice.
  out->push_back(Reply::LatePushAck(worker, round));
  if (static_cast<int64_t>(round) <= ws.last_applied) {  // a resend of one applied already
    ++mutable_stats().duplicates;
    return;
  }
  // One more contribution to the round being aggregated; its own round's UPDATE went out.
  Aggregate(indices, values, dense);
  ws.last_applied = static_cast<int64_t>(round);
  ++mutable_stats().late_pushes;
}

void BspShard::AccumulateDense(std::span<const float> values) {
  if (acc_.size() != size()) acc_.assign(size(), 0.0f);  // kept while dense rounds run
  dense_round_ = true;
  float* const acc = acc_.data();
  const uint32_t count = team().ThreadsFor(values.size(), options().parallel_min_pairs);
  PrepareBlockSums(values);
  team().ParallelFor(values.size(), options().parallel_min_pairs,
                     [&](uint32_t t, size_t begin, size_t end) {
                       for (size_t i = begin; i < end; ++i) acc[i] += values[i];
                       SumBlocks(values, t, count);
                     });
  AddBlockSums();
}

size_t BspShard::UnionSize() const {
  size_t m = 0;
  for (uint32_t s = 0; s < union_count_; ++s) m += union_parts_[s].idx.size();
  return m;
}

void BspShard::ClearUnion() {
  for (uint32_t s = 0; s < union_count_; ++s) {
    union_parts_[s].idx.clear();
    union_parts_[s].sum.clear();
  }
  union_count_ = 1;
  union_keys_.assign({0, size()});
}

uint64_t BspShard::UnionKeyOfRank(uint64_t rank, uint64_t from,
                                  std::span<const uint32_t> indices) const {
  // Pairs (union and push) with a key below `key`: the parts are consecutive key ranges.
  auto below = [&](uint64_t key) {
    size_t count = LowerBound(indices, key);
    for (uint32_t s = 0; s < union_count_ && union_keys_[s] < key; ++s)
      count += LowerBound(union_parts_[s].idx, key);
    return count;
  };
  uint64_t lo = from, hi = size();
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (below(mid) >= rank) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

void BspShard::MergeIntoUnion(std::span<const uint32_t> indices, std::span<const float> values) {
  // The new parts: key ranges holding near-equal shares of the pairs to merge (repeats counted
  // twice), kPartsPerThread per thread, taken by the threads from a shared counter (a helper that
  // wakes late takes fewer); the merge of each range reads only its range of both inputs.
  const size_t total = UnionSize() + indices.size();
  const uint32_t threads = team().ThreadsFor(total, options().parallel_min_pairs);
  const uint32_t count = threads == 1 ? 1 : threads * kPartsPerThread;
  new_keys_.resize(count + 1);
  new_keys_[0] = 0;
  new_keys_[count] = size();
  for (uint32_t t = 1; t < count; ++t)
    new_keys_[t] =
        UnionKeyOfRank(ThreadTeam::RangeBegin(total, count, t), new_keys_[t - 1], indices);
  PrepareBlockSums(values);
  std::atomic<uint32_t> next{0};
  team().Run(threads, [&](uint32_t t) {
    for (uint32_t part; (part = next.fetch_add(1, std::memory_order_relaxed)) < count;)
      MergeUnionPart(part, indices, values);
    SumBlocks(values, t, threads);
  });
  AddBlockSums();
  union_parts_.swap(merge_parts_);  // the old parts' arrays become the next merge's scratch
  union_keys_.swap(new_keys_);
  union_count_ = count;
}

template <typename Body>
void BspShard::ForEachUnionPart(Body body) {
  const uint32_t threads = std::min(union_count_, team().size());
  team().Run(threads, [&](uint32_t t) {
    for (uint32_t s = t; s < union_count_; s += threads) body(union_parts_[s]);
  });
}

void BspShard::MergeUnionPart(uint32_t t, std::span<const uint32_t> indices,
                              std::span<const float> values) {
  const uint64_t lo = new_keys_[t], hi = new_keys_[t + 1];
  UnionPart& out = merge_parts_[t];
  // The current parts that overlap [lo, hi): from the one holding lo on.
  const uint32_t first = static_cast<uint32_t>(
      std::upper_bound(union_keys_.begin(), union_keys_.begin() + union_count_, lo) -
      union_keys_.begin() - 1);
  size_t room = LowerBound(indices, hi) - LowerBound(indices, lo);
  for (uint32_t s = first; s < union_count_ && union_keys_[s] < hi; ++s)
    room += LowerBound(union_parts_[s].idx, hi) - LowerBound(union_parts_[s].idx, lo);
  out.idx.resize(room);
  out.sum.resize(room);
  // Piece by piece in key order: part s's pairs in [lo, hi) with the push's pairs in the same
  // keys. Equal indices add (in push arrival order, as a dense accumulator would; the first push
  // adds to 0.0f too). Sequential in both inputs: no access proportional to the shard size.
  size_t o = 0;
  for (uint32_t s = first; s < union_count_ && union_keys_[s] < hi; ++s) {
    const uint64_t a = std::max(lo, union_keys_[s]), b = std::min(hi, union_keys_[s + 1]);
    const std::span<const uint32_t> part_idx = union_parts_[s].idx;
    const size_t ua = LowerBound(part_idx, a), ub = LowerBound(part_idx, b);
    const size_t pa = LowerBound(indices, a), pb = LowerBound(indices, b);
    o += MergeSortedPairsTo(
        part_idx.subspan(ua, ub - ua),
        std::span<const float>(union_parts_[s].sum).subspan(ua, ub - ua),
        indices.subspan(pa, pb - pa), values.subspan(pa, pb - pa), out.idx.data() + o,
        out.sum.data() + o, [](float v) { return 0.0f + v; },
        [](float sum, float v) { return sum + v; });
  }
  out.idx.resize(o);
  out.sum.resize(o);
}

void BspShard::MaybeComplete(Outbox* out) {
  uint32_t arrived_live = 0;
  for (uint32_t w = 0; w < options().num_workers; ++w)
    arrived_live += (counts(static_cast<int>(w)) && workers_[w].arrived) ? 1 : 0;
  // Backup workers: the round closes at max(1, live - b) pushes (b = 0: every live worker's).
  const uint32_t b = options().backup_workers;
  const uint32_t quorum = live_count() > b ? live_count() - b : std::min<uint32_t>(live_count(), 1);
  if (arrived_live < quorum) return;
  if (options().ordered_rounds) AggregateInRankOrder();
  if (contributions_ == 0) return;
  const float n = static_cast<float>(contributions_);
  auto buf = pool().Get();
  bool dense_reply = false;
  bool sent_in_parts = false;  // every live worker's UPDATE already went out in parts
  if (dense_round_) {
    CompleteDense(n, buf.get());
    dense_reply = true;
  } else if (!residual_.empty()) {
    CompleteTwoWay(n, buf.get());
  } else {
    sent_in_parts = ApplyUnion(n, buf.get(), buf, out);
  }
  if (!dense_round_ && !acc_.empty()) std::vector<float>().swap(acc_);  // sparse again: free it
  ClearUnion();
  if (dense_next_reply_) {  // the first round after a restore resynchronizes every replica
    buf->indices.clear();
    const std::span<const float> w = weights();
    buf->values.assign(w.begin(), w.end());
    dense_reply = true;
    dense_next_reply_ = false;
  }
  SendRoundReplies(std::move(buf), dense_reply, sent_in_parts, out);
}

void BspShard::CompleteDense(float n, ReplyBuffer* buf) {
  // The union's sums into the accumulator (each part on its own thread: disjoint indices), then
  // the whole shard, split by index range.
  float* const acc = acc_.data();
  ForEachUnionPart([&](const UnionPart& part) {
    for (size_t j = 0; j < part.idx.size(); ++j) acc[part.idx[j]] += part.sum[j];
  });
  buf->values.resize(size());
  float* const w = mutable_weights().data();
  float* const vals = buf->values.data();
  team().ParallelFor(size(), options().parallel_min_pairs, [&](uint32_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      w[i] -= acc[i] / n;
      acc[i] = 0.0f;
      vals[i] = w[i];
    }
  });
}

void BspShard::CompleteTwoWay(float n, ReplyBuffer* buf) {
  // The averaged aggregate enters the server residual (each part of the union on its own
  // thread); only its selection is applied and sent.
  float* const residual = residual_.data();
  ForEachUnionPart([&](const UnionPart& part) {
    for (size_t j = 0; j < part.idx.size(); ++j) residual[part.idx[j]] += part.sum[j] / n;
  });
  Selection sel;
  const uint64_t k = KForDensity(options().server_density, residual_.size());
  Status s = SelectHost(options().server_compressor, residual_, k, SelectOptions{}, &sel);
  if (!s.ok()) {
    ++mutable_stats().selection_failures;
    uint64_t held_back = 0;
    if (selection_log_.Allow(LogLimiter::Clock::now(), &held_back)) {
      LOG(WARNING) << "round " << round_ << ": server-side selection failed (" << s.ToString()
                   << "); the round's reply is empty"
                   << (held_back > 0 ? " (" + std::to_string(held_back) + " more not logged)"
                                     : std::string());
    }
    return;
  }
  const std::span<float> w = mutable_weights();
  for (size_t j = 0; j < sel.indices.size(); ++j) {
    const uint32_t i = sel.indices[j];
    w[i] -= residual_[i];
    residual_[i] = 0.0f;
    buf->indices.push_back(i);
    buf->values.push_back(w[i]);
  }
}

void BspShard::SendRoundReplies(std::shared_ptr<const ReplyBuffer> reply, bool dense,
                                bool sent_in_parts, Outbox* out) {
  std::shared_ptr<const ReplyBuffer> whole;  // for workers in their first round after a join
  for (uint32_t w = 0; w < options().num_workers && !sent_in_parts; ++w) {
    if (!counts(static_cast<int>(w))) continue;
    if (workers_[w].dense_reply_to && !dense) {
      if (!whole) whole = CopyOfShard();
      out->push_back(RoundUpdate(static_cast<int>(w), true, whole));
    } else {
      out->push_back(RoundUpdate(static_cast<int>(w), dense, reply));
    }
    workers_[w].dense_reply_to = false;
  }
  // One value per pair, the shard when dense.
  mutable_stats().reply_pairs_sum += reply->values.size();
  last_reply_ = std::move(reply);
  last_reply_dense_ = dense;
  CountMisses();
  for (WorkerState& ws : workers_) ws.arrived = false;
  contributions_ = 0;
  dense_round_ = false;
  ++round_;
  ++mutable_stats().rounds_completed;
  AdmitJoiners(out);
}

Reply BspShard::RoundUpdate(int worker, bool dense,
                            std::shared_ptr<const ReplyBuffer> buffer) const {
  Reply r = Reply::Update(worker, round_, dense, std::move(buffer));
  // Only with backup workers can a live one be missing; only kReturn leaves its push to it.
  const bool without = !workers_[worker].arrived && options().backup_workers > 0;
  r.push_missed = without && options().late_pushes == LatePushes::kReturn;
  r.push_late = without && options().late_pushes == LatePushes::kApply;
  return r;
}

void BspShard::CountMisses() {
  const bool backups = options().backup_workers > 0;
  ShardServerStats& stats = mutable_stats();
  if (backups && stats.missed_by_worker.empty()) {
    stats.missed_by_worker.assign(options().num_workers, 0);
    stats.longest_miss_run.assign(options().num_workers, 0);
  }
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    WorkerState& ws = workers_[w];
    ws.counted_last = counts(static_cast<int>(w)) && ws.arrived;
    if (!backups || !counts(static_cast<int>(w))) continue;
    if (ws.arrived) {
      ws.miss_run = 0;
      continue;
    }
    ++stats.missed;
    ++stats.missed_by_worker[w];
    ++ws.miss_run;
    stats.longest_miss_run[w] = std::max(stats.longest_miss_run[w], ws.miss_run);
    if (ws.miss_run == kNamedMissRun || ws.miss_run == 10 * kNamedMissRun ||
        ws.miss_run == 100 * kNamedMissRun) {
      LOG(WARNING) << "worker " << w << " missed " << ws.miss_run
                   << " BSP rounds in a row (backup workers: the rounds closed without it; its "
                   << (options().late_pushes == LatePushes::kApply
                           ? "late pushes are applied in later rounds"
                           : "late pushes go back to its residual")
                   << "), last round " << round_;
    }
  }
}

bool BspShard::ApplyUnion(float n, ReplyBuffer* buf,
                          const std::shared_ptr<const ReplyBuffer>& shared, Outbox* out) {
  // One pass over the union (ascending: built by merging): apply, and gather the reply. With one
  // part the union's array becomes the reply's indices (the part reuses the buffer's old array);
  // with several, each thread copies its run of indices while it applies it. Either way the
  // arrays are in place before any part goes out, so the arrays ZeroMQ reads never move.
  const size_t m = UnionSize();
  const bool one_part = union_count_ == 1;
  LayOutUnionReply(m, one_part, buf);
  const UnionReplySplit split = SplitUnionReply(m);
  const bool in_parts = split.parts > 1;
  // The work in chunks: the reply's parts when it is split (each goes out as soon as it is
  // done), else kPartsPerThread chunks per thread.
  const uint32_t threads = team().ThreadsFor(m, options().parallel_min_pairs);
  const uint32_t chunks = in_parts ? split.parts : threads == 1 ? 1 : threads * kPartsPerThread;
  auto chunk_from = [&](uint32_t c) {
    return in_parts ? std::min(m, c * split.step) : ThreadTeam::RangeBegin(m, chunks, c);
  };
  auto apply_chunk = [&](uint32_t c) {
    ApplyUnionPairs(chunk_from(c), chunk_from(c + 1), n, one_part, buf);
  };
  auto emit = [&](uint32_t p) { EmitUnionReplyPart(p, split, m, shared, out); };
  if (threads == 1) {
    for (uint32_t c = 0; c < chunks; ++c) {
      apply_chunk(c);
      if (in_parts) emit(c);
    }
  } else {
    ApplyChunksOnTeam(threads, chunks, in_parts, apply_chunk, emit);
  }
  return in_parts;
}

template <typename ApplyChunk, typename Emit>
void BspShard::ApplyChunksOnTeam(uint32_t threads, uint32_t chunks, bool in_parts,
                                 ApplyChunk apply_chunk, Emit emit) {
  // Threads take chunks in order from a shared counter; the calling thread (0) also sends each
  // finished part in order, between its own chunks and after them. One atomic per chunk, none
  // per pair.
  std::atomic<uint32_t> next{0};
  for (uint32_t c = 0; c < chunks; ++c) chunk_done_[c].store(0, std::memory_order_relaxed);
  team().Run(threads, [&](uint32_t t) {
    const bool sender = t == 0 && in_parts;
    uint32_t sent = 0;
    for (;;) {
      const uint32_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      apply_chunk(c);
      chunk_done_[c].store(1, std::memory_order_release);
      if (in_parts) chunk_done_[c].notify_one();
      while (sender && sent < chunks && chunk_done_[sent].load(std::memory_order_acquire) != 0)
        emit(sent++);
    }
    while (sender && sent < chunks) {
      chunk_done_[sent].wait(0, std::memory_order_acquire);
      emit(sent++);
    }
  });
}

void BspShard::LayOutUnionReply(size_t m, bool one_part, ReplyBuffer* buf) {
  buf->values.resize(m);
  if (one_part) {
    buf->indices.swap(union_parts_[0].idx);
  } else {
    buf->indices.resize(m);
  }
  union_offsets_.resize(union_count_ + 1);
  union_offsets_[0] = 0;
  for (uint32_t s = 0; s < union_count_; ++s)
    union_offsets_[s + 1] = union_offsets_[s] + union_parts_[s].sum.size();
}

BspShard::UnionReplySplit BspShard::SplitUnionReply(size_t m) const {
  uint32_t parts = 1;
  const uint64_t per = options().reply_part_pairs;
  bool whole_only = dense_next_reply_;
  for (uint32_t w = 0; w < options().num_workers; ++w)
    whole_only |= counts(static_cast<int>(w)) && workers_[w].dense_reply_to;
  if (per > 0 && m > per && !whole_only) {
    parts = static_cast<uint32_t>(std::min<uint64_t>((m + per - 1) / per, kMaxReplyParts));
  }
  const size_t step = (m + parts - 1) / parts;
  if (parts > 1) parts = static_cast<uint32_t>((m + step - 1) / step);  // none empty
  return UnionReplySplit{parts, step};
}

void BspShard::ApplyUnionPairs(size_t from, size_t to, float n, bool one_part, ReplyBuffer* buf) {
  uint32_t* const idx = buf->indices.data();
  float* const vals = buf->values.data();
  float* const w = mutable_weights().data();
  uint32_t s =
      static_cast<uint32_t>(std::upper_bound(union_offsets_.begin(), union_offsets_.end(), from) -
                            union_offsets_.begin() - 1);
  for (size_t pos = from; pos < to; ++s) {
    const size_t end = std::min(to, union_offsets_[s + 1]), at = pos - union_offsets_[s];
    const float* const sum = union_parts_[s].sum.data() + at;
    if (one_part) {
      ApplyPairs<false>(idx + pos, sum, end - pos, n, w, nullptr, vals + pos);
    } else {
      ApplyPairs<true>(union_parts_[s].idx.data() + at, sum, end - pos, n, w, idx + pos,
                       vals + pos);
    }
    pos = end;
  }
}

void BspShard::EmitUnionReplyPart(uint32_t p, const UnionReplySplit& split, size_t m,
                                  const std::shared_ptr<const ReplyBuffer>& shared, Outbox* out) {
  for (uint32_t v = 0; v < options().num_workers; ++v) {
    if (!counts(static_cast<int>(v))) continue;
    Reply r = RoundUpdate(static_cast<int>(v), false, shared);
    r.part = p;
    r.parts = split.parts;
    r.begin = p * split.step;
    r.end = std::min(m, (p + 1) * split.step);
    out->push_back(std::move(r));
  }
  EmitPart(out);
}

}  // namespace sieve
