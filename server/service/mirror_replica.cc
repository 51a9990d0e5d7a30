#include "server/service/mirror_replica.h"

#include <glog/logging.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/messages.h"
#include "server/service/primary_replica.h"
#include "server/shard/round_shard.h"

namespace sieve {
namespace {

using Role = ShardService::Role;

bool IsSnapshotPart(pb::ReplicaEvent ev) {
  return ev == pb::REPLICA_SNAPSHOT_RESIDUAL || ev == pb::REPLICA_SNAPSHOT ||
         ev == pb::REPLICA_SNAPSHOT_DEAD || ev == pb::REPLICA_SNAPSHOT_REJOINED;
}

// The shard state a REPLICA_SNAPSHOT carries (and the residual its REPLICA_SNAPSHOT_RESIDUAL
// carried before it).
ShardSnapshot SnapshotOf(const Message& msg, std::vector<float> residual) {
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
  snap.residual = std::move(residual);
  return snap;
}

}  // namespace

MirrorReplica::MirrorReplica(ReplicaHost* host, ShardService::Role role, int following,
                             uint64_t seq, std::set<int> owed_snapshots)
    : host_(host),
      role_(role),
      following_(following),
      seq_(seq),
      owed_snapshots_(std::move(owed_snapshots)) {}

void MirrorReplica::Refuse(int sender, const std::string& why) {
  host_->RefuseReplicate(sender, seq_, why);
}

void MirrorReplica::AckReplicate(int sender) {
  ServerLink* link = host_->link();
  pb::Header h = MakeDataHeader(pb::MSG_REPLICATE_ACK, link->id(), sender, host_->shard_rank(), 0);
  h.set_seq(seq_);
  auto frames = EncodeControl(h);
  if (frames.ok()) (void)link->Reply(sender, std::move(frames).value());
}

bool MirrorReplica::WellFormedReplicate(const Message& msg) const {
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
                       : origin < 0 || origin >= static_cast<int>(host_->options().num_workers)) &&
         msg.values16().empty();
}

bool MirrorReplica::OnReplicate(const Message& msg) {
  const int sender = msg.header.sender();
  if (role_ == Role::kRetired || sender != host_->link()->ServerId(following_)) return false;
  if (!WellFormedReplicate(msg)) {
    Refuse(sender, "REPLICATE with event " + std::to_string(msg.header.event()) + ", origin " +
                       std::to_string(msg.header.origin()) + " (fp32 values only)");
    return true;
  }
  const auto ev = static_cast<pb::ReplicaEvent>(msg.header.event());
  if (IsSnapshotPart(ev)) {
    OnSnapshotPart(msg, ev);
  } else {
    OnStreamEvent(msg, ev);
  }
  return true;
}

void MirrorReplica::OnSnapshotPart(const Message& msg, pb::ReplicaEvent ev) {
  const int sender = msg.header.sender();
  const int origin = msg.header.origin();
  const std::string shard_rank = std::to_string(host_->shard_rank());
  // A snapshot's first part to a copy that follows its sender: the primary rebases it
  // (PrimaryReplica::RebaseBackups); the copy takes it as a rebuild.
  const bool first_part = ev == pb::REPLICA_SNAPSHOT_RESIDUAL ||
                          (ev == pb::REPLICA_SNAPSHOT && snapshot_residual_.empty());
  if (first_part && role_ == Role::kMirror) role_ = Role::kRebuilding;
  if (ev == pb::REPLICA_SNAPSHOT_RESIDUAL) {  // kept for the head that follows; not acknowledged
    if (role_ != Role::kRebuilding || !msg.dense()) {
      return Refuse(sender, "a snapshot's residual out of place for shard " + shard_rank);
    }
    snapshot_residual_.assign(msg.values.begin(), msg.values.end());
    return;
  }
  const bool head = ev == pb::REPLICA_SNAPSHOT;
  if (head ? role_ != Role::kRebuilding || !msg.dense()
           : role_ == Role::kRebuilding || msg.header.seq() != seq_) {
    return Refuse(sender, "a snapshot part out of place for shard " + shard_rank);
  }
  ShardServer* shard = host_->shard();
  if (head) {
    InstallSnapshot(msg);
    if (role_ == Role::kRebuilding) return Refuse(sender, "the snapshot does not fit the shard");
  } else if (ev == pb::REPLICA_SNAPSHOT_DEAD) {
    shard->OnWorkerDead(origin, &replayed_out_);
  } else {
    shard->OnWorkerRejoined(origin);
  }
  replayed_out_.clear();
  AckReplicate(sender);
}

