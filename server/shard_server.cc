#include "server/shard_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "base/prefetch.h"
#include "kernels/selection.h"
#include "proto/codec.h"
#include "server/change_log.h"
#include "server/sorted_merge.h"

namespace sieve {
namespace {

// Σ values in fp64 with four independent accumulators (one long dependency chain of fp64 adds
// would cost more than the rest of a push's bookkeeping).
double SumAsDouble(std::span<const float> values) {
  double s[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= values.size(); j += 4) {
    for (int u = 0; u < 4; ++u) s[u] += values[j + u];
  }
  for (; j < values.size(); ++j) s[0] += values[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

StatusOr<std::unique_ptr<ShardServer>> ShardServer::Create(const ShardServerOptions& options,
                                                           std::vector<float> initial) {
  if (options.num_workers == 0) return InvalidArgumentError("a shard server needs >= 1 worker");
  if (options.staleness < 0) return InvalidArgumentError("staleness must be >= 0");
  if (initial.empty()) return InvalidArgumentError("empty shard");
  if (initial.size() > (uint64_t{1} << 32)) return InvalidArgumentError("shard longer than 2^32");
  if (options.server_compressor != Compressor::kNone &&
      !(options.server_density > 0.0 && options.server_density <= 1.0)) {
    return InvalidArgumentError("server density must be in (0, 1]");
  }
  if (options.async_scale < 0 || !std::isfinite(options.async_scale)) {
    return InvalidArgumentError("async scale must be finite and >= 0");
  }
  return std::unique_ptr<ShardServer>(new ShardServer(options, std::move(initial)));
}

ShardServer::ShardServer(const ShardServerOptions& options, std::vector<float> initial)
    : options_(options),
      w_(initial.begin(), initial.end()),
      live_(options.num_workers, true),
      dense_in_flight_(options.num_workers),
      live_count_(options.num_workers),
      rejoined_(options.num_workers, false),
      join_round_(options.num_workers, -1),
      join_push_(options.num_workers),
      dense_reply_to_(options.num_workers, false),
      unpushed_joiner_(options.num_workers, false) {
  const size_t n = w_.size();
  const uint32_t workers = options.num_workers;
  if (options.consistency == Consistency::kBsp) {
    arrived_.assign(workers, false);
    if (options.server_compressor != Compressor::kNone) residual_.assign(n, 0.0f);
  } else {
    scale_ = options.async_scale > 0 ? options.async_scale : 1.0f / static_cast<float>(workers);
    last_round_.assign(workers, -1);
    changes_ = std::make_unique<ChangeLog>(workers);
    all_dirty_.assign(workers, false);
    waiting_.assign(workers, false);
    waiting_round_.assign(workers, 0);
  }
}

void ShardServer::Reject(int worker, uint64_t round, pb::ErrorCode code, std::string message,
                         Outbox* out, pb::MsgType rejected) {
  ++stats_.rejected;
  Reply r;
  r.worker = worker;
  r.type = pb::MSG_ERROR;
  r.round = round;
  r.code = code;
  r.message = std::move(message);
  r.rejected = rejected;
  out->push_back(std::move(r));
}

void ShardServer::OnPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                         std::span<const float> values, bool dense, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "unknown worker rank " + std::to_string(worker), out);
  }
  if (dense ? values.size() != w_.size() : indices.size() != values.size()) {
    return Reject(worker, round, pb::ERROR_BAD_COUNT, "push sizes do not match the shard", out);
  }
  if (!live_[worker]) {
    if (options_.consistency == Consistency::kBsp && rejoined_[worker] &&
        join_round_[worker] >= 0) {
      if (round != static_cast<uint64_t>(join_round_[worker])) {
        return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                      "a joining worker pushes its join round " +
                          std::to_string(join_round_[worker]) + " first, got round " +
                          std::to_string(round),
                      out);
      }
      // Applied when round_ reaches the join round.
      if (join_push_[worker].Hold(round, dense, indices, values)) ++stats_.duplicates;
      return;
    }
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  rejoined_[worker] ? "a re-admitted worker sends JOIN before pushing"
                                    : "worker was declared dead",
                  out);
  }
  if (options_.consistency == Consistency::kBsp)
    return BspPush(worker, round, indices, values, dense, out);
  AsyncPush(worker, round, indices, values, dense, out);
}

