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
// shard from the state it has, without backups (the other copies are retired). The service
// keeps admission, unpacking and reply encoding; the replication is its one role object at a time
// (replica_role.h: a PrimaryReplica or a MirrorReplica), which it hands every event, REPLICATE and
// scheduler notice, and which replaces itself at a promotion, a hand-back or a take-over.
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
// outlive it; owns its replication role. Installs itself as the shard's part sink (split BSP
// replies go out as soon as each part is applied).
// Thread-safety: not thread-safe; one thread at a time calls OnData / OnWorkerDead /
// OnWorkerRejoined (sieve-server: the node's I/O thread, behind a gate that closes at shutdown).
#ifndef SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_
#define SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
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

class ReplicaRole;

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

  // This server's one part in its shard's replication at a time (the ReplicaRole object that
  // has it: replica_role.h).
  enum class Role {
    kPrimary,     // serves the workers and replicates to its backups
    kRebuilding,  // a rebuilt copy waiting for its primary's snapshot (refuses other events)
    kMirror,      // a copy replaying the events of the primary it follows
    kHandedOver,  // a former primary now following the server it handed the shard back to,
                  // until a node table says so (older tables are ignored meanwhile)
    kRetired,     // a copy whose shard failed over to another copy: it neither serves nor replays
  };
  Role role() const;
  // Serves workers (primary), replays (a mirror: rebuilding, following or handed over), or
  // neither (retired).
  bool primary() const { return role() == Role::kPrimary; }
  bool mirror() const {
    const Role r = role();
    return r == Role::kRebuilding || r == Role::kMirror || r == Role::kHandedOver;
  }
  const ReplicationStats& replication() const { return repl_; }
  // Live backups this primary replicates to (none unless primary).
  const std::vector<int>& backups() const;
  // Refusals in a row (ERROR_NOT_REPLICA, no acknowledgement between them) after which a backup
  // is dropped (PrimaryReplica::OnReplicaRefused).
  static constexpr int kMaxRefusals = 3;

 private:
  class Host;  // what the role reaches of the service (ReplicaHost)

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

  // OnData's steps: a REPLICATE or REPLICATE_ACK (to the role); a worker's request this server
  // does not serve (ERROR_NOT_PRIMARY); a JOIN; a worker's PUSH, INIT or PULL_DENSE admitted for
  // this shard: the event on the shard (replicated first), its replies into out_; OnWorkerPush
  // also traces and measures it; an ERROR from a peer.
  void OnReplicationData(const Message& msg);
  void RefuseNotPrimary(const Message& msg);
  void OnJoin(const Message& msg, int worker);
  void OnWorkerData(const Message& msg, int worker);
  void OnWorkerPush(const Message& msg, int worker, std::span<const float> values);
  void OnPeerError(const Message& msg);
  // After a JOIN or a death on the primary: the rounds nobody will push pass at once
  // (RoundShard::IdleUntil), as REPLICA_IDLE to copies replicated by results.
  void PassIdleRounds();
  // After each data message: the replies flushed (or held), the checkpoint and the snapshots due.
  void FinishDataMessage();
  // The replies in out_ sent now, or held by the role until the backups have their events.
  void Flush();
  // Sends every reply of `replies` (ERRORs, acks, UPDATE/DENSE whole or in parts).
  void Send(const Outbox& replies);
  // Sends pairs [from, to) of reply `r` as part `part` of `parts` (1 = unsplit). False when the
  // encoding or the send failed (logged).
  bool SendSlice(const Reply& r, int peer, uint32_t part, uint32_t parts, size_t from, size_t to);
  // SendSlice's payload `p` of pairs [from, to) of reply `r`, as coded for every recipient within
  // this flush; `fresh`: coded now, on its first send.
  const CodedSlice& CodeSlice(const Reply& r, size_t from, size_t to, DataPayload* p, bool* fresh);
  // A header-only acknowledgement (JOIN_ACK, INIT_ACK).
  void SendAck(const Reply& r, int peer);
  // ERROR_NOT_REPLICA to node `sender`, the last event applied `seq` as its round.
  void RefuseReplicate(int sender, uint64_t seq, const std::string& why);
  int server_rank() const {
    return options_.server_rank >= 0 ? options_.server_rank : options_.rank;
  }
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
  std::vector<float> unpacked_;            // fp16 / bf16 push values as fp32
  std::map<SliceKey, CodedSlice> slices_;  // the coded slices of this flush

  // Replication: the role (never null) and the one it replaced last, kept until the next switch
  // (ReplicaHost::SwitchRole); the counters every role adds to.
  ReplicationStats repl_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<ReplicaRole> role_;
  std::unique_ptr<ReplicaRole> replaced_role_;
};

}  // namespace sieve

#endif  // SIEVE_SERVER_SERVICE_SHARD_SERVICE_H_
