// ShardService's replication half (server/service/shard_service.h, "Replication"): the primary's
// event stream to its backups and the holding of replies until they acknowledged it, a mirror's
// replay, and the promotion of a mirror at failover.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "proto/messages.h"
#include "server/service/shard_service.h"
#include "server/shard/round_shard.h"

namespace sieve {

void ShardService::Replicate(pb::ReplicaEvent event, int worker, uint64_t round,
                             std::span<const uint32_t> indices, std::span<const float> values,
                             bool dense) {
  if (!primary() || backups_.empty()) return;
  ++seq_;
  // The queue holds events first_unacked_ .. seq_; empty, it starts at this one (seq_ also moves
  // without it: events replayed as a mirror, a snapshot).
  if (unacked_.empty()) first_unacked_ = seq_;
  replier_ = backups_.back();  // the last live backup in ring order answers the workers
  unacked_.push_back(std::make_shared<const Event>(Event{
      event, worker, replier_, round, dense, std::vector<uint32_t>(indices.begin(), indices.end()),
      std::vector<float>(values.begin(), values.end())}));
  ++repl_.events;
  const uint64_t index = unacked_.size() - 1;
  for (int b : backups_) SendEvent(b, index);
}

void ShardService::ReplicateCompletedRound(uint64_t before) {
  if (!options_.replicate_rounds || !primary() || backups_.empty()) return;
  const uint64_t now = shard_->round();
  if (now == before) return;
  bool dense = false;
  const RoundShard* rounds = shard_->rounds();
  std::shared_ptr<const ReplyBuffer> reply =
      rounds != nullptr ? rounds->last_round_reply(&dense) : nullptr;
  // One event completes one round, but for the resync of a shard restored from its checkpoint
  // (every copy of it had died): that jumps from the checkpoint's round to the workers' at once,
  // which no round event carries. The copies are rebased on a snapshot of the shard as of now.
  if (now != before + 1 || reply == nullptr) return RebaseBackups(before);
  Replicate(pb::REPLICA_ROUND, -1, before, dense ? std::span<const uint32_t>() : reply->indices,
            reply->values, dense);
}

void ShardService::PassIdleRounds() {
  RoundShard* rounds = shard_->rounds();
  if (rounds == nullptr) return;  // ASP/SSP: no rounds to pass
  const std::optional<uint64_t> until = rounds->IdleUntil();
  if (!until) return;
  LOG(INFO) << "shard " << options_.rank << " has no live worker: rounds " << shard_->round()
            << " to " << *until << " pass empty, the rejoined workers are counted from round "
            << *until;
  // A copy replicated by pushes replays the same events and passes the same rounds itself.
  if (options_.replicate_rounds) Replicate(pb::REPLICA_IDLE, -1, *until, {}, {}, false);
  rounds->PassIdleRounds(&out_);
  ReplicateCompletedRound(*until);  // a joiner's held push may have completed it
}

void ShardService::SendEvent(int backup, uint64_t index) {
  const std::shared_ptr<const Event>& held = unacked_[index];
  const Event& e = *held;
  SendReplicate(backup, first_unacked_ + index, e.event, e.worker, e.replier, e.round, e.dense,
                e.indices, e.values, held);
}

void ShardService::SendReplicate(int backup, uint64_t seq, pb::ReplicaEvent event, int origin,
                                 int replier, uint64_t round, bool dense,
                                 std::span<const uint32_t> indices, std::span<const float> values,
                                 std::shared_ptr<const void> keepalive,
                                 const pb::SnapshotClocks* clocks) {
  const int peer = link_->ServerId(backup);
  pb::Header h = MakeDataHeader(pb::MSG_REPLICATE, link_->id(), peer, options_.rank, round);
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
  if (metrics_ != nullptr) metrics_->AddBytes(0, FrameBytes(*frames));
  Status s = link_->Send(peer, std::move(frames).value());
  if (!s.ok()) {
    peer_log_.Warn([&](std::ostream& os) {
      os << "REPLICATE " << seq << " of shard " << options_.rank << " to server " << backup << ": "
         << s.ToString();
    });
  }
  last_progress_[backup] = std::chrono::steady_clock::now();
}

void ShardService::OnServerRejoined(int rank) {
  if (!primary() || !options_.rebuildable || rank == server_rank() ||
      std::find(options_.rebuild_into.begin(), options_.rebuild_into.end(), rank) ==
          options_.rebuild_into.end()) {
    return;
  }
  // A new process under the rank holds none of this shard's events, whatever its predecessor
  // held (a copy this server counted, or a snapshot sent to a server it had not been told was
  // dead): that backup is gone, and the new one is rebuilt from a snapshot.
  OnServerDead(rank);
  // A BSP round replicated by its pushes is in no snapshot: the snapshot waits for the round's
  // end (SendPendingSnapshots, after every event).
  pending_snapshots_.insert(rank);
  SendPendingSnapshots();
}

void ShardService::RebaseBackups(uint64_t before) {
  const std::vector<int> copies = std::move(backups_);
  backups_.clear();
  for (HeldReply& h : held_) {
    if (std::find(copies.begin(), copies.end(), h.replier) != copies.end()) h.replier = -1;
  }
  for (int b : copies) {
    snapshot_seq_.erase(b);
    pending_snapshots_.insert(b);
  }
  ++repl_.rebases;
  LOG(WARNING) << "shard " << options_.rank << " went from round " << before << " to "
               << shard_->round() << " at once (the resync after a restore): its " << copies.size()
               << " copies are sent a snapshot of it";
  Release();
  SendPendingSnapshots();
}

void ShardService::SendPendingSnapshots() {
  const RoundShard* rounds = shard_->rounds();
  if (pending_snapshots_.empty() || !primary() || (rounds != nullptr && !rounds->SnapshotReady())) {
    return;
  }
  const std::set<int> ranks = std::move(pending_snapshots_);
  pending_snapshots_.clear();
  for (int rank : ranks) SendSnapshot(rank);
}

void ShardService::SendSnapshot(int backup) {
  // The shard as of now: its weights (BSP: the open round's pushes are not in them and not
  // replicated: with replicate_rounds a copy gets rounds by their result), its round, ASP/SSP its
  // clocks, the workers it does not count, and the events so far (seq_). The events after it
  // follow on the same connection.
  auto snap = std::make_shared<ShardSnapshot>(shard_->TakeSnapshot());
  const bool has_clocks = !snap->clocks.empty() || !snap->bsp_clocks.empty();
  pb::SnapshotClocks clocks;
  if (has_clocks) {
    clocks.set_version(snap->version);
    clocks.set_pushes_applied(snap->pushes_applied);
    clocks.set_pushed_sum(snap->pushed_sum);
    for (const WorkerClock& c : snap->clocks) {
      pb::WorkerClock* wc = clocks.add_workers();
      wc->set_last_round(c.last_round);
      wc->set_waiting(c.waiting);
      wc->set_waiting_round(c.waiting_round);
      wc->set_reply_version(c.reply_version);
    }
    for (const BspWorkerClock& c : snap->bsp_clocks) {
      pb::BspWorkerClock* bc = clocks.add_bsp_workers();
      bc->set_counted_last(c.counted_last);
      bc->set_last_applied(c.last_applied);
      bc->set_miss_run(c.miss_run);
      bc->set_dense_reply_to(c.dense_reply_to);
      bc->set_unpushed_joiner(c.unpushed_joiner);
      bc->set_join_round(c.join_round);
    }
  }
  if (!snap->residual.empty()) {  // first: the copy installs both with the head
    SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_RESIDUAL, -1, -1, snap->round, true, {},
                  snap->residual, snap);
  }
  const std::vector<float>& weights = snap->weights;
  SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT, -1, -1, snap->round, true, {}, weights, snap,
                has_clocks ? &clocks : nullptr);
  for (int w = 0; w < static_cast<int>(options_.num_workers); ++w) {
    if (!shard_->counts(w)) {
      SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_DEAD, w, -1, 0, false, {}, {}, nullptr);
    }
    if (shard_->readmitted(w)) {
      SendReplicate(backup, seq_, pb::REPLICA_SNAPSHOT_REJOINED, w, -1, 0, false, {}, {}, nullptr);
    }
  }
  backups_.push_back(backup);  // the last: it answers the workers from the next event on
  acked_[backup] = seq_;       // it holds every event so far once it installed the snapshot
  refusals_[backup] = 0;
  snapshot_seq_[backup] = seq_;
  ++repl_.snapshots_sent;
  LOG(WARNING) << "rebuild: shard " << options_.rank << " sent to server " << backup << " (round "
               << shard_->round() << ", " << seq_ << " events)";
}

