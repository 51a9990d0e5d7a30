// ShardServer's BSP round: merging a round's pushes, completing it (apply, two-way compression,
// the reply whole or in parts), joiners and the resync after Restore. The façade is
// server/shard_server.h; the shared state is documented there.
#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "base/prefetch.h"
#include "kernels/selection.h"
#include "proto/codec.h"
#include "server/shard_server.h"
#include "server/sorted_merge.h"
#include "server/sum_as_double.h"

namespace sieve {

void ShardServer::BspPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                          std::span<const float> values, bool dense, Outbox* out) {
  if (resync_) return ResyncPush(worker, round, indices, values, dense, out);
  if (round + 1 == round_ && last_reply_) {  // the previous round, resent: answer it again
    ++stats_.duplicates;
    out->push_back(Reply::Update(worker, round, last_reply_dense_, last_reply_));
    return;
  }
  if (round != round_) {
    return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                  "BSP server is aggregating round " + std::to_string(round_) + ", got round " +
                      std::to_string(round),
                  out);
  }
  if (workers_[worker].arrived) {  // same round twice: applied once
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
  workers_[worker].arrived = true;
  workers_[worker].unpushed_joiner = false;
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
    arrived_live += (workers_[w].live && workers_[w].arrived) ? 1 : 0;
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
      whole_only |= workers_[w].live && workers_[w].dense_reply_to;
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
        if (!workers_[v].live) continue;
        Reply r = Reply::Update(static_cast<int>(v), round_, false, shared);
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
    if (!workers_[w].live) continue;
    if (workers_[w].dense_reply_to && !dense_reply) {
      if (!whole) {
        auto b = pool_.Get();
        b->values.assign(w_.begin(), w_.end());
        whole = std::move(b);
      }
      out->push_back(Reply::Update(static_cast<int>(w), round_, true, whole));
    } else {
      out->push_back(Reply::Update(static_cast<int>(w), round_, dense_reply, reply));
    }
    workers_[w].dense_reply_to = false;
  }
  last_reply_ = reply;
  last_reply_dense_ = dense_reply;
  for (WorkerState& ws : workers_) ws.arrived = false;
  contributions_ = 0;
  dense_round_ = false;
  ++round_;
  ++stats_.rounds_completed;
  BspAdmitJoiners(out);
}

void ShardServer::BspAdmitJoiners(Outbox* out) {
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (workers_[w].live || !workers_[w].rejoined ||
        workers_[w].join_round != static_cast<int64_t>(round_))
      continue;
    workers_[w].live = true;
    ++live_count_;
    workers_[w].rejoined = false;
    workers_[w].join_round = -1;
    workers_[w].dense_reply_to = true;
    workers_[w].arrived = false;
    workers_[w].unpushed_joiner = true;  // until its push arrives (at once below when one is held)
    ++stats_.rejoins;
    HeldPush h;
    std::swap(h, workers_[w].join_push);
    if (h.held) BspPush(static_cast<int>(w), h.round, h.indices, h.values, h.dense, out);
  }
}

void ShardServer::BspUncount(int worker, Outbox* out) {
  workers_[worker].live = false;
  --live_count_;
  workers_[worker].unpushed_joiner = false;
  if (resync_) {
    workers_[worker].held = HeldPush{};
    return ResyncMaybeFinish(out);
  }
  BspMaybeComplete(out);  // the round may have waited for this worker alone
}

void ShardServer::ResyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                             std::span<const float> values, bool dense, Outbox* out) {
  // A resend replaces the worker's held push (the latest is kept).
  if (workers_[worker].held.Hold(round, dense, indices, values)) ++stats_.duplicates;
  ResyncMaybeFinish(out);
}

void ShardServer::ResyncMaybeFinish(Outbox* out) {
  uint64_t target = round_;
  bool any = false;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!workers_[w].live) continue;
    if (!workers_[w].held.held) return;
    target = std::max(target, workers_[w].held.round);
    any = true;
  }
  if (!any) return;
  resync_ = false;
  round_ = target;
  dense_next_reply_ = true;
  std::vector<HeldPush> held(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w)
    held[w] = std::exchange(workers_[w].held, HeldPush{});
  std::shared_ptr<const ReplyBuffer> current;
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    HeldPush& h = held[w];
    if (!workers_[w].live || !h.held || h.round == target) continue;
    if (!current) {
      auto buf = pool_.Get();
      buf->values.assign(w_.begin(), w_.end());
      current = std::move(buf);
    }
    ++stats_.resync_replies;
    out->push_back(Reply::Update(static_cast<int>(w), h.round, true, current));
  }
  for (uint32_t w = 0; w < options_.num_workers; ++w) {
    HeldPush& h = held[w];
    if (!workers_[w].live || !h.held || h.round != target) continue;
    BspPush(static_cast<int>(w), target, h.indices, h.values, h.dense, out);
  }
}

}  // namespace sieve
