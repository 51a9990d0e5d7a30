// ShardServer's ASP / SSP clock: applying a push at once, holding SSP replies back, and each
// worker's reply from the change log. The façade is server/shard_server.h.
#include <algorithm>
#include <utility>

#include "base/prefetch.h"
#include "server/change_log.h"
#include "server/shard_server.h"

namespace sieve {

void ShardServer::AsyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                            std::span<const float> values, bool dense, Outbox* out) {
  if (static_cast<int64_t>(round) <= workers_[worker].last_round) {  // replay: not applied again
    ++stats_.duplicates;
    if (!workers_[worker].waiting) AsyncReply(worker, round, out);
    return;
  }
  // The push's checksum is summed by the same threads (server/shard_server.h, SumBlocks).
  const uint32_t count = team_->ThreadsFor(values.size(), options_.parallel_min_pairs);
  PrepareBlockSums(values);
  const float scale = scale_;
  float* const weights = w_.data();
  if (dense) {
    team_->ParallelFor(values.size(), options_.parallel_min_pairs,
                       [&](uint32_t t, size_t begin, size_t end) {
                         for (size_t i = begin; i < end; ++i) weights[i] -= scale * values[i];
                         SumBlocks(values, t, count);
                       });
    AddBlockSums();
    for (WorkerState& ws : workers_) ws.all_dirty = true;
    for (uint32_t w = 0; w < options_.num_workers; ++w) changes_->Skip(w);
    changes_->Trim(IsLive());
  } else {
    // Apply, and record the new values in the same pass: the change log carries them, so a reply
    // never reads the shard at scattered positions again. Split by runs of the push (its indices
    // are distinct, so the threads touch disjoint weights).
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
    changes_->Append(indices, new_values_);
    // A worker whose pending changes pass half the shard gets the whole shard instead (4 bytes
    // per entry rather than 8), and no longer holds the log's records back.
    for (uint32_t w = 0; w < options_.num_workers; ++w) {
      if (workers_[w].live && !workers_[w].all_dirty && changes_->pending(w) > w_.size() / 2) {
        workers_[w].all_dirty = true;
        changes_->Skip(w);
      }
    }
  }
  workers_[worker].last_round = static_cast<int64_t>(round);
  ++stats_.pushes_applied;
  workers_[worker].waiting = true;
  workers_[worker].waiting_round = round;
  AsyncRelease(out);
}

void ShardServer::AsyncRelease(Outbox* out) {
  // Clock of a worker = rounds it has pushed = last round + 1.
  int64_t min_clock = INT64_MAX;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (workers_[w].live) min_clock = std::min(min_clock, workers_[w].last_round + 1);
  }
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!workers_[w].waiting) continue;
    const int64_t lead = live_count_ == 0 ? 0 : workers_[w].last_round + 1 - min_clock;
    if (options_.consistency == Consistency::kSsp && workers_[w].live && lead > options_.staleness)
      continue;
    stats_.max_staleness = std::max<int>(stats_.max_staleness, static_cast<int>(lead));
    stats_.staleness_sum += static_cast<uint64_t>(lead);
    ++stats_.released_replies;
    workers_[w].waiting = false;
    AsyncReply(static_cast<int>(w), workers_[w].waiting_round, out);
  }
}

void ShardServer::AsyncReply(int worker, uint64_t round, Outbox* out) {
  auto buf = pool_.Get();
  bool dense = false;
  if (workers_[worker].all_dirty) {
    buf->values.assign(w_.begin(), w_.end());
    dense = true;
    workers_[worker].all_dirty = false;
    changes_->Skip(worker);
  } else {
    changes_->Take(worker, &buf->indices, &buf->values);
  }
  changes_->Trim(IsLive());
  out->push_back(Reply::Update(worker, round, dense, std::move(buf)));
}

}  // namespace sieve