void ShardService::InstallSnapshot(const Message& msg) {
  ShardSnapshot snap;
  snap.round = msg.header.round();
  snap.weights.assign(msg.values.begin(), msg.values.end());
  if (msg.header.has_clocks()) {
    const pb::SnapshotClocks& clocks = msg.header.clocks();
    snap.version = clocks.version();
    snap.pushes_applied = clocks.pushes_applied();
    snap.pushed_sum = clocks.pushed_sum();
    for (const pb::WorkerClock& wc : clocks.workers()) {
      snap.clocks.push_back(
          {wc.last_round(), wc.waiting(), wc.waiting_round(), wc.reply_version()});
    }
    for (const pb::BspWorkerClock& bc : clocks.bsp_workers()) {
      snap.bsp_clocks.push_back({bc.counted_last(), bc.last_applied(), bc.miss_run(),
                                 bc.dense_reply_to(), bc.unpushed_joiner(), bc.join_round()});
    }
  }
  snap.residual = std::move(snapshot_residual_);
  snapshot_residual_.clear();
  Status s = shard_->InstallSnapshot(std::move(snap));
  if (!s.ok()) {
    LOG(ERROR) << "shard " << options_.rank
               << ": the snapshot cannot be installed: " << s.ToString();
    return;
  }
  role_ = Role::kMirror;
  repl_.rebuilt = true;
  seq_ = msg.header.seq();
  LOG(WARNING) << "rebuild: server " << server_rank() << " holds a copy of shard " << options_.rank
               << " again (round " << msg.header.round() << ")";
}

