// ShardService: a server's message handling — admission of each data message (sender is a worker,
// message is for this shard, type a server accepts), fp16 / bf16 unpacking, the ShardServer event,
// and the encoding of every reply it produces (JOIN_ACK, INIT_ACK, ERROR, UPDATE/DENSE whole or in
// parts; per slice one index coding, one 16-bit conversion and one CRC-32C, shared by every
// recipient).
//
// Reply values (options.reply_values): the shard's weights are fp32 (and accumulate in fp32 or
// wider: ShardServer); an UPDATE or DENSE carries them as they are (kFp32) or each rounded to
// binary16 / bfloat16 (to nearest even, a finite weight beyond fp16's range saturating to
// ±65504). Every value a worker receives is thus round(w[i]) of the server's weight at that
// index, and a replica made only of received values (the dense pull at start, then UPDATEs) is
// round(w) of the servers' weights wherever it was last written, the same bits on every worker.
// sieve-server owns one and feeds it from its Node's I/O thread; it sees the node only through
// ServerLink, so unit tests drive it with a recorder.
//
// Replication (scheduler --replication, docs/architecture.md "Replicated shards"): a service is
// the shard's primary or a mirror of it. A primary sends every event it applies to its shard (a
// worker's PUSH, INIT or JOIN, a worker's death or re-admission) to each live backup as a
// REPLICATE, numbered 1, 2, ... in the order it applies them. A mirror replays the events in that
// order on its own copy (the same state machine on the same inputs: bitwise the same weights,
// rounds, clocks and residuals, and the same replies) and acknowledges each. The replies of a
// replicated event are sent by the shard's last live backup (the REPLICATE's replier, as the tail
// of chain replication), once it applied the event; the other copies discard theirs. The primary
// keeps its own until every live backup acknowledged the event: if the replier dies first, the
// primary sends them itself once the remaining backups have the event. Replies to events that are
// not replicated (a PULL_DENSE) wait for the same acknowledgements and go out from the primary.
// So a reply a worker has seen reflects only events every live backup holds: it is never lost
// with the primary. A mirror answers workers ERROR_NOT_PRIMARY. When the node table
// names this server the shard's primary (the scheduler's failover), the mirror is promoted: it
// applies the worker deaths and re-admissions the dead primary had not replicated and serves the
// shard from the state it has, without backups (the other copies are retired).
//
// Timeline (set_trace, docs/tracing.md): on the thread "shard N" (tid N + 1) of the server's trace,
// each PUSH of a recorded round is an "aggregate" span (the 16-bit unpacking, replication and
// ShardServer::OnPush: the merge into the round, and for the push that completes a BSP round the
// update pass and the reply's arrays; split replies' parts are sent inside it) with the worker,
// the bytes received and whether it completed the round (BSP; under ASP/SSP every push is
// applied at once), and each UPDATE or DENSE slice sent is
// an "encode" span (its index coding, 16-bit values and checksum when first made in this flush,
// then the frames) followed by a "reply" span (handing the frames to the link, which queues them
// and does not wait for the network), with the worker, part and bytes.
//
// Errors from peers never reach the caller: a rejected message is answered with an ERROR naming
// the reason (docs/protocol.md) and changes no state; a failed send is logged.
//
// Ownership: borrows the shard, the link and the optional metrics and checkpointer, which must
// outlive it. Installs itself as the shard's part sink (split BSP replies go out as soon as each
// part is applied).
// Thread-safety: not thread-safe; one thread at a time calls OnData / OnWorkerDead /
// OnWorkerRejoined (sieve-server: the node's I/O thread, behind a gate that closes at shutdown).
#ifndef SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_
#define SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "metrics/daemon_metrics.h"
#include "net/rejection_log.h"
#include "proto/codec.h"
#include "server/checkpoint/checkpointer.h"
#include "server/service/server_link.h"
#include "server/shard/shard_server.h"
#include "trace/trace_writer.h"

