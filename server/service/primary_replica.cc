#include "server/service/primary_replica.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "proto/messages.h"
#include "server/service/mirror_replica.h"
#include "server/shard/round_shard.h"

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;

bool Contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// A snapshot's clocks as REPLICA_SNAPSHOT carries them (Header.clocks); nothing when it has none.
std::optional<pb::SnapshotClocks> SnapshotClocksOf(const ShardSnapshot& snap) {
  if (snap.clocks.empty() && snap.bsp_clocks.empty()) return std::nullopt;
  pb::SnapshotClocks clocks;
  clocks.set_version(snap.version);
  clocks.set_pushes_applied(snap.pushes_applied);
  clocks.set_pushed_sum(snap.pushed_sum);
  for (const WorkerClock& c : snap.clocks) {
    pb::WorkerClock* wc = clocks.add_workers();
    wc->set_last_round(c.last_round);
    wc->set_waiting(c.waiting);
    wc->set_waiting_round(c.waiting_round);
    wc->set_reply_version(c.reply_version);
  }
  for (const BspWorkerClock& c : snap.bsp_clocks) {
    pb::BspWorkerClock* bc = clocks.add_bsp_workers();
    bc->set_counted_last(c.counted_last);
    bc->set_last_applied(c.last_applied);
    bc->set_miss_run(c.miss_run);
    bc->set_dense_reply_to(c.dense_reply_to);
    bc->set_unpushed_joiner(c.unpushed_joiner);
    bc->set_join_round(c.join_round);
  }
  return clocks;
}

}  // namespace

PrimaryReplica::PrimaryReplica(ReplicaHost* host, uint64_t seq, std::vector<int> backups,
                               std::set<int> pending_snapshots)
    : host_(host),
      backups_(std::move(backups)),
      pending_snapshots_(std::move(pending_snapshots)),
      seq_(seq),
      first_unacked_(seq + 1) {
  for (int b : backups_) {
    acked_[b] = seq;
    refusals_[b] = 0;
    last_progress_[b] = Clock::now();
  }
}

void PrimaryReplica::Replicate(pb::ReplicaEvent event, int worker, uint64_t round,
                               std::span<const uint32_t> indices, std::span<const float> values,
                               bool dense) {
  if (backups_.empty()) return;
  ++seq_;
  // The queue holds events first_unacked_ .. seq_; empty, it starts at this one.
  if (unacked_.empty()) first_unacked_ = seq_;
  replier_ = backups_.back();  // the last live backup in ring order answers the workers
  unacked_.push_back(std::make_shared<const Event>(Event{
      event, worker, replier_, round, dense, std::vector<uint32_t>(indices.begin(), indices.end()),
      std::vector<float>(values.begin(), values.end())}));
  ++host_->stats().events;
  const uint64_t index = unacked_.size() - 1;
  for (int b : backups_) SendEvent(b, index);
}

void PrimaryReplica::ReplicateCompletedRound(uint64_t before) {
  ShardServer* shard = host_->shard();
  if (!host_->options().replicate_rounds || backups_.empty()) return;
  const uint64_t now = shard->round();
  if (now == before) return;
  bool dense = false;
  const RoundShard* rounds = shard->rounds();
  std::shared_ptr<const ReplyBuffer> reply =
      rounds != nullptr ? rounds->last_round_reply(&dense) : nullptr;
  // One event completes one round, but for the resync of a shard restored from its checkpoint
  // (every copy of it had died): that jumps from the checkpoint's round to the workers' at once,
  // which no round event carries. The copies are rebased on a snapshot of the shard as of now.
  if (now != before + 1 || reply == nullptr) return RebaseBackups(before);
  Replicate(pb::REPLICA_ROUND, -1, before, dense ? std::span<const uint32_t>() : reply->indices,
            reply->values, dense);
}

bool PrimaryReplica::HoldReplies(Outbox* replies) {
  const bool hold = Holding();  // every reply waits for the backups to have what it reflects
  if (hold) {
    for (Reply& r : *replies) held_.push_back({seq_, replier_, std::move(r)});
    host_->stats().held_replies += replies->size();
    replies->clear();
  }
  replier_ = -1;
  return hold;
}

void PrimaryReplica::SendEvent(int backup, uint64_t index) {
  const std::shared_ptr<const Event>& held = unacked_[index];
  const Event& e = *held;
  SendReplicate(backup, first_unacked_ + index, e.event, e.worker, e.replier, e.round, e.dense,
                e.indices, e.values, held);
}

