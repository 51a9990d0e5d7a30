// AsyncShard: applying a push at once, holding SSP replies back, and each worker's reply from the
// change log. server/shard/async_shard.h.
#include "server/shard/async_shard.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/prefetch.h"

namespace sieve {

AsyncShard::AsyncShard(const ShardServerOptions& options, std::vector<float> initial)
    : ShardServer(options, std::move(initial)),
      workers_(options.num_workers),
      scale_(options.async_scale > 0 ? options.async_scale
                                     : 1.0f / static_cast<float>(options.num_workers)),
      changes_(options.num_workers) {}

void AsyncShard::Push(int worker, uint64_t round, std::span<const uint32_t> indices,
                      std::span<const float> values, bool dense, Outbox* out) {
  if (!counts(worker)) return RejectNotLive(worker, round, out);
  if (static_cast<int64_t>(round) <= workers_[worker].last_round) {  // replay: not applied again
    ++mutable_stats().duplicates;
    if (!workers_[worker].waiting) SendReply(worker, round, out);
    return;
  }
  const float scale = PushScale(worker);
  if (dense) {
    ApplyDense(values, scale);
  } else {
    ApplySparse(indices, values, scale);
  }
  ++version_;
  workers_[worker].last_round = static_cast<int64_t>(round);
  ++mutable_stats().pushes_applied;
  workers_[worker].waiting = true;
  workers_[worker].waiting_round = round;
  Release(out);
}

float AsyncShard::PushScale(int worker) {
  const uint64_t tau = version_ - workers_[worker].reply_version;
  ShardServerStats& stats = mutable_stats();
  stats.push_staleness_sum += tau;
  stats.max_push_staleness = std::max(stats.max_push_staleness, tau);
  if (options().staleness_lr == StalenessLr::kInverse && tau >= 1) {
    return scale_ / static_cast<float>(tau);
  }
  return scale_;
}

void AsyncShard::ApplyDense(std::span<const float> values, float scale) {
  // The push's checksum is summed by the same threads (ShardServer::SumBlocks).
  const uint32_t count = team().ThreadsFor(values.size(), options().parallel_min_pairs);
  PrepareBlockSums(values);
  float* const weights = mutable_weights().data();
  team().ParallelFor(values.size(), options().parallel_min_pairs,
                     [&](uint32_t t, size_t begin, size_t end) {
                       for (size_t i = begin; i < end; ++i) weights[i] -= scale * values[i];
                       SumBlocks(values, t, count);
                     });
  AddBlockSums();
  AllDirty();
}

void AsyncShard::ApplySparse(std::span<const uint32_t> indices, std::span<const float> values,
                             float scale) {
  // Apply, and record the new values in the same pass: the change log carries them, so a reply
  // never reads the shard at scattered positions again. Split by runs of the push (its indices
  // are distinct, so the threads touch disjoint weights).
  const uint32_t count = team().ThreadsFor(values.size(), options().parallel_min_pairs);
  PrepareBlockSums(values);
  float* const weights = mutable_weights().data();
  const size_t m = indices.size();
  new_values_.resize(m);
  const uint32_t* const idx = indices.data();
  float* const nv = new_values_.data();
  team().ParallelFor(m, options().parallel_min_pairs, [&](uint32_t t, size_t begin, size_t end) {
    const size_t ahead = end > kScatterPrefetchDistance ? end - kScatterPrefetchDistance : 0;
    for (size_t j = begin; j < end; ++j) {
      if (j < ahead) PrefetchForWrite(weights + idx[j + kScatterPrefetchDistance]);
      weights[idx[j]] -= scale * values[j];
      nv[j] = weights[idx[j]];
    }
    SumBlocks(values, t, count);
  });
  AddBlockSums();
  changes_.Append(indices, new_values_);
  // A worker whose pending changes pass half the shard gets the whole shard instead (4 bytes
  // per entry rather than 8), and no longer holds the log's records back.
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (counts(static_cast<int>(w)) && !workers_[w].all_dirty && changes_.pending(w) > size() / 2) {
      workers_[w].all_dirty = true;
      changes_.Skip(w);
    }
  }
}

void AsyncShard::AllDirty() {
  for (WorkerState& ws : workers_) ws.all_dirty = true;
  for (uint32_t w = 0; w < options().num_workers; ++w) changes_.Skip(w);
  changes_.Trim(IsLive());
}