void MirrorReplica::InstallSnapshot(const Message& msg) {
  std::vector<float> residual = std::move(snapshot_residual_);
  snapshot_residual_.clear();
  Status s = host_->shard()->InstallSnapshot(SnapshotOf(msg, std::move(residual)));
  if (!s.ok()) {
    LOG(ERROR) << "shard " << host_->shard_rank()
               << ": the snapshot cannot be installed: " << s.ToString();
    return;
  }
  role_ = Role::kMirror;
  host_->stats().rebuilt = true;
  seq_ = msg.header.seq();
  LOG(WARNING) << "rebuild: server " << host_->server_rank() << " holds a copy of shard "
               << host_->shard_rank() << " again (round " << msg.header.round() << ")";
}

void MirrorReplica::OnStreamEvent(const Message& msg, pb::ReplicaEvent ev) {
  const int sender = msg.header.sender();
  const uint64_t seq = msg.header.seq();
  const std::string shard_rank = std::to_string(host_->shard_rank());
  if (role_ == Role::kRebuilding) {
    return Refuse(sender, "server " + std::to_string(host_->server_rank()) +
                              " waits for the snapshot of shard " + shard_rank);
  }
  if (seq <= seq_) return AckReplicate(sender);  // a resend: applied once already
  if (seq != seq_ + 1) {
    return Refuse(sender, "REPLICATE " + std::to_string(seq) + " of shard " + shard_rank +
                              " after " + std::to_string(seq_) + ": events in between are missing");
  }
  if (ev == pb::REPLICA_INIT && !msg.dense()) {
    return Refuse(sender, "REPLICATE of an INIT without FLAG_DENSE");
  }
  if (ev == pb::REPLICA_HANDOVER) return OnHandover(msg);
  ApplyEvent(msg, ev);
}

void MirrorReplica::OnHandover(const Message& msg) {
  // origin: the server that serves the shard from now on.
  const int origin = msg.header.origin();
  if (origin == host_->server_rank()) return TakeOver(msg.header.sender() - 1, msg.header.seq());
  following_ = origin;
  seq_ = msg.header.seq();
  ++host_->stats().replayed;
  AckReplicate(msg.header.sender());
}

void MirrorReplica::ApplyEvent(const Message& msg, pb::ReplicaEvent ev) {
  const int sender = msg.header.sender();
  if (Status s = ReplayEvent(msg, ev); !s.ok()) {
    replayed_out_.clear();
    return Refuse(sender,
                  "REPLICATE of round " + std::to_string(msg.header.round()) + ": " + s.ToString());
  }
  seq_ = msg.header.seq();
  ReplicationStats& stats = host_->stats();
  ++stats.replayed;
  // The replier answers the workers before it acknowledges: once the primary has the ack, the
  // replies are on their way.
  if (msg.header.replier() == host_->server_rank()) {
    stats.replies_sent += replayed_out_.size();
    host_->SendReplies(replayed_out_);
  }
  replayed_out_.clear();
  AckReplicate(sender);
}