void PrimaryReplica::SendReplicate(int backup, uint64_t seq, pb::ReplicaEvent event, int origin,
                                   int replier, uint64_t round, bool dense,
                                   std::span<const uint32_t> indices, std::span<const float> values,
                                   std::shared_ptr<const void> keepalive,
                                   const pb::SnapshotClocks* clocks) {
  ServerLink* link = host_->link();
  const int peer = link->ServerId(backup);
  pb::Header h = MakeDataHeader(pb::MSG_REPLICATE, link->id(), peer, host_->shard_rank(), round);
  h.set_seq(seq);
  h.set_origin(origin);
  h.set_event(static_cast<uint32_t>(event));
  h.set_replier(replier);
  if (clocks != nullptr) *h.mutable_clocks() = *clocks;
  DataPayload p;
  p.dense = dense;
  if (!dense) p.indices = indices;
  p.values = std::as_bytes(values);
  p.keepalive = std::move(keepalive);  // the frames borrow the arrays
  EncodeOptions eo;
  // Between servers the CPU matters more than the bytes: raw indices, no coding pass on either
  // side.
  eo.compact_indices = false;
  auto frames = EncodeData(h, p, eo);
  if (!frames.ok()) {
    LOG(ERROR) << "encode REPLICATE: " << frames.status().ToString();
    return;
  }
  if (host_->metrics() != nullptr) host_->metrics()->AddBytes(0, FrameBytes(*frames));
  Status s = link->Send(peer, std::move(frames).value());
  if (!s.ok()) {
    host_->peer_log().Warn([&](std::ostream& os) {
      os << "REPLICATE " << seq << " of shard " << host_->shard_rank() << " to server " << backup
         << ": " << s.ToString();
    });
  }
  last_progress_[backup] = Clock::now();
}

void PrimaryReplica::OnServerRejoined(int rank) {
  const ShardServiceOptions& options = host_->options();
  if (!options.rebuildable || rank == host_->server_rank() || !Contains(options.rebuild_into, rank))
    return;
  // A new process under the rank holds none of this shard's events, whatever its predecessor
  // held (a copy this server counted, or a snapshot sent to a server it had not been told was
  // dead): that backup is gone, and the new one is rebuilt from a snapshot.
  OnServerDead(rank);
  // A BSP round replicated by its pushes is in no snapshot: the snapshot waits for the round's
  // end (SendPendingSnapshots, after every event).
  pending_snapshots_.insert(rank);
  SendPendingSnapshots();
}

void PrimaryReplica::RebaseBackups(uint64_t before) {
  const std::vector<int> copies = std::move(backups_);
  backups_.clear();
  ReclaimReplies(copies);
  for (int b : copies) {
    snapshot_seq_.erase(b);
    pending_snapshots_.insert(b);
  }
  ++host_->stats().rebases;
  LOG(WARNING) << "shard " << host_->shard_rank() << " went from round " << before << " to "
               << host_->shard()->round() << " at once (the resync after a restore): its "
               << copies.size() << " copies are sent a snapshot of it";
  Release();
  SendPendingSnapshots();
}

void PrimaryReplica::ReclaimReplies(const std::vector<int>& repliers) {
  for (HeldReply& h : held_) {
    if (Contains(repliers, h.replier)) h.replier = -1;
  }
}

void PrimaryReplica::SendPendingSnapshots() {
  const RoundShard* rounds = host_->shard()->rounds();
  if (pending_snapshots_.empty() || (rounds != nullptr && !rounds->SnapshotReady())) return;
  const std::set<int> ranks = std::move(pending_snapshots_);
  pending_snapshots_.clear();
  for (int rank : ranks) SendSnapshot(rank);
}

void PrimaryReplica::SendSnapshot(int backup) {
  // The shard as of now: its weights (BSP: the open round's pushes are not in them and not
  // replicated: with replicate_rounds a copy gets rounds by their result), its round, ASP/SSP its
  // clocks, the workers it does not count, and the events so far (seq_). The events after it
  // follow on the same connection.
  ShardServer* shard = host_->shard();
  auto snap = std::make_shared<ShardSnapshot>(shard->TakeSnapshot());
  const std::optional<pb::SnapshotClocks> clocks = SnapshotClocksOf(*snap);
  if (!snap->residual.empty()) {  // first: the copy installs both with the head
    SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_RESIDUAL, -1, -1, snap->round, true, {},
                  snap->residual, snap);
  }
  const std::vector<float>& weights = snap->weights;
  SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT, -1, -1, snap->round, true, {}, weights, snap,
                clocks ? &*clocks : nullptr);
  for (int w = 0; w < static_cast<int>(host_->options().num_workers); ++w) {
    if (!shard->counts(w)) {
      SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_DEAD, w, -1, 0, false, {}, {}, nullptr);
    }
    if (shard->readmitted(w)) {
      SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_REJOINED, w, -1, 0, false, {}, {}, nullptr);
    }
  }
  backups_.push_back(backup);  // the last: it answers the workers from the next event on
  acked_[backup] = seq_;       // it holds every event so far once it installed the snapshot
  refusals_[backup] = 0;
  snapshot_seq_[backup] = seq_;
  ++host_->stats().snapshots_sent;
  LOG(WARNING) << "rebuild: shard " << host_->shard_rank() << " sent to server " << backup
               << " (round " << shard->round() << ", " << seq_ << " events)";
}

