// ReplicaRole: a server's part in its shard's replication (ShardService::Role, docs/architecture.md
// "Replicated shards") as an object. ShardService holds one at a time and hands it the replication
// side of everything it handles: the primary's events before and after it applies them, the
// holding of their replies, REPLICATE and its acknowledgements and refusals, the scheduler's news
// and the resend clock. PrimaryReplica (primary_replica.h) serves the shard and replicates it;
// MirrorReplica (mirror_replica.h) follows a primary, or is retired. A role changes by replacing
// itself (ReplicaHost::SwitchRole): a promotion or a take-over makes a mirror a primary, a
// hand-back a primary a mirror.
//
// ReplicaHost is what a role reaches of the service that holds it: the options, the shard, the
// link, the replies of the event being handled and their sending, the counters, and the switch.
//
// Ownership: the service owns its role and its host, which outlive the role; a role borrows the
// host. A replaced role is kept alive until the next switch, so the call that replaced it may end
// in it.
// Thread-safety: not thread-safe; called on the service's thread only.
#ifndef SIEVE_SERVER_SERVICE_REPLICA_ROLE_H_
#define SIEVE_SERVER_SERVICE_REPLICA_ROLE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "metrics/daemon_metrics.h"
#include "net/rejection_log.h"
#include "proto/codec.h"
#include "proto/sieve.pb.h"
#include "server/service/server_link.h"
#include "server/service/shard_service.h"
#include "server/shard/shard_server.h"

namespace sieve {

class ReplicaRole;

class ReplicaHost {
 public:
  virtual ~ReplicaHost() = default;

  virtual const ShardServiceOptions& options() const = 0;
  virtual ShardServer* shard() = 0;
  virtual ServerLink* link() = 0;
  virtual DaemonMetrics* metrics() = 0;  // null: no metrics
  // Lines a peer's message can cause, rate-limited (net/rejection_log.h).
  virtual RejectionLog& peer_log() = 0;
  virtual ReplicationStats& stats() = 0;
  // The replies of the event being handled; Flush sends them, or the role holds them
  // (ReplicaRole::HoldReplies).
  virtual Outbox* out() = 0;
  virtual void Flush() = 0;
  // Sends `replies` now, encoded as every reply of the service.
  virtual void SendReplies(const Outbox& replies) = 0;
  // Refuses a REPLICATE from node `sender` (ERROR_NOT_REPLICA; its round: `seq`, the last event
  // applied).
  virtual void RefuseReplicate(int sender, uint64_t seq, const std::string& why) = 0;
  // Makes `next` the service's role at once (every later call of the service goes to it, Flush
  // included); the role replaced is kept alive until the next switch, so it may finish the call.
  virtual void SwitchRole(std::unique_ptr<ReplicaRole> next) = 0;

  int shard_rank() const { return options().rank; }
  int server_rank() const {
    return options().server_rank >= 0 ? options().server_rank : options().rank;
  }
};

class ReplicaRole {
 public:
  virtual ~ReplicaRole() = default;

  virtual ShardService::Role role() const = 0;
  // Events applied: sent to the backups (primary), replayed (mirror).
  virtual uint64_t seq() const = 0;
  // The live backups the shard is replicated to (none but on a primary).
  virtual const std::vector<int>& backups() const = 0;

  // The primary's events (the service applies worker events only as the primary; elsewhere these
  // do nothing). Replicate: an event about to be applied, sent to every live backup first (nothing
  // without backups). ReplicateCompletedRound: replicate_rounds, after an event: the round it
  // completed, if the shard's round was `before` and is now past it (or the copies' rebase on a
  // snapshot, after a jump of rounds). SendPendingSnapshots: after every event, the rebuilds'
  // snapshots that waited for the shard to be RoundShard::SnapshotReady.
  virtual void Replicate(pb::ReplicaEvent event, int worker, uint64_t round,
                         std::span<const uint32_t> indices, std::span<const float> values,
                         bool dense) = 0;
  virtual void ReplicateCompletedRound(uint64_t before) = 0;
  virtual void SendPendingSnapshots() = 0;
  // At the end of each event (ShardService's flush): true when `replies` wait for the backups'
  // acknowledgements, moved out of `replies` into the role; false: the service sends them now.
  virtual bool HoldReplies(Outbox* replies) = 0;

  // From other servers. OnReplicate: false when this role follows no primary that is the sender
  // (the service refuses it). OnReplicateAck: false when the sender is no live backup of this
  // role's (the service logs and ignores it). OnReplicaRefused: server `rank` answered a
  // REPLICATE with ERROR_NOT_REPLICA.
  virtual bool OnReplicate(const Message& msg) = 0;
  virtual bool OnReplicateAck(const Message& msg) = 0;
  virtual void OnReplicaRefused(int rank) = 0;

  // The scheduler's news and the passing of time (ShardService's methods of the same names).
  virtual void OnServerDead(int rank) = 0;
  virtual void OnServerRejoined(int rank) = 0;
  virtual void OnTable() = 0;
  virtual void OnTick() = 0;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_REPLICA_ROLE_H_