void ShardServer::BspPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                          std::span<const float> values, bool dense, Outbox* out) {
  if (resync_) return ResyncPush(worker, round, indices, values, dense, out);
  if (round + 1 == round_ && last_reply_) {  // the previous round, resent: answer it again
    ++stats_.duplicates;
    out->push_back(
        {worker, pb::MSG_UPDATE, round, last_reply_dense_, last_reply_, pb::ERROR_NONE, ""});
    return;
  }
  if (round != round_) {
    return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                  "BSP server is aggregating round " + std::to_string(round_) + ", got round " +
                      std::to_string(round),
                  out);
  }
  if (arrived_[worker]) {  // same round twice: applied once
    ++stats_.duplicates;
    return;
  }
  if (dense) {
    if (acc_.size() != w_.size()) acc_.assign(w_.size(), 0.0f);  // kept while dense rounds run
    dense_round_ = true;
    for (size_t i = 0; i < values.size(); ++i) {
      acc_[i] += values[i];
      stats_.pushed_sum += values[i];
    }
  } else {
    stats_.pushed_sum += SumAsDouble(values);
    MergeIntoUnion(indices, values);
  }
  arrived_[worker] = true;
  unpushed_joiner_[worker] = false;
  ++contributions_;
  ++stats_.pushes_applied;
  BspMaybeComplete(out);
}

void ShardServer::MergeIntoUnion(std::span<const uint32_t> indices, std::span<const float> values) {
  // Equal indices add (in push arrival order, as a dense accumulator would; the first push adds
  // to 0.0f too). Sequential in both inputs: no access proportional to the shard size.
  MergeSortedPairs(
      union_, union_sum_, indices, values, &merge_idx_, &merge_sum_,
      [](float v) { return 0.0f + v; }, [](float sum, float v) { return sum + v; });
  union_.swap(merge_idx_);
  union_sum_.swap(merge_sum_);
}

void ShardServer::BspMaybeComplete(Outbox* out) {
  uint32_t arrived_live = 0;
  for (uint32_t w = 0; w < options_.num_workers; ++w)
    arrived_live += (live_[w] && arrived_[w]) ? 1 : 0;
  if (contributions_ == 0 || arrived_live < live_count_) return;
  const float n = static_cast<float>(contributions_);
  auto buf = pool_.Get();
  bool dense_reply = false;
  bool sent_in_parts = false;  // every live worker's UPDATE already went out in parts
  if (dense_round_) {
    for (size_t j = 0; j < union_.size(); ++j) acc_[union_[j]] += union_sum_[j];
    for (size_t i = 0; i < w_.size(); ++i) {
      w_[i] -= acc_[i] / n;
      acc_[i] = 0.0f;
    }
    buf->values.assign(w_.begin(), w_.end());
    dense_reply = true;
  } else if (!residual_.empty()) {
    // Two-way compression: the averaged aggregate enters the server residual; only its selection
    // is applied and sent.
    for (size_t j = 0; j < union_.size(); ++j) residual_[union_[j]] += union_sum_[j] / n;
    Selection sel;
    const uint64_t k = KForDensity(options_.server_density, residual_.size());
    Status s = SelectHost(options_.server_compressor, residual_, k, SelectOptions{}, &sel);
    if (!s.ok()) {
      ++stats_.selection_failures;
      LOG(WARNING) << "round " << round_ << ": server-side selection failed (" << s.ToString()
                   << "); the round's reply is empty";
    } else {
      for (size_t j = 0; j < sel.indices.size(); ++j) {
        const uint32_t i = sel.indices[j];
        w_[i] -= residual_[i];
        residual_[i] = 0.0f;
        buf->indices.push_back(i);
        buf->values.push_back(w_[i]);
      }
    }
  } else {
    // One pass over the union (ascending: built by merging): apply, and gather the reply. The
    // union becomes the reply's indices (union_ reuses the buffer's old array) before any part
    // goes out, so the arrays ZeroMQ reads never move.
    const size_t m = union_.size();
    buf->values.resize(m);
    buf->indices.swap(union_);
    uint32_t parts = 1;
    const uint64_t per = options_.reply_part_pairs;
    bool whole_only = dense_next_reply_;
    for (uint32_t w = 0; w < options_.num_workers; ++w)
      whole_only |= live_[w] && dense_reply_to_[w];
    if (per > 0 && m > per && !whole_only) {
      parts = static_cast<uint32_t>(std::min<uint64_t>((m + per - 1) / per, kMaxReplyParts));
    }
    const size_t step = (m + parts - 1) / parts;
    if (parts > 1) parts = static_cast<uint32_t>((m + step - 1) / step);  // none empty
    const uint32_t* const idx = buf->indices.data();
    const float* const sum = union_sum_.data();
    float* const vals = buf->values.data();
    float* const w = w_.data();
    std::shared_ptr<const ReplyBuffer> shared = buf;
    for (uint32_t p = 0; p < parts; ++p) {
      const size_t from = p * step, to = std::min(m, from + step);
      const size_t ahead = to > kScatterPrefetchDistance ? to - kScatterPrefetchDistance : 0;
      for (size_t j = from; j < to; ++j) {
        if (j < ahead) PrefetchForWrite(w + idx[j + kScatterPrefetchDistance]);
        const uint32_t i = idx[j];
        w[i] -= sum[j] / n;
        vals[j] = w[i];
      }
      if (parts == 1) break;
      for (uint32_t v = 0; v < options_.num_workers; ++v) {
        if (!live_[v]) continue;
        Reply r{static_cast<int>(v), pb::MSG_UPDATE, round_, false, shared, pb::ERROR_NONE, ""};
        r.part = p;
        r.parts = parts;
        r.begin = from;
        r.end = to;
        out->push_back(std::move(r));
      }
      if (part_sink_) part_sink_(out);
    }
    sent_in_parts = parts > 1;
  }
  if (!dense_round_ && !acc_.empty()) std::vector<float>().swap(acc_);  // sparse again: free it
  union_.clear();
  union_sum_.clear();
  if (dense_next_reply_) {  // the first round after a restore resynchronizes every replica
    buf->indices.clear();
    buf->values.assign(w_.begin(), w_.end());
    dense_reply = true;
    dense_next_reply_ = false;
  }
  std::shared_ptr<const ReplyBuffer> reply = std::move(buf);
  std::shared_ptr<const ReplyBuffer> whole;  // for workers in their first round after a join
  for (uint32_t w = 0; w < options_.num_workers && !sent_in_parts; ++w) {
    if (!live_[w]) continue;
    if (dense_reply_to_[w] && !dense_reply) {
      if (!whole) {
        auto b = pool_.Get();
        b->values.assign(w_.begin(), w_.end());
        whole = std::move(b);
      }
      out->push_back(
          {static_cast<int>(w), pb::MSG_UPDATE, round_, true, whole, pb::ERROR_NONE, ""});
    } else {
      out->push_back(
          {static_cast<int>(w), pb::MSG_UPDATE, round_, dense_reply, reply, pb::ERROR_NONE, ""});
    }
    dense_reply_to_[w] = false;
  }
  last_reply_ = reply;
  last_reply_dense_ = dense_reply;
  std::fill(arrived_.begin(), arrived_.end(), false);
  contributions_ = 0;
  dense_round_ = false;
  ++round_;
  ++stats_.rounds_completed;
  BspAdmitJoiners(out);
}