uint64_t ShardService::MinAcked() const {
  uint64_t least = seq_;
  for (int b : backups_) least = std::min(least, acked_.at(b));
  return least;
}

void ShardService::Release() {
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
  if (!ready.empty()) Send(ready);
}

void ShardService::OnReplicateAck(const Message& msg) {
  const int from = msg.header.sender() - 1;  // a server's rank
  auto it = acked_.find(from);
  if (!primary() || it == acked_.end() ||
      std::find(backups_.begin(), backups_.end(), from) == backups_.end()) {
    peer_log_.Warn([&](std::ostream& os) {
      os << "REPLICATE_ACK for shard " << options_.rank << " from node " << msg.header.sender()
         << ", not a live backup of it; ignored";
    });
    return;
  }
  if (msg.header.seq() > seq_) {
    peer_log_.Warn([&](std::ostream& os) {
      os << "REPLICATE_ACK " << msg.header.seq() << " from server " << from << " for shard "
         << options_.rank << ", which has sent " << seq_ << " events; ignored";
    });
    return;
  }
  if (msg.header.seq() > it->second) {
    it->second = msg.header.seq();
    last_progress_[from] = std::chrono::steady_clock::now();
    refusals_[from] = 0;
  }
  auto snap = snapshot_seq_.find(from);
  if (snap != snapshot_seq_.end() && msg.header.seq() >= snap->second) {
    // The rebuilt copy installed its snapshot: a failover may move the shard there now.
    snapshot_seq_.erase(snap);
    if (Status s = link_->ReportCopy(options_.rank, from); !s.ok()) {
      LOG(ERROR) << "COPY_READY for shard " << options_.rank << ": " << s.ToString();
    }
    // The shard's own server is back: it takes the shard back once nothing is in flight.
    if (from == options_.rank && server_rank() != options_.rank) hand_back_to_ = from;
  }
  Release();
  MaybeHandBack();
}

void ShardService::MaybeHandBack() {
  if (hand_back_to_ < 0 || !primary() || !held_.empty() || MinAcked() < seq_) return;
  const int to = hand_back_to_;
  hand_back_to_ = -1;
  if (std::find(backups_.begin(), backups_.end(), to) == backups_.end()) return;  // it died
  Replicate(pb::REPLICA_HANDOVER, to, shard_->round(), {}, {}, false);
  replier_ = -1;
  // From here on this copy follows `to`; the open round's pushes (not replicated) are the
  // workers' to send again, to the server their next node table names.
  role_ = Role::kHandedOver;
  following_ = to;
  backups_.clear();
  unacked_.clear();
  ++repl_.handovers;
  LOG(WARNING) << "handover: shard " << options_.rank << " goes back to server " << to << " (round "
               << shard_->round() << ", " << seq_ << " events)";
  if (Status s = link_->ReportHandover(options_.rank, to); !s.ok()) {
    LOG(ERROR) << "HANDOVER of shard " << options_.rank << ": " << s.ToString();
  }
}