namespace sieve {

struct ShardServiceOptions {
  int rank = 0;          // the shard this service serves (its own server's rank without failover)
  int server_rank = -1;  // this server's rank (-1 = rank)
  uint32_t num_workers = 1;  // worker ranks are [0, num_workers)
  bool bsp = true;           // what the rounds metric counts: BSP rounds, else pushes applied
  // A whole sparse UPDATE of more pairs than this goes out in parts (at most kMaxReplyParts);
  // 0 = always whole.
  uint64_t reply_part_pairs = 0;
  // Code each sparse reply's indices compactly (protocol 7, docs/protocol.md "Index coding"),
  // once per slice for every recipient; false = raw uint32 indices (`--wire=v4`).
  bool compact_indices = true;
  // The precision of the values of UPDATE and DENSE replies (`--wire_values`), converted once per
  // slice for every recipient. The shard stays fp32.
  ValueType reply_values = ValueType::kFp32;
  // Replication: a mirror replays the primary's REPLICATE events; a primary sends its events to
  // `backups` (server ranks) and waits for their acknowledgements before replying.
  bool mirror = false;
  std::vector<int> backups;
  // A primary replicates BSP rounds by their result (REPLICA_ROUND: the round's UPDATE), not by
  // their pushes: its backups then write the result instead of aggregating every push again. Only
  // for BSP without backup workers or two-way compression (RoundShard::ApplyRound); the daemon
  // sets it where it holds.
  bool replicate_rounds = false;
  // Rebuild (rebuildable: BSP replicated by round results, ASP and SSP; not BSP with backup
  // workers or two-way compression, whose open round a snapshot does not carry): a mirror created
  // empty on a replacement server, waiting for its primary's snapshot (REPLICA_SNAPSHOT); and, on
  // a primary, the servers that get a snapshot of the shard and become its backups when the
  // scheduler re-admits them (the shard's own server and the r after it in ring order, but this
  // one).
  bool rebuildable = false;
  bool awaiting_snapshot = false;
  std::vector<int> rebuild_into;
  // A primary resends a backup's unacknowledged events after this long without progress (OnTick).
  std::chrono::milliseconds replicate_resend{200};
};

// What replication did (the server's summary line).
struct ReplicationStats {
  uint64_t events = 0;          // events sent to backups (as primary; once per event)
  uint64_t resent = 0;          // REPLICATEs sent again after replicate_resend
  uint64_t replayed = 0;        // events replayed (as mirror)
  uint64_t replies_sent = 0;    // replies a mirror sent as its events' replier
  uint64_t held_replies = 0;    // replies that waited for acknowledgements
  uint64_t backups_lost = 0;    // backups dropped because they died or refused to follow
  bool promoted = false;        // this mirror took over the shard (failover)
  uint64_t snapshots_sent = 0;  // rebuilds of replacement servers (as primary)
  bool rebuilt = false;         // this copy came from a snapshot (a replacement server)
  uint64_t handovers = 0;       // shards handed back to their own server (as primary) or taken
  uint64_t promoted_round = 0;  // the shard's round (BSP) when it did
  uint64_t rebases = 0;         // round jumps (a resync) after which the copies got a snapshot
};

class ShardService {
 public:
  // metrics and checkpointer may be null (no metrics; no checkpoints).
  ShardService(const ShardServiceOptions& options, ShardServer* shard, ServerLink* link,
               DaemonMetrics* metrics, ShardCheckpointer* checkpointer);
  ShardService(const ShardService&) = delete;
  ShardService& operator=(const ShardService&) = delete;
  ~ShardService();

  // One validated data-plane message from a known peer (Node::set_on_data).
  void OnData(Message msg);
  // The scheduler declared worker `rank` dead / re-admitted it under a new instance.
  void OnWorkerDead(int rank);
  void OnWorkerRejoined(int rank);
  // Replication: server `rank` died (a backup of this shard is no longer waited for; a mirror
  // following it applies the table); a new node table arrived (when the primary a mirror follows
  // is dead, a mirror named primary is promoted and one whose shard moved elsewhere retires; while
  // it is alive the move is a handover, applied when its REPLICA_HANDOVER arrives); time passed (a
  // primary resends what a backup has not acknowledged).
  void OnServerDead(int rank);
  // Replication: server `rank` was re-admitted (a replacement process). A primary whose
  // rebuild_into names it drops the rank's previous process as a backup (if it counted it),
  // sends the new one a snapshot and counts it as a backup from then on.
  void OnServerRejoined(int rank);
  void OnTable();
  void OnTick();

  // Records the timeline of the pushes and replies of recorded rounds in `trace` (borrowed; it
  // must outlive the calls that use it; null = none) and names its thread.
  void set_trace(TraceWriter* trace);