uint64_t PrimaryReplica::MinAcked() const {
  uint64_t least = seq_;
  for (int b : backups_) least = std::min(least, acked_.at(b));
  return least;
}

void PrimaryReplica::Release() {
  const uint64_t acked = MinAcked();
  while (first_unacked_ <= acked && !unacked_.empty()) {
    unacked_.pop_front();
    ++first_unacked_;
  }
  Outbox ready;
  while (!held_.empty() && held_.front().seq <= acked) {
    // A live replier acknowledged the event after it sent the replies itself.
    if (held_.front().replier < 0) ready.push_back(std::move(held_.front().reply));
    held_.pop_front();
  }
  if (!ready.empty()) host_->SendReplies(ready);
}

bool PrimaryReplica::OnReplicate(const Message& /*msg*/) { return false; }

bool PrimaryReplica::OnReplicateAck(const Message& msg) {
  const int from = msg.header.sender() - 1;  // a server's rank
  auto it = acked_.find(from);
  if (it == acked_.end() || !Contains(backups_, from)) return false;
  const int shard_rank = host_->shard_rank();
  if (msg.header.seq() > seq_) {
    host_->peer_log().Warn([&](std::ostream& os) {
      os << "REPLICATE_ACK " << msg.header.seq() << " from server " << from << " for shard "
         << shard_rank << ", which has sent " << seq_ << " events; ignored";
    });
    return true;
  }
  if (msg.header.seq() > it->second) {
    it->second = msg.header.seq();
    last_progress_[from] = Clock::now();
    refusals_[from] = 0;
  }
  auto snap = snapshot_seq_.find(from);
  if (snap != snapshot_seq_.end() && msg.header.seq() >= snap->second) {
    // The rebuilt copy installed its snapshot: a failover may move the shard there now.
    snapshot_seq_.erase(snap);
    if (Status s = host_->link()->ReportCopy(shard_rank, from); !s.ok()) {
      LOG(ERROR) << "COPY_READY for shard " << shard_rank << ": " << s.ToString();
    }
    // The shard's own server is back: it takes the shard back once nothing is in flight.
    if (from == shard_rank && host_->server_rank() != shard_rank) hand_back_to_ = from;
  }
  Release();
  MaybeHandBack();
  return true;
}

void PrimaryReplica::MaybeHandBack() {
  if (hand_back_to_ < 0 || !held_.empty() || MinAcked() < seq_) return;
  const int to = hand_back_to_;
  hand_back_to_ = -1;
  if (!Contains(backups_, to)) return;  // it died
  const int shard_rank = host_->shard_rank();
  Replicate(pb::REPLICA_HANDOVER, to, host_->shard()->round(), {}, {}, false);
  replier_ = -1;
  ++host_->stats().handovers;
  LOG(WARNING) << "handover: shard " << shard_rank << " goes back to server " << to << " (round "
               << host_->shard()->round() << ", " << seq_ << " events)";
  if (Status s = host_->link()->ReportHandover(shard_rank, to); !s.ok()) {
    LOG(ERROR) << "HANDOVER of shard " << shard_rank << ": " << s.ToString();
  }
  // From here on this copy follows `to`; the open round's pushes (not replicated) are the
  // workers' to send again, to the server their next node table names. The snapshots still
  // waiting are sent if this copy serves the shard again.
  host_->SwitchRole(std::make_unique<MirrorReplica>(host_, ShardService::Role::kHandedOver, to,
                                                    seq_, std::move(pending_snapshots_)));
}

void PrimaryReplica::OnReplicaRefused(int rank) {
  if (!Contains(backups_, rank)) return;
  if (++refusals_[rank] < ShardService::kMaxRefusals) return;
  LOG(ERROR) << "server " << rank << " refused shard " << host_->shard_rank() << "'s events "
             << ShardService::kMaxRefusals << " times without acknowledging any: its copy cannot "
             << "follow, so it is no longer a backup of the shard";
  OnServerDead(rank);
}

void PrimaryReplica::OnServerDead(int rank) {
  pending_snapshots_.erase(rank);
  auto it = std::find(backups_.begin(), backups_.end(), rank);
  if (it == backups_.end()) return;
  backups_.erase(it);
  snapshot_seq_.erase(rank);
  ++host_->stats().backups_lost;
  // The replies it was to send and may not have: the primary sends them once the remaining
  // backups have their events (at once without any).
  ReclaimReplies({rank});
  LOG(WARNING) << "shard " << host_->shard_rank() << " lost its backup on server " << rank << "; "
               << backups_.size() << " left";
  Release();
}

void PrimaryReplica::OnTick() {
  const auto now = Clock::now();
  for (int b : backups_) {
    const uint64_t acked = acked_[b];
    if (acked >= seq_ || now - last_progress_[b] < host_->options().replicate_resend) continue;
    ++host_->stats().resent;
    for (uint64_t s = std::max(acked + 1, first_unacked_); s - first_unacked_ < unacked_.size();
         ++s) {
      SendEvent(b, s - first_unacked_);
    }
  }
}

}  // namespace sieve