void ShardService::TakeOver(int from, uint64_t seq) {
  role_ = Role::kPrimary;
  seq_ = seq;
  first_unacked_ = seq + 1;
  backups_ = {from};  // the former primary holds every event so far
  acked_[from] = seq;
  refusals_[from] = 0;
  last_progress_[from] = std::chrono::steady_clock::now();
  ++repl_.handovers;
  LOG(WARNING) << "handover: server " << server_rank() << " serves shard " << options_.rank
               << " again (round " << shard_->round() << ", " << seq << " events)";
}

void ShardService::OnReplicaRefused(int backup) {
  if (!primary() || std::find(backups_.begin(), backups_.end(), backup) == backups_.end()) return;
  if (++refusals_[backup] < kMaxRefusals) return;
  LOG(ERROR) << "server " << backup << " refused shard " << options_.rank << "'s events "
             << kMaxRefusals << " times without acknowledging any: its copy cannot follow, so "
             << "it is no longer a backup of the shard";
  OnServerDead(backup);
}

void ShardService::RefuseReplicate(int sender, const std::string& why) {
  (void)link_->SendError(sender, pb::ERROR_NOT_REPLICA, why, pb::MSG_REPLICATE, seq_,
                         options_.rank);
}

void ShardService::AckReplicate(int sender) {
  pb::Header h = MakeDataHeader(pb::MSG_REPLICATE_ACK, link_->id(), sender, options_.rank, 0);
  h.set_seq(seq_);
  auto frames = EncodeControl(h);
  if (frames.ok()) (void)link_->Reply(sender, std::move(frames).value());
}

bool ShardService::WellFormedReplicate(const Message& msg) const {
  const int sender = msg.header.sender();
  const uint32_t event = msg.header.event();
  const int origin = msg.header.origin();
  // A round's result and a snapshot come from no worker: origin -1.
  const bool round_event = event == pb::REPLICA_ROUND || event == pb::REPLICA_SNAPSHOT ||
                           event == pb::REPLICA_SNAPSHOT_RESIDUAL || event == pb::REPLICA_IDLE;
  const bool to_server = event == pb::REPLICA_HANDOVER;  // origin: a server's rank
  return pb::ReplicaEvent_IsValid(static_cast<int>(event)) &&
         !(round_event ? origin != -1
           : to_server ? origin < 0 || origin == sender - 1
                       : origin < 0 || origin >= static_cast<int>(options_.num_workers)) &&
         msg.values16().empty();
}

void ShardService::OnReplicate(const Message& msg) {
  const int sender = msg.header.sender();
  const uint64_t seq = msg.header.seq();
  if (!mirror() || sender != link_->ServerId(following_)) {
    return RefuseReplicate(sender, "server " + std::to_string(server_rank()) +
                                       " holds no copy of shard " + std::to_string(options_.rank) +
                                       " that node " + std::to_string(sender) + " replicates");
  }
  const uint32_t event = msg.header.event();
  const int origin = msg.header.origin();
  if (!WellFormedReplicate(msg)) {
    return RefuseReplicate(sender, "REPLICATE with event " + std::to_string(event) + ", origin " +
                                       std::to_string(origin) + " (fp32 values only)");
  }
  const auto ev = static_cast<pb::ReplicaEvent>(event);
  if (ev == pb::REPLICA_SNAPSHOT_RESIDUAL || ev == pb::REPLICA_SNAPSHOT ||
      ev == pb::REPLICA_SNAPSHOT_DEAD || ev == pb::REPLICA_SNAPSHOT_REJOINED) {
    return OnReplicatedSnapshotPart(msg, ev);
  }
  if (role_ == Role::kRebuilding) {
    return RefuseReplicate(sender, "server " + std::to_string(server_rank()) +
                                       " waits for the snapshot of shard " +
                                       std::to_string(options_.rank));
  }
  if (seq <= seq_) return AckReplicate(sender);  // a resend: applied once already
  if (seq != seq_ + 1) {
    return RefuseReplicate(sender, "REPLICATE " + std::to_string(seq) + " of shard " +
                                       std::to_string(options_.rank) + " after " +
                                       std::to_string(seq_) + ": events in between are missing");
  }
  if (ev == pb::REPLICA_INIT && !msg.dense()) {
    return RefuseReplicate(sender, "REPLICATE of an INIT without FLAG_DENSE");
  }
  if (ev == pb::REPLICA_HANDOVER) {  // origin: the server that serves the shard from now on
    if (origin == server_rank()) return TakeOver(sender - 1, seq);
    following_ = origin;
    seq_ = seq;
    ++repl_.replayed;
    return AckReplicate(sender);
  }
  if (Status s = ReplayEvent(msg, ev); !s.ok()) {
    replayed_out_.clear();
    return RefuseReplicate(
        sender, "REPLICATE of round " + std::to_string(msg.header.round()) + ": " + s.ToString());
  }
  seq_ = seq;
  ++repl_.replayed;
  // The replier answers the workers before it acknowledges: once the primary has the ack, the
  // replies are on their way.
  if (msg.header.replier() == server_rank()) {
    repl_.replies_sent += replayed_out_.size();
    Send(replayed_out_);
  }
  replayed_out_.clear();
  AckReplicate(sender);
}