void ShardServer::BspAdmitJoiners(Outbox* out) {
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (live_[w] || !rejoined_[w] || join_round_[w] != static_cast<int64_t>(round_)) continue;
    live_[w] = true;
    ++live_count_;
    rejoined_[w] = false;
    join_round_[w] = -1;
    dense_reply_to_[w] = true;
    arrived_[w] = false;
    unpushed_joiner_[w] = true;  // until its push arrives (at once below when one is held)
    ++stats_.rejoins;
    HeldPush h;
    std::swap(h, join_push_[w]);
    if (h.held) BspPush(static_cast<int>(w), h.round, h.indices, h.values, h.dense, out);
  }
}

void ShardServer::AsyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                            std::span<const float> values, bool dense, Outbox* out) {
  if (static_cast<int64_t>(round) <= last_round_[worker]) {  // replay: not applied again
    ++stats_.duplicates;
    if (!waiting_[worker]) AsyncReply(worker, round, out);
    return;
  }
  stats_.pushed_sum += SumAsDouble(values);
  if (dense) {
    for (size_t i = 0; i < values.size(); ++i) w_[i] -= scale_ * values[i];
    std::fill(all_dirty_.begin(), all_dirty_.end(), true);
    for (uint32_t w = 0; w < options_.num_workers; ++w) changes_->Skip(w);
    changes_->Trim(live_);
  } else {
    // Apply, and record the new values in the same pass: the change log carries them, so a reply
    // never reads the shard at scattered positions again.
    const size_t m = indices.size();
    new_values_.resize(m);
    const uint32_t* const idx = indices.data();
    float* const w = w_.data();
    float* const nv = new_values_.data();
    const size_t ahead = m > kScatterPrefetchDistance ? m - kScatterPrefetchDistance : 0;
    for (size_t j = 0; j < m; ++j) {
      if (j < ahead) PrefetchForWrite(w + idx[j + kScatterPrefetchDistance]);
      w[idx[j]] -= scale_ * values[j];
      nv[j] = w[idx[j]];
    }
    changes_->Append(indices, new_values_);
    // A worker whose pending changes pass half the shard gets the whole shard instead (4 bytes
    // per entry rather than 8), and no longer holds the log's records back.
    for (uint32_t w = 0; w < options_.num_workers; ++w) {
      if (live_[w] && !all_dirty_[w] && changes_->pending(w) > w_.size() / 2) {
        all_dirty_[w] = true;
        changes_->Skip(w);
      }
    }
  }
  last_round_[worker] = static_cast<int64_t>(round);
  ++stats_.pushes_applied;
  waiting_[worker] = true;
  waiting_round_[worker] = round;
  AsyncRelease(out);
}