void AsyncShard::Release(Outbox* out) {
  // Clock of a worker = rounds it has pushed = last round + 1.
  int64_t min_clock = INT64_MAX;
  ShardServerStats& stats = mutable_stats();
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (counts(static_cast<int>(w))) min_clock = std::min(min_clock, workers_[w].last_round + 1);
  }
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (!workers_[w].waiting) continue;
    const int64_t lead = live_count() == 0 ? 0 : workers_[w].last_round + 1 - min_clock;
    if (options().consistency == Consistency::kSsp && counts(static_cast<int>(w)) &&
        lead > options().staleness)
      continue;
    stats.max_staleness = std::max<int>(stats.max_staleness, static_cast<int>(lead));
    stats.staleness_sum += static_cast<uint64_t>(lead);
    ++stats.released_replies;
    workers_[w].waiting = false;
    SendReply(static_cast<int>(w), workers_[w].waiting_round, out);
    stats.reply_pairs_sum += out->back().buffer->values.size();  // a value per pair
  }
}

void AsyncShard::SendReply(int worker, uint64_t round, Outbox* out) {
  auto buf = pool().Get();
  workers_[worker].reply_version = version_;
  bool dense = false;
  if (workers_[worker].all_dirty) {
    const std::span<const float> w = weights();
    buf->values.assign(w.begin(), w.end());
    dense = true;
    workers_[worker].all_dirty = false;
    changes_.Skip(worker);
  } else {
    changes_.Take(worker, &buf->indices, &buf->values);
  }
  changes_.Trim(IsLive());
  out->push_back(Reply::Update(worker, round, dense, std::move(buf)));
}

uint64_t AsyncShard::PullRound(int worker) const {
  int64_t clock = workers_[worker].last_round + 1;
  int64_t min_live = INT64_MAX;
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (counts(static_cast<int>(w)) && static_cast<int>(w) != worker)
      min_live = std::min(min_live, workers_[w].last_round + 1);
  }
  if (min_live != INT64_MAX) clock = std::max(clock, min_live);
  return static_cast<uint64_t>(clock);
}

void AsyncShard::Dead(int worker, Outbox* out) {
  SetLive(worker, false);
  workers_[worker].waiting = false;
  changes_.Trim(IsLive());  // a dead worker holds no change back; a rejoin starts dense
  Release(out);
}

void AsyncShard::Join(int worker, uint64_t round, Outbox* out) {
  if (!counts(worker) && !readmitted(worker)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "JOIN from a worker the scheduler has not re-admitted", out, pb::MSG_JOIN);
  }
  if (!counts(worker)) {
    CountRejoined(worker);
    WorkerState& ws = workers_[worker];
    ws.last_round = std::max(ws.last_round, static_cast<int64_t>(round) - 1);
    ws.all_dirty = true;
    ws.reply_version = version_;                   // it rejoins with the current weights
    changes_.Skip(static_cast<uint32_t>(worker));  // the dense reply covers every change
    ws.waiting = false;
    ++mutable_stats().rejoins;
  }
  out->push_back(Reply::JoinAck(worker, round));  // also for a repeated JOIN
}

void AsyncShard::Restored(uint64_t) { AllDirty(); }

ShardSnapshot AsyncShard::TakeSnapshot() const {
  ShardSnapshot s = ShardServer::TakeSnapshot();
  s.version = version_;
  s.clocks.assign(workers_.begin(), workers_.end());  // each state's WorkerClock
  s.pushes_applied = stats().pushes_applied;
  s.pushed_sum = stats().pushed_sum;
  return s;
}

Status AsyncShard::InstallSnapshot(ShardSnapshot snapshot) {
  if (snapshot.clocks.size() != workers_.size()) {
    return InvalidArgumentError("a snapshot with " + std::to_string(snapshot.clocks.size()) +
                                " worker clocks for a shard of " + std::to_string(workers_.size()) +
                                " workers");
  }
  for (size_t w = 0; w < snapshot.clocks.size(); ++w) {
    const WorkerClock& c = snapshot.clocks[w];
    if (c.last_round < -1 || c.reply_version > snapshot.version ||
        (c.waiting && static_cast<int64_t>(c.waiting_round) > c.last_round)) {
      return InvalidArgumentError("the snapshot's clock of worker " + std::to_string(w) +
                                  " is inconsistent (last round " + std::to_string(c.last_round) +
                                  ", reply version " + std::to_string(c.reply_version) + " of " +
                                  std::to_string(snapshot.version) + ")");
    }
  }
  SIEVE_RETURN_IF_ERROR(Restore(0, std::move(snapshot.weights)));  // every reply dense (Restored)
  version_ = snapshot.version;
  for (size_t w = 0; w < workers_.size(); ++w) {
    WorkerClock& clock = workers_[w];
    clock = snapshot.clocks[w];
  }
  mutable_stats().pushes_applied = snapshot.pushes_applied;
  mutable_stats().pushed_sum = snapshot.pushed_sum;
  return Status::Ok();
}

}  // namespace sieve
