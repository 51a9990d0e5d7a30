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
  if (!members_[worker].live) return RejectNotLive(worker, round, out);
  if (static_cast<int64_t>(round) <= workers_[worker].last_round) {  // replay: not applied again
    ++stats_.duplicates;
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
  ++stats_.pushes_applied;
  workers_[worker].waiting = true;
  workers_[worker].waiting_round = round;
  Release(out);
}

float AsyncShard::PushScale(int worker) {
  const uint64_t tau = version_ - workers_[worker].reply_version;
  stats_.push_staleness_sum += tau;
  stats_.max_push_staleness = std::max(stats_.max_push_staleness, tau);
  if (options_.staleness_lr == StalenessLr::kInverse && tau >= 1) {
    return scale_ / static_cast<float>(tau);
  }
  return scale_;
}

void AsyncShard::ApplyDense(std::span<const float> values, float scale) {
  // The push's checksum is summed by the same threads (ShardServer::SumBlocks).
  const uint32_t count = team_->ThreadsFor(values.size(), options_.parallel_min_pairs);
  PrepareBlockSums(values);
  float* const weights = w_.data();
  team_->ParallelFor(values.size(), options_.parallel_min_pairs,
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
  const uint32_t count = team_->ThreadsFor(values.size(), options_.parallel_min_pairs);
  PrepareBlockSums(values);
  float* const weights = w_.data();
  const size_t m = indices.size();
  new_values_.resize(m);
  const uint32_t* const idx = indices.data();
  float* const nv = new_values_.data();
  team_->ParallelFor(m, options_.parallel_min_pairs, [&](uint32_t t, size_t begin, size_t end) {
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
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (members_[w].live && !workers_[w].all_dirty && changes_.pending(w) > w_.size() / 2) {
      workers_[w].all_dirty = true;
      changes_.Skip(w);
    }
  }
}

void AsyncShard::AllDirty() {
  for (WorkerState& ws : workers_) ws.all_dirty = true;
  for (uint32_t w = 0; w < options_.num_workers; ++w) changes_.Skip(w);
  changes_.Trim(IsLive());
}

void AsyncShard::Release(Outbox* out) {
  // Clock of a worker = rounds it has pushed = last round + 1.
  int64_t min_clock = INT64_MAX;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (members_[w].live) min_clock = std::min(min_clock, workers_[w].last_round + 1);
  }
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!workers_[w].waiting) continue;
    const int64_t lead = live_count_ == 0 ? 0 : workers_[w].last_round + 1 - min_clock;
    if (options_.consistency == Consistency::kSsp && members_[w].live && lead > options_.staleness)
      continue;
    stats_.max_staleness = std::max<int>(stats_.max_staleness, static_cast<int>(lead));
    stats_.staleness_sum += static_cast<uint64_t>(lead);
    ++stats_.released_replies;
    workers_[w].waiting = false;
    SendReply(static_cast<int>(w), workers_[w].waiting_round, out);
    stats_.reply_pairs_sum += out->back().buffer->values.size();  // a value per pair
  }
}

void AsyncShard::SendReply(int worker, uint64_t round, Outbox* out) {
  auto buf = pool_.Get();
  workers_[worker].reply_version = version_;
  bool dense = false;
  if (workers_[worker].all_dirty) {
    buf->values.assign(w_.begin(), w_.end());
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
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (members_[w].live && static_cast<int>(w) != worker)
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
  if (!members_[worker].live && !members_[worker].rejoined) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "JOIN from a worker the scheduler has not re-admitted", out, pb::MSG_JOIN);
  }
  if (!members_[worker].live) {
    SetLive(worker, true);
    members_[worker].rejoined = false;
    WorkerState& ws = workers_[worker];
    ws.last_round = std::max(ws.last_round, static_cast<int64_t>(round) - 1);
    ws.all_dirty = true;
    ws.reply_version = version_;                   // it rejoins with the current weights
    changes_.Skip(static_cast<uint32_t>(worker));  // the dense reply covers every change
    ws.waiting = false;
    ++stats_.rejoins;
  }
  out->push_back(Reply::JoinAck(worker, round));  // also for a repeated JOIN
}

void AsyncShard::Restored(uint64_t) { AllDirty(); }

ShardSnapshot AsyncShard::TakeSnapshot() const {
  ShardSnapshot s = ShardServer::TakeSnapshot();
  s.version = version_;
  s.clocks.reserve(workers_.size());
  for (const WorkerState& ws : workers_) {
    s.clocks.push_back({ws.last_round, ws.waiting, ws.waiting_round, ws.reply_version});
  }
  s.pushes_applied = stats_.pushes_applied;
  s.pushed_sum = stats_.pushed_sum;
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
    const WorkerClock& c = snapshot.clocks[w];
    WorkerState& ws = workers_[w];
    ws.last_round = c.last_round;
    ws.waiting = c.waiting;
    ws.waiting_round = c.waiting_round;
    ws.reply_version = c.reply_version;
  }
  stats_.pushes_applied = snapshot.pushes_applied;
  stats_.pushed_sum = snapshot.pushed_sum;
  return Status::Ok();
}

}  // namespace sieve