void ShardServer::AsyncRelease(Outbox* out) {
  // Clock of a worker = rounds it has pushed = last round + 1.
  int64_t min_clock = INT64_MAX;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (live_[w]) min_clock = std::min(min_clock, last_round_[w] + 1);
  }
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!waiting_[w]) continue;
    const int64_t lead = live_count_ == 0 ? 0 : last_round_[w] + 1 - min_clock;
    if (options_.consistency == Consistency::kSsp && live_[w] && lead > options_.staleness)
      continue;
    stats_.max_staleness = std::max<int>(stats_.max_staleness, static_cast<int>(lead));
    stats_.staleness_sum += static_cast<uint64_t>(lead);
    ++stats_.released_replies;
    waiting_[w] = false;
    AsyncReply(static_cast<int>(w), waiting_round_[w], out);
  }
}

void ShardServer::AsyncReply(int worker, uint64_t round, Outbox* out) {
  auto buf = pool_.Get();
  bool dense = false;
  if (all_dirty_[worker]) {
    buf->values.assign(w_.begin(), w_.end());
    dense = true;
    all_dirty_[worker] = false;
    changes_->Skip(worker);
  } else {
    changes_->Take(worker, &buf->indices, &buf->values);
  }
  changes_->Trim(live_);
  out->push_back({worker, pb::MSG_UPDATE, round, dense, std::move(buf), pb::ERROR_NONE, ""});
}

void ShardServer::OnPullDense(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) ||
      (!live_[worker] && !rejoined_[worker])) {
    return Reject(worker, 0, pb::ERROR_NOT_REGISTERED, "worker was declared dead", out,
                  pb::MSG_PULL_DENSE);
  }
  uint64_t at = round_;
  if (options_.consistency != Consistency::kBsp) {
    int64_t clock = last_round_[worker] + 1;
    int64_t min_live = INT64_MAX;
    for (uint32_t w = 0; w < options_.num_workers; ++w) {
      if (live_[w] && static_cast<int>(w) != worker)
        min_live = std::min(min_live, last_round_[w] + 1);
    }
    if (min_live != INT64_MAX) clock = std::max(clock, min_live);
    at = static_cast<uint64_t>(clock);
  }
  if (!dense_in_flight_[worker].expired()) {
    ++stats_.dense_pulls_dropped;
    return;
  }
  auto buf = pool_.Get();
  buf->values.assign(w_.begin(), w_.end());
  dense_in_flight_[worker] = buf;
  out->push_back({worker, pb::MSG_DENSE, at, true, std::move(buf), pb::ERROR_NONE, ""});
}

void ShardServer::OnWorkerRejoined(int worker) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers) || live_[worker]) return;
  rejoined_[worker] = true;
  join_round_[worker] = -1;
  join_push_[worker] = HeldPush{};
}