  // This server's one part in its shard's replication at a time.
  enum class Role {
    kPrimary,     // serves the workers and replicates to its backups
    kRebuilding,  // a rebuilt copy waiting for its primary's snapshot (refuses other events)
    kMirror,      // a copy replaying the events of the primary it follows
    kHandedOver,  // a former primary now following the server it handed the shard back to,
                  // until a node table says so (older tables are ignored meanwhile)
    kRetired,     // a copy whose shard failed over to another copy: it neither serves nor replays
  };
  Role role() const { return role_; }
  // Serves workers (primary), replays (a mirror: rebuilding, following or handed over), or
  // neither (retired).
  bool primary() const { return role_ == Role::kPrimary; }
  bool mirror() const {
    return role_ == Role::kRebuilding || role_ == Role::kMirror || role_ == Role::kHandedOver;
  }
  const ReplicationStats& replication() const { return repl_; }
  // Live backups this primary replicates to.
  const std::vector<int>& backups() const { return backups_; }
  // Refusals in a row (ERROR_NOT_REPLICA, no acknowledgement between them) after which a backup
  // is dropped (see OnReplicaRefused).
  static constexpr int kMaxRefusals = 3;

 private:
  // OnData's steps for a worker's PUSH, INIT or PULL_DENSE admitted for this shard: the event on
  // the shard (replicated first), its replies into out_; OnWorkerPush also traces and measures it.
  void OnWorkerData(const Message& msg, int worker);
  void OnWorkerPush(const Message& msg, int worker, std::span<const float> values);
  // After each data message: the replies flushed (or held), the checkpoint and the snapshots due.
  void FinishDataMessage();
  void Flush();
  // Sends every reply of `replies` (ERRORs, acks, UPDATE/DENSE whole or in parts).
  void Send(const Outbox& replies);
  // Replication (shard_service_replication.cc). Replicate: the primary's event, sent to every
  // live backup before it is applied (no-op without backups). OnReplicate / OnReplicateAck: a
  // REPLICATE (mirror) and its acknowledgement (primary). Release: sends the held replies every
  // live backup has acknowledged.
  void Replicate(pb::ReplicaEvent event, int worker, uint64_t round,
                 std::span<const uint32_t> indices, std::span<const float> values, bool dense);
  void SendEvent(int backup, uint64_t index);  // unacked_[index] to `backup`
  // replicate_rounds: after an event of the primary, the round it completed (if `before`, the
  // shard's round before the event, is now behind) as a REPLICA_ROUND.
  void ReplicateCompletedRound(uint64_t before);
  // After a JOIN or a death on the primary: the rounds nobody will push pass at once
  // (RoundShard::IdleUntil), as REPLICA_IDLE to copies replicated by results.
  void PassIdleRounds();
  void OnReplicate(const Message& msg);
  // OnReplicate's steps (a mirror): the ERROR_NOT_REPLICA refusal and the acknowledgement (both
  // of seq_ as it is then) to `sender`; whether the event and origin fit each other (fp32
  // values only); a snapshot part (head, residual, a death or re-admission within it); one
  // worker event or round result replayed on the shard (its replies into replayed_out_), an
  // error only for a round result the shard cannot apply.
  void RefuseReplicate(int sender, const std::string& why);
  void AckReplicate(int sender);
  bool WellFormedReplicate(const Message& msg) const;
  void OnReplicatedSnapshotPart(const Message& msg, pb::ReplicaEvent ev);
  Status ReplayEvent(const Message& msg, pb::ReplicaEvent ev);
  void OnReplicateAck(const Message& msg);
  // A backup refused a REPLICATE (ERROR_NOT_REPLICA). A gap is closed by the next resend; a backup
  // that refuses kMaxRefusals times in a row without acknowledging anything in between holds a
  // copy that cannot follow (it is not at the primary's round): it is dropped as if dead, so the
  // shard goes on without it instead of waiting for it for ever.
  void OnReplicaRefused(int backup);
  void Release();
  uint64_t MinAcked() const;  // the least seq every live backup acknowledged (seq_ without any)
  bool Holding() const { return !backups_.empty() && MinAcked() < seq_; }
  void Promote();
  // Hand-back: a primary that is not the shard's own server gives the shard back to it once that
  // server's rebuilt copy caught up and nothing is in flight (every event acknowledged, no reply
  // held); the server taking it becomes the primary (TakeOver) and this one its backup.
  void MaybeHandBack();
  void TakeOver(int from, uint64_t seq);
  // A BSP shard replicated by rounds whose round jumped from `before` (a resync after a restore):
  // every backup is sent a snapshot as of now (once SnapshotReady), its replies released at once.
  void RebaseBackups(uint64_t before);
  // The rebuild: the snapshot to `backup` (primary), its installation (mirror).
  // SendPendingSnapshots: the snapshots waiting for the shard to be SnapshotReady (a BSP round
  // replicated by pushes in progress), once it is; called after every event.
  void SendPendingSnapshots();
  void SendSnapshot(int backup);
  void InstallSnapshot(const Message& msg);
  // Encodes and sends one REPLICATE of `event` to `backup` (SendEvent's and SendSnapshot's).
  void SendReplicate(int backup, uint64_t seq, pb::ReplicaEvent event, int origin, int replier,
                     uint64_t round, bool dense, std::span<const uint32_t> indices,
                     std::span<const float> values, std::shared_ptr<const void> keepalive,
                     const pb::SnapshotClocks* clocks = nullptr);
  int server_rank() const {
    return options_.server_rank >= 0 ? options_.server_rank : options_.rank;
  }
  // Sends pairs [from, to) of reply `r` as part `part` of `parts` (1 = unsplit). False when the
  // encoding or the send failed (logged).
  bool SendSlice(const Reply& r, int peer, uint32_t part, uint32_t parts, size_t from, size_t to);
  // A header-only acknowledgement (JOIN_ACK, INIT_ACK).
  void SendAck(const Reply& r, int peer);
  int trace_tid() const { return options_.rank + 1; }

