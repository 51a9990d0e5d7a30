// PrimaryReplica: the role of the copy that serves its shard (ShardService::Role::kPrimary). It
// numbers the events it applies 1, 2, ... and sends each to every live backup as a REPLICATE
// before it is applied, keeps the events until every live backup acknowledged them (resending a
// backup's after ShardServiceOptions::replicate_resend without progress), and holds the replies
// until then; a backup that died or refuses to follow is dropped and the replies it was to send
// are sent from here. It rebuilds replacement servers from snapshots, rebases its copies after a
// jump of rounds, and hands the shard back to its own server once that server's rebuilt copy
// caught up and nothing is in flight (then it follows that server: a MirrorReplica).
//
// Ownership: borrows the host (replica_role.h). The events it sent are shared with the frames in
// flight that borrow their arrays.
// Thread-safety: not thread-safe (the service's thread).
#ifndef SIEVE_SERVER_SERVICE_PRIMARY_REPLICA_H_
#define SIEVE_SERVER_SERVICE_PRIMARY_REPLICA_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "server/service/replica_role.h"

namespace sieve {

class PrimaryReplica final : public ReplicaRole {
 public:
  // A primary that has applied `seq` events, every one held by each of `backups` (in ring order;
  // the last answers the workers). `pending_snapshots`: replacement servers whose rebuild waits
  // for the shard to be ready for a snapshot.
  PrimaryReplica(ReplicaHost* host, uint64_t seq, std::vector<int> backups,
                 std::set<int> pending_snapshots);
  PrimaryReplica(const PrimaryReplica&) = delete;
  PrimaryReplica& operator=(const PrimaryReplica&) = delete;

  ShardService::Role role() const override { return ShardService::Role::kPrimary; }
  uint64_t seq() const override { return seq_; }
  const std::vector<int>& backups() const override { return backups_; }

  void Replicate(pb::ReplicaEvent event, int worker, uint64_t round,
                 std::span<const uint32_t> indices, std::span<const float> values,
                 bool dense) override;
  void ReplicateCompletedRound(uint64_t before) override;
  void SendPendingSnapshots() override;
  bool HoldReplies(Outbox* replies) override;

  bool OnReplicate(const Message& msg) override;  // a primary follows nobody: false
  bool OnReplicateAck(const Message& msg) override;
  // A gap is closed by the next resend; a backup that refuses ShardService::kMaxRefusals times in
  // a row without acknowledging anything in between holds a copy that cannot follow (it is not at
  // the primary's round): it is dropped as if dead, so the shard goes on without it instead of
  // waiting for it for ever.
  void OnReplicaRefused(int rank) override;

  // A backup that died is no longer waited for; the replies it was to send go out from here once
  // the remaining backups have their events.
  void OnServerDead(int rank) override;
  // A replacement under a rank of options().rebuild_into: its previous process is dropped as a
  // backup and the new one gets a snapshot, then counts as the last backup.
  void OnServerRejoined(int rank) override;
  void OnTable() override {}  // a table moves a primary's shard only by its hand-back
  void OnTick() override;     // resends what a backup has not acknowledged for a while

 private:
  // An event not yet acknowledged by every live backup.
  struct Event {
    pb::ReplicaEvent event;
    int worker;
    int replier;  // the backup that sends its replies (-1: the primary)
    uint64_t round;
    bool dense;
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };
  // A reply waiting for acknowledgements: the seq every live backup must acknowledge first and who
  // sends it then (a backup's rank: it did, so it is dropped; -1: the primary).
  struct HeldReply {
    uint64_t seq;
    int replier;
    Reply reply;
  };

  void SendEvent(int backup, uint64_t index);  // unacked_[index] to `backup`
  // Encodes and sends one REPLICATE of `event` to `backup` (SendEvent's and SendSnapshot's).
  void SendReplicate(int backup, uint64_t seq, pb::ReplicaEvent event, int origin, int replier,
                     uint64_t round, bool dense, std::span<const uint32_t> indices,
                     std::span<const float> values, std::shared_ptr<const void> keepalive,
                     const pb::SnapshotClocks* clocks = nullptr);
  // The rebuild: the shard as of now to `backup` (its clocks encoded by SnapshotClocksOf), which
  // becomes the last backup.
  void SendSnapshot(int backup);
  // A BSP shard replicated by rounds whose round jumped from `before` (a resync after a restore):
  // every backup is sent a snapshot as of now (once SnapshotReady), its replies released at once.
  void RebaseBackups(uint64_t before);
  // The held replies whose replier is one of `repliers` (dropped as backups) go out from here.
  void ReclaimReplies(const std::vector<int>& repliers);
  // Sends the held replies every live backup has acknowledged, and forgets their events.
  void Release();
  uint64_t MinAcked() const;  // the least seq every live backup acknowledged (seq_ without any)
  bool Holding() const { return !backups_.empty() && MinAcked() < seq_; }
  // Hand-back: a primary that is not the shard's own server gives the shard back to it once that
  // server's rebuilt copy caught up and nothing is in flight (every event acknowledged, no reply
  // held); the server taking it becomes the primary and this one its backup (a MirrorReplica).
  void MaybeHandBack();

  ReplicaHost* const host_;
  std::vector<int> backups_;       // live backups (server ranks)
  std::map<int, uint64_t> acked_;  // backup -> highest seq it acknowledged
  std::map<int, int> refusals_;    // backup -> ERROR_NOT_REPLICA since its last acknowledgement
  std::map<int, uint64_t> snapshot_seq_;  // rebuilt backup -> its snapshot's seq, until it acked it
  std::set<int> pending_snapshots_;       // replacements whose snapshot waits
  int hand_back_to_ = -1;                 // the shard's own server, rebuilt
  std::map<int, std::chrono::steady_clock::time_point> last_progress_;  // backup -> last ack/send
  uint64_t seq_;                                                        // events applied (and sent)
  // The events not yet acknowledged by every live backup, in seq order (seq = first_unacked_ + i);
  // shared: frames in flight borrow them.
  std::deque<std::shared_ptr<const Event>> unacked_;
  uint64_t first_unacked_;
  std::deque<HeldReply> held_;
  int replier_ = -1;  // the replier of the event being handled (Replicate), until HoldReplies
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_PRIMARY_REPLICA_H_