void ShardServer::OnJoin(int worker, uint64_t round, Outbox* out) {
  auto ack = [&] {
    out->push_back({worker, pb::MSG_JOIN_ACK, round, false, nullptr, pb::ERROR_NONE, ""});
  };
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "unknown worker rank " + std::to_string(worker), out, pb::MSG_JOIN);
  }
  if (live_[worker]) {
    if (options_.consistency != Consistency::kBsp || !unpushed_joiner_[worker] || round <= round_)
      return ack();  // a repeated JOIN of a worker already counted
    // A retry: another server refused the joiner's first round, so it will start later. Uncount
    // it here before it ever pushed, and wait for it at the new round.
    --stats_.rejoins;
    rejoined_[worker] = true;
    dense_reply_to_[worker] = false;
    join_round_[worker] = static_cast<int64_t>(round);
    ack();
    return BspUncount(worker, out);  // the round may have waited for this worker alone
  }
  if (!rejoined_[worker]) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "JOIN from a worker the scheduler has not re-admitted", out, pb::MSG_JOIN);
  }
  if (options_.consistency == Consistency::kBsp) {
    if (round < round_) {
      return Reject(worker, round, pb::ERROR_JOIN_TOO_LATE,
                    "BSP server is already aggregating round " + std::to_string(round_) +
                        ", past join round " + std::to_string(round),
                    out, pb::MSG_JOIN);
    }
    if (join_round_[worker] >= 0 && round < static_cast<uint64_t>(join_round_[worker])) {
      return;  // stale: a resend of a JOIN that a retry for a later round has replaced
    }
    if (join_round_[worker] >= 0 && round > static_cast<uint64_t>(join_round_[worker])) {
      join_push_[worker] = HeldPush{};  // a push held for the replaced round is void
    }
    join_round_[worker] = static_cast<int64_t>(round);
    ack();
    if (round == round_ && !resync_) BspAdmitJoiners(out);
    return;
  }
  live_[worker] = true;
  ++live_count_;
  rejoined_[worker] = false;
  last_round_[worker] = std::max(last_round_[worker], static_cast<int64_t>(round) - 1);
  all_dirty_[worker] = true;
  changes_->Skip(static_cast<uint32_t>(worker));  // the dense reply covers every change
  waiting_[worker] = false;
  ++stats_.rejoins;
  ack();
}

void ShardServer::OnWorkerDead(int worker, Outbox* out) {
  if (worker < 0 || worker >= static_cast<int>(options_.num_workers)) return;
  unpushed_joiner_[worker] = false;
  if (!live_[worker]) {  // a re-admitted worker that died again before it was counted
    rejoined_[worker] = false;
    join_round_[worker] = -1;
    join_push_[worker] = HeldPush{};
    return;
  }
  if (options_.consistency == Consistency::kBsp) return BspUncount(worker, out);
  live_[worker] = false;
  --live_count_;
  waiting_[worker] = false;
  changes_->Trim(live_);  // a dead worker holds no change back; a rejoin starts dense
  AsyncRelease(out);
}

void ShardServer::BspUncount(int worker, Outbox* out) {
  live_[worker] = false;
  --live_count_;
  unpushed_joiner_[worker] = false;
  if (resync_) {
    held_[worker] = HeldPush{};
    return ResyncMaybeFinish(out);
  }
  BspMaybeComplete(out);  // the round may have waited for this worker alone
}

}  // namespace sieve

namespace sieve {

Status ShardServer::Restore(uint64_t round, std::vector<float> weights) {
  if (weights.size() != w_.size()) {
    return InvalidArgumentError("restored shard has " + std::to_string(weights.size()) +
                                " values, the shard has " + std::to_string(w_.size()));
  }
  w_.assign(weights.begin(), weights.end());
  if (options_.consistency == Consistency::kBsp) {
    round_ = round;
    last_reply_.reset();
    resync_ = true;
    held_.assign(options_.num_workers, HeldPush{});
  } else {
    std::fill(all_dirty_.begin(), all_dirty_.end(), true);
    for (uint32_t w = 0; w < options_.num_workers; ++w) changes_->Skip(w);
    changes_->Trim(live_);
  }
  return Status::Ok();
}

void ShardServer::ResyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                             std::span<const float> values, bool dense, Outbox* out) {
  // A resend replaces the worker's held push (the latest is kept).
  if (held_[worker].Hold(round, dense, indices, values)) ++stats_.duplicates;
  ResyncMaybeFinish(out);
}

void ShardServer::ResyncMaybeFinish(Outbox* out) {
  uint64_t target = round_;
  bool any = false;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!live_[w]) continue;
    if (!held_[w].held) return;
    target = std::max(target, held_[w].round);
    any = true;
  }
  if (!any) return;
  resync_ = false;
  round_ = target;
  dense_next_reply_ = true;
  std::vector<HeldPush> held;
  held.swap(held_);
  std::shared_ptr<const ReplyBuffer> current;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    HeldPush& h = held[w];
    if (!live_[w] || !h.held || h.round == target) continue;
    if (!current) {
      auto buf = pool_.Get();
      buf->values.assign(w_.begin(), w_.end());
      current = std::move(buf);
    }
    ++stats_.resync_replies;
    out->push_back(
        {static_cast<int>(w), pb::MSG_UPDATE, h.round, true, current, pb::ERROR_NONE, ""});
  }
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    HeldPush& h = held[w];
    if (!live_[w] || !h.held || h.round != target) continue;
    BspPush(static_cast<int>(w), target, h.indices, h.values, h.dense, out);
  }
}

}  // namespace sieve
