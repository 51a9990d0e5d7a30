// MirrorReplica: the role of a copy that does not serve its shard: it follows one primary
// (ShardService::Role::kMirror), waits for that primary's snapshot (kRebuilding: a replacement
// server's empty copy), follows the server it handed the shard back to until a node table says so
// (kHandedOver), or, once the shard failed over to another copy, does nothing (kRetired). It
// replays the primary's REPLICATE events in their order on its own copy (the same state machine
// on the same inputs: the same weights and the same replies, sent only when this copy is the
// event's replier) and acknowledges each; it installs a snapshot as a rebuild. It becomes the
// primary (a PrimaryReplica) when a node table names it after its primary died (a promotion:
// first the worker deaths and re-admissions the dead primary had not replicated) or when its
// primary hands the shard back to it (REPLICA_HANDOVER naming this server: a take-over).
//
// Ownership: borrows the host (replica_role.h).
// Thread-safety: not thread-safe (the service's thread).
#ifndef SIEVE_SERVER_SERVICE_MIRROR_REPLICA_H_
#define SIEVE_SERVER_SERVICE_MIRROR_REPLICA_H_

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "server/service/replica_role.h"

namespace sieve {

class MirrorReplica final : public ReplicaRole {
 public:
  // A copy in `role` (not kPrimary) that follows server `following` and has replayed `seq`
  // events. `owed_snapshots`: the rebuilds this copy still owed when it handed the shard back as
  // its primary, sent if it serves the shard again.
  MirrorReplica(ReplicaHost* host, ShardService::Role role, int following, uint64_t seq,
                std::set<int> owed_snapshots);
  MirrorReplica(const MirrorReplica&) = delete;
  MirrorReplica& operator=(const MirrorReplica&) = delete;

  ShardService::Role role() const override { return role_; }
  uint64_t seq() const override { return seq_; }
  const std::vector<int>& backups() const override { return no_backups_; }

  // A copy that does not serve the shard applies no worker event of its own: nothing to
  // replicate, hold or send.
  void Replicate(pb::ReplicaEvent /*event*/, int /*worker*/, uint64_t /*round*/,
                 std::span<const uint32_t> /*indices*/, std::span<const float> /*values*/,
                 bool /*dense*/) override {}
  void ReplicateCompletedRound(uint64_t /*before*/) override {}
  void SendPendingSnapshots() override {}
  bool HoldReplies(Outbox* /*replies*/) override { return false; }

  // A REPLICATE of the primary it follows (false for any other sender, or when retired): replayed
  // in order and acknowledged, or refused (ERROR_NOT_REPLICA) with nothing changed.
  bool OnReplicate(const Message& msg) override;
  bool OnReplicateAck(const Message& /*msg*/) override { return false; }  // it has no backups
  void OnReplicaRefused(int /*rank*/) override {}

  // The primary it follows died: the latest node table applies (OnTable).
  void OnServerDead(int rank) override;
  void OnServerRejoined(int /*rank*/) override {}  // its primary rebuilds replacements
  // When the primary it follows is dead and the table moved the shard: promoted if the table
  // names this server, else retired. While that primary is alive a move is a hand-back, applied
  // when its REPLICA_HANDOVER arrives.
  void OnTable() override;
  void OnTick() override {}

 private:
  // OnReplicate's steps: the ERROR_NOT_REPLICA refusal and the acknowledgement (both of seq_ as it
  // is then) to node `sender`; whether the event and origin fit each other (fp32 values only); a
  // snapshot part (residual, head, a death or re-admission within it); an event of the stream in
  // its order, a hand-back, and the replay of a worker event or round result (its replies into
  // replayed_out_; an error only for a round result or idle rounds the copy cannot apply).
  void Refuse(int sender, const std::string& why);
  void AckReplicate(int sender);
  bool WellFormedReplicate(const Message& msg) const;
  void OnSnapshotPart(const Message& msg, pb::ReplicaEvent ev);
  void InstallSnapshot(const Message& msg);
  void OnStreamEvent(const Message& msg, pb::ReplicaEvent ev);
  void OnHandover(const Message& msg);
  void ApplyEvent(const Message& msg, pb::ReplicaEvent ev);
  Status ReplayEvent(const Message& msg, pb::ReplicaEvent ev);
  // The role changes: a promotion at failover (the deaths and re-admissions the scheduler
  // announced that the dead primary had not replicated are applied first), a take-over of the
  // shard handed back by server `from` after `seq` events.
  void Promote();
  void TakeOver(int from, uint64_t seq);

  ReplicaHost* const host_;
  ShardService::Role role_;
  int following_;  // the primary whose events it replays
  uint64_t seq_;   // events replayed
  std::set<int> owed_snapshots_;
  std::vector<float> snapshot_residual_;  // a REPLICA_SNAPSHOT_RESIDUAL, until the head
  Outbox replayed_out_;                   // the replies of a replayed event
  const std::vector<int> no_backups_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_MIRROR_REPLICA_H_