void ShardService::OnReplicatedSnapshotPart(const Message& msg, pb::ReplicaEvent ev) {
  const int sender = msg.header.sender();
  const int origin = msg.header.origin();
  // A snapshot's first part to a copy that follows its sender: the primary rebases it
  // (RebaseBackups); the copy takes it as a rebuild.
  const bool first_part = ev == pb::REPLICA_SNAPSHOT_RESIDUAL ||
                          (ev == pb::REPLICA_SNAPSHOT && snapshot_residual_.empty());
  if (first_part && role_ == Role::kMirror) role_ = Role::kRebuilding;
  if (ev == pb::REPLICA_SNAPSHOT_RESIDUAL) {  // kept for the head that follows; not acknowledged
    if (role_ != Role::kRebuilding || !msg.dense()) {
      return RefuseReplicate(
          sender, "a snapshot's residual out of place for shard " + std::to_string(options_.rank));
    }
    snapshot_residual_.assign(msg.values.begin(), msg.values.end());
    return;
  }
  const bool head = ev == pb::REPLICA_SNAPSHOT;
  if (head ? role_ != Role::kRebuilding || !msg.dense()
           : role_ == Role::kRebuilding || msg.header.seq() != seq_) {
    return RefuseReplicate(
        sender, "a snapshot part out of place for shard " + std::to_string(options_.rank));
  }
  if (head) {
    InstallSnapshot(msg);
    if (role_ == Role::kRebuilding)
      return RefuseReplicate(sender, "the snapshot does not fit the shard");
  } else if (ev == pb::REPLICA_SNAPSHOT_DEAD) {
    shard_->OnWorkerDead(origin, &replayed_out_);
  } else {
    shard_->OnWorkerRejoined(origin);
  }
  replayed_out_.clear();
  AckReplicate(sender);
}

Status ShardService::ReplayEvent(const Message& msg, pb::ReplicaEvent ev) {
  const int origin = msg.header.origin();
  const uint64_t round = msg.header.round();
  RoundShard* rounds = shard_->rounds();  // null in ASP/SSP
  switch (ev) {
    case pb::REPLICA_PUSH:
      shard_->OnPush(origin, round, msg.indices, msg.values, msg.dense(), &replayed_out_);
      break;
    case pb::REPLICA_INIT:
      shard_->OnInit(origin, msg.values, &replayed_out_);
      break;
    case pb::REPLICA_JOIN:
      shard_->OnJoin(origin, round, &replayed_out_);
      if (!options_.replicate_rounds && rounds != nullptr) {
        rounds->PassIdleRounds(&replayed_out_);  // as the primary
      }
      break;
    case pb::REPLICA_WORKER_DEAD:
      shard_->OnWorkerDead(origin, &replayed_out_);
      if (!options_.replicate_rounds && rounds != nullptr) rounds->PassIdleRounds(&replayed_out_);
      break;
    case pb::REPLICA_IDLE:
      // Replicated by results, this copy cannot tell alone whether the open round had pushes.
      if (rounds != nullptr && rounds->IdleUntil() == round) {
        rounds->PassIdleRounds(&replayed_out_);
      } else if (shard_->round() != round) {
        return FailedPreconditionError("idle rounds up to " + std::to_string(round) +
                                       " for a copy at round " + std::to_string(shard_->round()) +
                                       " with a live worker or no joiner there");
      }
      break;
    case pb::REPLICA_WORKER_REJOINED:
      shard_->OnWorkerRejoined(origin);
      break;
    case pb::REPLICA_ROUND:
      if (rounds == nullptr) {
        return FailedPreconditionError("an ASP/SSP shard has no rounds to apply");
      }
#ifdef SIEVE_TESTING_DROP_REPLICATED_ROUND
      // A deliberately broken build, for the chaos harness's self-test (tests/chaos): this copy
      // loses the values of the round it replays as its SIEVE_TESTING_DROP_REPLICATED_ROUND-th
      // event, and answers the workers with that empty round.
      if (repl_.replayed + 1 == SIEVE_TESTING_DROP_REPLICATED_ROUND)
        return rounds->ApplyRound(round, {}, {}, false, &replayed_out_);
#endif
      return rounds->ApplyRound(round, msg.indices, msg.values, msg.dense(), &replayed_out_);
    default:  // WellFormedReplicate checked it is valid; the others are handled before
      break;
  }
  return Status::Ok();
}