Status MirrorReplica::ReplayEvent(const Message& msg, pb::ReplicaEvent ev) {
  ShardServer* shard = host_->shard();
  const bool by_rounds = host_->options().replicate_rounds;
  const int origin = msg.header.origin();
  const uint64_t round = msg.header.round();
  RoundShard* rounds = shard->rounds();  // null in ASP/SSP
  switch (ev) {
    case pb::REPLICA_PUSH:
      shard->OnPush(origin, round, msg.indices, msg.values, msg.dense(), &replayed_out_);
      break;
    case pb::REPLICA_INIT:
      shard->OnInit(origin, msg.values, &replayed_out_);
      break;
    case pb::REPLICA_JOIN:
      shard->OnJoin(origin, round, &replayed_out_);
      if (!by_rounds && rounds != nullptr)
        rounds->PassIdleRounds(&replayed_out_);  // as the primary
      break;
    case pb::REPLICA_WORKER_DEAD:
      shard->OnWorkerDead(origin, &replayed_out_);
      if (!by_rounds && rounds != nullptr) rounds->PassIdleRounds(&replayed_out_);
      break;
    case pb::REPLICA_IDLE:
      // Replicated by results, this copy cannot tell alone whether the open round had pushes.
      if (rounds != nullptr && rounds->IdleUntil() == round) {
        rounds->PassIdleRounds(&replayed_out_);
      } else if (shard->round() != round) {
        return FailedPreconditionError("idle rounds up to " + std::to_string(round) +
                                       " for a copy at round " + std::to_string(shard->round()) +
                                       " with a live worker or no joiner there");
      }
      break;
    case pb::REPLICA_WORKER_REJOINED:
      shard->OnWorkerRejoined(origin);
      break;
    case pb::REPLICA_ROUND:
      if (rounds == nullptr) {
        return FailedPreconditionError("an ASP/SSP shard has no rounds to apply");
      }
#ifdef SIEVE_TESTING_DROP_REPLICATED_ROUND
      // A deliberately broken build, for the chaos harness's self-test (tests/chaos): this copy
      // loses the values of the round it replays as its SIEVE_TESTING_DROP_REPLICATED_ROUND-th
      // event, and answers the workers with that empty round.
      if (host_->stats().replayed + 1 == SIEVE_TESTING_DROP_REPLICATED_ROUND)
        return rounds->ApplyRound(round, {}, {}, false, &replayed_out_);
#endif
      return rounds->ApplyRound(round, msg.indices, msg.values, msg.dense(), &replayed_out_);
    default:  // WellFormedReplicate checked it is valid; the others are handled before
      break;
  }
  return Status::Ok();
}

void MirrorReplica::OnServerDead(int rank) {
  // The primary this copy follows died: a table that moved the shard already (a handover whose
  // REPLICA_HANDOVER never came, or the failover's table, installed before this event) applies
  // now.
  if (role_ != Role::kRetired && rank == following_) return OnTable();
  owed_snapshots_.erase(rank);
}

void MirrorReplica::OnTable() {
  if (role_ == Role::kRetired) return;
  const int primary = host_->link()->ShardPrimary(host_->shard_rank());
  if (primary == following_) {
    if (role_ == Role::kHandedOver) role_ = Role::kMirror;  // the table caught up with it
    return;
  }
  if (role_ == Role::kHandedOver) return;  // a table from before this server's handover
  // The table moved the shard away from the primary this copy follows. While that primary is
  // alive it is a handover, whose REPLICA_HANDOVER (on another connection than the table) is on
  // its way: the event moves this copy in order (TakeOver, or following the new primary). A
  // failover's primary is dead: the copy named goes on from what it has, the others retire.
  if (!host_->link()->ServerDead(following_)) return;
  if (primary == host_->server_rank() && role_ != Role::kRebuilding) return Promote();
  role_ = Role::kRetired;  // another copy took the shard over
  LOG(WARNING) << "shard " << host_->shard_rank() << " failed over to server " << primary
               << "; this server's copy of it is retired";
}

void MirrorReplica::Promote() {
  ShardServer* shard = host_->shard();
  ServerLink* link = host_->link();
  ReplicationStats& stats = host_->stats();
  stats.promoted = true;
  stats.promoted_round = shard->round();
  // The primary from now on (this role is kept until the next switch: it ends the promotion).
  host_->SwitchRole(std::make_unique<PrimaryReplica>(host_, seq_, std::vector<int>{},
                                                     std::move(owed_snapshots_)));
  // The deaths and re-admissions the scheduler announced that the dead primary had not replicated.
  for (int w = 0; w < static_cast<int>(host_->options().num_workers); ++w) {
    const bool dead = link->WorkerDead(w);
    if (dead && shard->counts(w)) {
      shard->OnWorkerDead(w, host_->out());
    } else if (!dead && !shard->counts(w) && !shard->readmitted(w)) {
      shard->OnWorkerRejoined(w);
    }
  }
  LOG(WARNING) << "failover: server " << host_->server_rank() << " serves shard "
               << host_->shard_rank() << " from its copy (" << seq_ << " events replayed, round "
               << shard->round() << "); the shard has no backup until a replacement is rebuilt";
  host_->Flush();
}

void MirrorReplica::TakeOver(int from, uint64_t seq) {
  ++host_->stats().handovers;
  LOG(WARNING) << "handover: server " << host_->server_rank() << " serves shard "
               << host_->shard_rank() << " again (round " << host_->shard()->round() << ", " << seq
               << " events)";
  // The former primary holds every event so far: it is the only backup.
  host_->SwitchRole(std::make_unique<PrimaryReplica>(host_, seq, std::vector<int>{from},
                                                     std::move(owed_snapshots_)));
}

}  // namespace sieve
