// BspShard's joiners and its resync after Restore: who is counted for a round, and from when
// (server/shard/bsp_shard.h states the rules).
#include <algorithm>
#include <optional>
#include <utility>

#include "server/shard/bsp_shard.h"

namespace sieve {

bool BspShard::HeldPush::Hold(uint64_t r, bool d, std::span<const uint32_t> idx,
                              std::span<const float> vals) {
  const bool had = held;
  held = true;
  round = r;
  dense = d;
  indices.assign(idx.begin(), idx.end());
  values.assign(vals.begin(), vals.end());
  return had;
}

void BspShard::HoldJoinPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                            std::span<const float> values, bool dense, Outbox* out) {
  const int64_t join_round = workers_[worker].join_round;
  if (round != static_cast<uint64_t>(join_round)) {
    return Reject(worker, round, pb::ERROR_UNKNOWN_ROUND,
                  "a joining worker pushes its join round " + std::to_string(join_round) +
                      " first, got round " + std::to_string(round),
                  out);
  }
  // Applied when round_ reaches the join round.
  if (workers_[worker].join_push.Hold(round, dense, indices, values)) ++mutable_stats().duplicates;
}

void BspShard::ForgetJoin(int worker) {
  workers_[worker].join_round = -1;
  workers_[worker].join_push = HeldPush{};
  workers_[worker].unpushed_joiner = false;
}

void BspShard::Join(int worker, uint64_t round, Outbox* out) {
  auto ack = [&] { out->push_back(Reply::JoinAck(worker, round)); };
  WorkerState& ws = workers_[worker];
  if (counts(worker)) {
    if (!ws.unpushed_joiner || round <= round_) return ack();  // a repeated JOIN
    // A retry: another server refused the joiner's first round, so it will start later. Uncount
    // it here before it ever pushed, and wait for it at the new round.
    --mutable_stats().rejoins;
    SetReadmitted(worker, true);
    ws.dense_reply_to = false;
    ws.join_round = static_cast<int64_t>(round);
    ack();
    return Uncount(worker, out);  // the round may have waited for this worker alone
  }
  if (!readmitted(worker)) {
    return Reject(worker, round, pb::ERROR_NOT_REGISTERED,
                  "JOIN from a worker the scheduler has not re-admitted", out, pb::MSG_JOIN);
  }
  if (round < round_) {
    return Reject(worker, round, pb::ERROR_JOIN_TOO_LATE,
                  "BSP server is already aggregating round " + std::to_string(round_) +
                      ", past join round " + std::to_string(round),
                  out, pb::MSG_JOIN);
  }
  if (ws.join_round >= 0 && round < static_cast<uint64_t>(ws.join_round)) {
    return;  // stale: a resend of a JOIN that a retry for a later round has replaced
  }
  if (ws.join_round >= 0 && round > static_cast<uint64_t>(ws.join_round)) {
    ws.join_push = HeldPush{};  // a push held for the replaced round is void
  }
  ws.join_round = static_cast<int64_t>(round);
  ack();
  if (round == round_ && !resync_) AdmitJoiners(out);
}

void BspShard::AdmitJoiners(Outbox* out) {
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (counts(static_cast<int>(w)) || !readmitted(static_cast<int>(w)) ||
        workers_[w].join_round != static_cast<int64_t>(round_))
      continue;
    CountRejoined(static_cast<int>(w));
    workers_[w].join_round = -1;
    workers_[w].dense_reply_to = true;
    workers_[w].arrived = false;
    workers_[w].unpushed_joiner = true;  // until its push arrives (at once below when one is held)
    ++mutable_stats().rejoins;
    HeldPush h;
    std::swap(h, workers_[w].join_push);
    if (h.held) RoundPush(static_cast<int>(w), h.round, h.indices, h.values, h.dense, out);
  }
}

std::optional<uint64_t> BspShard::IdleUntil() const {
  if (live_count() > 0 || contributions_ > 0) return std::nullopt;
  std::optional<uint64_t> first;
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    const int64_t join = workers_[w].join_round;
    if (!readmitted(static_cast<int>(w)) || join < 0) continue;
    const uint64_t at = static_cast<uint64_t>(join);
    if (at < round_ || (at == round_ && !resync_)) continue;  // too late / admitted when round_
    if (!first || at < *first) first = at;
  }
  return first;
}

void BspShard::PassIdleRounds(Outbox* out) {
  const std::optional<uint64_t> until = IdleUntil();
  if (!until) return;
  // Nothing from the rounds passed survives: no push of them was counted, no worker holds them.
  resync_ = false;
  for (WorkerState& ws : workers_) {
    ws.held = HeldPush{};
    ws.ordered = HeldPush{};
    ws.arrived = false;
    ws.counted_last = false;
  }
  ClearUnion();
  last_reply_.reset();
  mutable_stats().idle_rounds += *until - round_;
  round_ = *until;
  AdmitJoiners(out);
}

void BspShard::Uncount(int worker, Outbox* out) {
  SetLive(worker, false);
  workers_[worker].unpushed_joiner = false;
  if (resync_) {
    workers_[worker].held = HeldPush{};
    return ResyncMaybeFinish(out);
  }
  MaybeComplete(out);  // the round may have waited for this worker alone
}

void BspShard::Restored(uint64_t round) {
  round_ = round;
  last_reply_.reset();
  resync_ = true;
  for (WorkerState& ws : workers_) ws.held = HeldPush{};
}

void BspShard::ResyncPush(int worker, uint64_t round, std::span<const uint32_t> indices,
                          std::span<const float> values, bool dense, Outbox* out) {
  // A resend replaces the worker's held push (the latest is kept).
  if (workers_[worker].held.Hold(round, dense, indices, values)) ++mutable_stats().duplicates;
  ResyncMaybeFinish(out);
}

void BspShard::ResyncMaybeFinish(Outbox* out) {
  uint64_t target = round_;
  bool any = false;
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    if (!counts(static_cast<int>(w))) continue;
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
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    HeldPush& h = held[w];
    if (!counts(static_cast<int>(w)) || !h.held || h.round == target) continue;
    if (!current) current = CopyOfShard();
    ++mutable_stats().resync_replies;
    out->push_back(Reply::Update(static_cast<int>(w), h.round, true, current));
  }
  for (uint32_t w = 0; w < options().num_workers; ++w) {
    HeldPush& h = held[w];
    if (!counts(static_cast<int>(w)) || !h.held || h.round != target) continue;
    RoundPush(static_cast<int>(w), target, h.indices, h.values, h.dense, out);
  }
}

}  // namespace sieve