void ShardService::OnServerDead(int rank) {
  // The primary this copy follows died: a table that moved the shard already (a handover whose
  // REPLICA_HANDOVER never came, or the failover's table, installed before this event) applies
  // now.
  if (mirror() && rank == following_) return OnTable();
  pending_snapshots_.erase(rank);
  auto it = std::find(backups_.begin(), backups_.end(), rank);
  if (it == backups_.end()) return;
  backups_.erase(it);
  snapshot_seq_.erase(rank);
  ++repl_.backups_lost;
  // The replies it was to send and may not have: the primary sends them once the remaining
  // backups have their events (at once without any).
  for (HeldReply& h : held_) {
    if (h.replier == rank) h.replier = -1;
  }
  LOG(WARNING) << "shard " << options_.rank << " lost its backup on server " << rank << "; "
               << backups_.size() << " left";
  Release();
}

void ShardService::OnTable() {
  const int primary = link_->ShardPrimary(options_.rank);
  if (!mirror() || primary == following_) {
    if (role_ == Role::kHandedOver) role_ = Role::kMirror;  // the table caught up with it
    return;
  }
  if (role_ == Role::kHandedOver) return;  // a table from before this server's handover
  // The table moved the shard away from the primary this copy follows. While that primary is
  // alive it is a handover, whose REPLICA_HANDOVER (on another connection than the table) is on
  // its way: the event moves this copy in order (TakeOver, or following the new primary). A
  // failover's primary is dead: the copy named goes on from what it has, the others retire.
  if (!link_->ServerDead(following_)) return;
  if (primary == server_rank() && role_ != Role::kRebuilding) return Promote();
  role_ = Role::kRetired;  // another copy took the shard over
  LOG(WARNING) << "shard " << options_.rank << " failed over to server " << primary
               << "; this server's copy of it is retired";
}

void ShardService::Promote() {
  role_ = Role::kPrimary;
  repl_.promoted = true;
  repl_.promoted_round = shard_->round();
  // The deaths and re-admissions the scheduler announced that the dead primary had not replicated.
  for (int w = 0; w < static_cast<int>(options_.num_workers); ++w) {
    const bool dead = link_->WorkerDead(w);
    if (dead && shard_->counts(w)) {
      shard_->OnWorkerDead(w, &out_);
    } else if (!dead && !shard_->counts(w) && !shard_->readmitted(w)) {
      shard_->OnWorkerRejoined(w);
    }
  }
  LOG(WARNING) << "failover: server " << server_rank() << " serves shard " << options_.rank
               << " from its copy (" << seq_ << " events replayed, round " << shard_->round()
               << "); the shard has no backup until a replacement is rebuilt";
  Flush();
}

void ShardService::OnTick() {
  const auto now = std::chrono::steady_clock::now();
  for (int b : backups_) {
    const uint64_t acked = acked_[b];
    if (acked >= seq_ || now - last_progress_[b] < options_.replicate_resend) continue;
    ++repl_.resent;
    for (uint64_t s = std::max(acked + 1, first_unacked_); s - first_unacked_ < unacked_.size();
         ++s) {
      SendEvent(b, s - first_unacked_);
    }
  }
}

}  // namespace sieve