  const ShardServiceOptions options_;
  ShardServer* const shard_;
  ServerLink* const link_;
  DaemonMetrics* const metrics_;
  ShardCheckpointer* const checkpointer_;
  Outbox out_;
  // Lines a peer's message can cause (its ERRORs, replies that cannot be sent to it): at most 20
  // per 10 s (net/rejection_log.h), so a flood of them cannot flood the server's log.
  RejectionLog peer_log_{"peer-caused server events"};
  TraceWriter* trace_ = nullptr;
  std::vector<float> unpacked_;  // fp16 / bf16 push values as fp32
  // The index frame, 16-bit values and checksum of each slice sent within one flush (replies to
  // several workers share their buffer; the outbox and `keepalive` keep every buffer alive, so an
  // address names one content until the flush ends): made once, sent to every recipient.
  struct CodedSlice {
    std::shared_ptr<const EncodedIndices> encoded;        // null: raw indices (or a dense slice)
    std::shared_ptr<const std::vector<uint16_t>> packed;  // reply_values fp16 / bf16; else null
    std::shared_ptr<const void> keepalive;  // what the frames borrow: the buffer (and `packed`)
    uint32_t crc = 0;
  };
  using SliceKey = std::tuple<const ReplyBuffer*, size_t, size_t>;  // buffer, from, to
  std::map<SliceKey, CodedSlice> slices_;

  // Replication state.
  Role role_;
  std::vector<int> backups_;       // live backups (server ranks)
  std::map<int, uint64_t> acked_;  // backup -> highest seq it acknowledged
  std::map<int, int> refusals_;    // backup -> ERROR_NOT_REPLICA since its last acknowledgement
  std::map<int, uint64_t> snapshot_seq_;  // rebuilt backup -> its snapshot's seq, until it acked it
  std::vector<float> snapshot_residual_;  // its REPLICA_SNAPSHOT_RESIDUAL, until the head
  std::set<int> pending_snapshots_;       // a primary: replacements whose snapshot waits
  int following_ = -1;                    // a mirror: the primary whose events it replays
  int hand_back_to_ = -1;                 // a primary: the shard's own server, rebuilt
  std::map<int, std::chrono::steady_clock::time_point> last_progress_;  // backup -> last ack/send
  uint64_t seq_ = 0;  // events applied (primary: sent; mirror: replayed)
  // The events not yet acknowledged by every live backup, in seq order (seq = first_unacked_ + i).
  struct Event {
    pb::ReplicaEvent event;
    int worker;
    int replier;  // the backup that sends its replies (-1: the primary)
    uint64_t round;
    bool dense;
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };
  std::deque<std::shared_ptr<const Event>> unacked_;  // shared: frames in flight borrow them
  uint64_t first_unacked_ = 1;
  // Replies waiting for acknowledgements: each with the seq every live backup must acknowledge
  // first and who sends it then (a backup's rank: it did, so it is dropped; -1: the primary).
  struct HeldReply {
    uint64_t seq;
    int replier;
    Reply reply;
  };
  std::deque<HeldReply> held_;
  int replier_ = -1;     // the replier of the event being handled (Replicate), until Flush
  Outbox replayed_out_;  // a mirror's replies, discarded
  ReplicationStats repl_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_
