// Node: the runtime every server and worker process runs on. It owns the node's Transport and an
// I/O thread that receives everything, answers the control plane (registration, node table,
// heartbeats, barriers, collectives, node deaths, shutdown) and hands data-plane messages (PUSH,
// UPDATE, PULL_DENSE, DENSE, ERROR from peers) to the role through Receive(). Malformed messages
// from peers never reach the role: the runtime answers them with an ERROR and counts them. Messages
// of another job (Header.job, proto/job_identity.h) are dropped unanswered and counted, and so are,
// under CURVE, messages claiming a node id whose key they do not come with (the scheduler's key
// from the allow-list, every other node's from the node table: NodeInfo.key). A peer's
// message that arrives before this node's first node table (the peer got the table first) is
// kept and handled once the table is in.
//
// Node ids: scheduler 0, server rank r -> 1 + r, worker rank r -> 1 + S + r.
//
// Thread-safety: every public method may be called from any thread, except Receive(), which is
// meant for one consumer thread. The on_node_dead callback runs on the I/O thread: keep it short.
#ifndef SIEVE_NET_NODE_H_
#define SIEVE_NET_NODE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/duration.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "net/inbound_filter.h"
#include "net/rejection_log.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/node_ids.h"
#include "proto/shards.h"
#include "proto/siphash.h"

namespace sieve {

struct NodeOptions {
  pb::Role role = pb::ROLE_WORKER;
  int rank = -1;          // requested rank; -1 = scheduler picks
  std::string scheduler;  // "host:port"
  TransportOptions transport;
  uint64_t num_params = 0;  // D declared at registration (workers); 0 = none
  // Servers: Register.rebuildable (a replacement under a failed-over rank can be rebuilt).
  bool rebuildable = false;
  // 0 disables heartbeats and scheduler-loss detection.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};  // scheduler silent this long -> node fails
  int register_attempts = 20;  // REGISTER sends before giving up on the scheduler
  std::chrono::milliseconds register_retry{500};      // wait for REGISTER_ACK per attempt
  std::chrono::milliseconds startup_timeout{600000};  // wait for the node table after the ack
  // The job token's key (proto/register_proof.h, JobKey of the token; zero = no token): answers
  // the scheduler's REGISTER_CHALLENGE with the proof that this node holds the token.
  SipKey job_key;
};

class Node {
 public:
  // Binds, registers with the scheduler and returns once the node table arrived. Errors:
  // Unavailable (bind failed, scheduler never answered), the scheduler's ERROR as
  // FailedPrecondition (e.g. registration full, version mismatch), DeadlineExceeded (no table).
  static StatusOr<std::unique_ptr<Node>> Start(const NodeOptions& options);

  // For harnesses that drive a node's message handling themselves (the control-message fuzzer,
  // tests/fuzz): a node that never registers and runs no I/O thread. `table` is installed as its
  // first node table, entry `id` being this node. Messages are then handed to it with
  // DispatchForTesting only. Errors: the transport's; InvalidArgument when `table` has no entry
  // `id`.
  static StatusOr<std::unique_ptr<Node>> CreateForTesting(const NodeOptions& options,
                                                          pb::NodeTable table, int id);
  // Handles one received message exactly as the I/O thread does, on the calling thread
  // (CreateForTesting nodes only).
  void DispatchForTesting(Frames frames);

  ~Node();  // stops the I/O thread and closes the transport (pending sends get 2 s to flush)

  int id() const { return id_; }
  int rank() const { return rank_; }
  pb::Role role() const { return options_.role; }
  uint64_t num_params() const { return table_.num_params(); }
  uint32_t num_servers() const { return table_.num_servers(); }
  uint32_t num_workers() const { return table_.num_workers(); }
  const std::vector<ShardRange>& shards() const { return shards_; }
  const pb::NodeTable& table() const { return table_; }  // as received at start-up; immutable
  // Replication factor r of the job (NodeTable.replication; 0 = none).
  uint32_t replication() const { return table_.replication(); }
  // The server rank serving `shard` as primary in the latest node table (NodeTable.shard_primary:
  // `shard` itself unless it failed over). Any thread; `shard` outside [0, S) is returned as is.
  int ShardPrimary(int shard) const;
  // True when this node was admitted into a running job (its first table had generation > 1:
  // a restarted server or worker re-admitted under a dead node's rank).
  bool joined_late() const { return table_.generation() > 1; }
  // Node ids from ranks and back (proto/node_ids.h), for this job's number of servers.
  int ServerId(int rank) const { return ServerNodeId(rank); }
  int WorkerId(int rank) const {
    return WorkerNodeId(static_cast<int>(table_.num_servers()), rank);
  }
  int WorkerRankOf(int id) const {
    return WorkerRankOfNode(static_cast<int>(table_.num_servers()), id);
  }

  // Sends an encoded message to a peer. Errors as Transport::Send.
  Status Send(int peer, Frames frames);
  // Answers `peer` with an ERROR message, without waiting: when the peer's queue is full the
  // ERROR is dropped (Unavailable) and counted in errors_dropped(), so a peer that floods this
  // node with bad messages and reads nothing cannot stall the caller (the I/O thread).
  // `shard`: Header.shard of the ERROR (the shard the refused message was for; -1 = none).
  Status SendError(int peer, pb::ErrorCode code, const std::string& message, pb::MsgType rejected,
                   uint64_t round = 0, int shard = -1);
  uint64_t errors_dropped() const { return errors_dropped_.load(std::memory_order_relaxed); }
  // Answers `peer` with an encoded reply, without waiting, as SendError does: dropped
  // (Unavailable) and counted in replies_dropped() when the peer's queue is full. What a server's
  // event loop (the I/O thread) sends to the peers it answers.
  Status Reply(int peer, Frames frames);
  uint64_t replies_dropped() const { return replies_dropped_.load(std::memory_order_relaxed); }

  // Next data-plane message: true with *out filled, false on timeout (`timeout`; kForever,
  // base/duration.h: no deadline), Aborted after SHUTDOWN / RequestStop, Unavailable once the
  // scheduler is lost.
  StatusOr<bool> Receive(Message* out, std::chrono::milliseconds timeout) EXCLUDES(mu_);
  // Makes the current (or, if none waits, the next) Receive return false at once when no message
  // is queued: how a callback on the I/O thread (set_on_node_dead, ...) hands work to the thread
  // that receives, without that thread polling. Safe from any thread; repeated calls before the
  // wake-up coalesce into one.
  void Interrupt() EXCLUDES(mu_);

  // Enters barrier `group` (kGroup*) and waits until every live member arrived. Errors:
  // DeadlineExceeded after `timeout`, Aborted/Unavailable as Receive.
  Status Barrier(uint32_t group, std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Worker: combines `values` with every live worker's part of the same collective through the
  // scheduler (MSG_COLLECTIVE): COLLECTIVE_SUM gives the element-wise sum (fp64, in rank order,
  // rounded to fp32 once), COLLECTIVE_BROADCAST worker `root`'s values. Every worker must call
  // the same collectives in the same order with the same op, root and size. Errors:
  // InvalidArgument (more than kMaxCollectiveValues values, a non-finite one) before anything is
  // sent; FailedPrecondition with the scheduler's reason (ERROR_BAD_COLLECTIVE: parts disagree, a
  // broadcast root died or finished); DeadlineExceeded after `timeout`; Aborted/Unavailable as
  // Receive.
  struct CollectiveResult {
    std::vector<float> values;
    uint32_t contributors = 0;  // the workers whose parts it combines
  };
  StatusOr<CollectiveResult> Collective(pb::CollectiveOp op, int root,
                                        std::span<const float> values,
                                        std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Worker: tells the scheduler its training is done (the job ends when every worker is).
  Status Finish() EXCLUDES(mu_);

  // What this node says of itself to the scheduler (the job status, protocol 13): the report its
  // next HEARTBEATs carry (a worker's Heartbeat.worker or a server's Heartbeat.server) and, for a
  // worker, its FINISHED. Replaces the last one; cheap (a copy under the node's lock), so a
  // trainer may call it every round.
  void SetReport(const pb::Heartbeat& report) EXCLUDES(mu_);

  // Waits for the scheduler's SHUTDOWN. OK when it came and was not a failure; Aborted with the
  // reason when the job failed or RequestStop was called; DeadlineExceeded after `timeout`.
  Status WaitShutdown(std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Local stop (e.g. SIGTERM): wakes every wait with Aborted. Safe from any thread, repeatable.
  void RequestStop(const std::string& reason) EXCLUDES(mu_);

  // Hands every later data-plane message (validated, from a known peer) to `fn` on the I/O thread
  // instead of queuing it for Receive: a server answers a push without waking a second thread.
  // Messages queued before the call are handed to `fn` first, on the calling thread, and no later
  // message overtakes them (the I/O thread waits meanwhile). `fn` runs on one thread at a time,
  // in arrival order; it must not block for long (heartbeats wait for it). nullptr restores
  // queuing for Receive; once set_on_data returns, `fn` is not running and will not run again.
  void set_on_data(std::function<void(Message)> fn) EXCLUDES(data_mu_, mu_);

  // Called on the I/O thread for every NODE_DEAD the scheduler announces.
  void set_on_node_dead(std::function<void(const pb::NodeDead&)> fn) EXCLUDES(mu_);
  // Called on the I/O thread for every node a later node table shows under a new instance (a
  // restarted process re-admitted under its old id and rank), after this node reconnected to
  // it. For one peer, NODE_DEAD always comes before its rejoin (the scheduler sends them in that
  // order on one socket), so a consumer that queues both events in order sees them in order.
  void set_on_node_rejoined(std::function<void(const pb::NodeInfo&)> fn) EXCLUDES(mu_);
  std::set<int> dead_nodes() const EXCLUDES(mu_);
  // Called on the I/O thread with every node table after the first (a re-admission or, with
  // replication, a failover), after it is installed and the rejoin callbacks ran.
  void set_on_table(std::function<void(const pb::NodeTable&)> fn) EXCLUDES(mu_);

  uint64_t rejected_messages() const { return rejected_.load(); }
  // Messages of another job (Header.job differs from options.transport.job): dropped unanswered.
  uint64_t foreign_messages() const { return filter_.foreign(); }
  // Under CURVE: messages claiming a node id (or the scheduler's) that came over a connection with
  // another client key than that node's, dropped unanswered.
  uint64_t impostor_messages() const { return filter_.impostors(); }
  // CurveZMQ handshakes of this node's receive socket accepted / refused (0 without CURVE).
  uint64_t auth_accepted() const;
  uint64_t auth_denied() const;
  // Connections the receive socket closed at once at the open-file limit (net/accept_guard.h).
  uint64_t refused_at_fd_limit() const;
  // Node tables installed so far: 1 after start-up, +1 for each re-admission (a restarted peer).
  uint64_t tables_installed() const { return tables_installed_.load(); }

 private:
  explicit Node(const NodeOptions& options);
  Status Register() EXCLUDES(mu_);
  void IoLoop();
  // IoLoop's steps. The liveness signal due to the scheduler (the REGISTER before the node table,
  // a HEARTBEAT with the latest report after it), never waiting on the peer.
  void SendLiveness(bool have_table) EXCLUDES(mu_);
  // Marks the scheduler lost (once) and wakes the waiters; true when this call did.
  bool LoseScheduler() EXCLUDES(mu_);
  // Handles one received message; `key` is the client key CURVE authenticated for it (PeerKey).
  void Dispatch(Frames frames, std::string key) EXCLUDES(data_mu_, mu_);
  // Under CURVE: whether `key` is the key of node `sender` (the scheduler's from the allow-list,
  // the others' from the node table). Always true without CURVE. I/O thread only.
  bool FromClaimedSender(int sender, const std::string& key) const;
  // Whether a decoded message from the scheduler belongs to this job instance where its digest
  // cannot tell (the registration messages carry the token's): a later NODE_TABLE must have this
  // table's job_instance, the first must list this process, an ERROR before the table must answer
  // this process's REGISTER. I/O thread only.
  bool OfThisJobInstance(const Message& msg) const;
  // A control message from the scheduler (I/O thread): records its liveness, then one step per
  // type below.
  void HandleControl(Message msg) EXCLUDES(mu_);
  // The table installed, then the peers' messages that came before the first one dispatched.
  void OnNodeTable(const pb::NodeTable& table) EXCLUDES(data_mu_, mu_);
  void OnBarrierRelease(const pb::Barrier& barrier) EXCLUDES(mu_);
  // A peer of the table is dead: recorded, logged, and on_node_dead_ called (outside mu_).
  void OnNodeDead(const pb::NodeDead& dead_node) EXCLUDES(mu_);
  void OnShutdown(const pb::Shutdown& shutdown) EXCLUDES(mu_);  // the first one counts
  // The result of the collective this node waits for; any other is dropped.
  void OnCollectiveResult(const pb::Collective& collective) EXCLUDES(mu_);
  // The scheduler's ERROR: the answer to the collective waited for, or before the table the
  // refusal of the registration; logged either way.
  void OnSchedulerError(const pb::Header& h) EXCLUDES(mu_);
  // A REGISTER_CHALLENGE for this process: the REGISTER gets the challenge and its proof (with a
  // job key) and is sent again by Register() at once. I/O thread.
  void AnswerChallenge(const pb::RegisterChallenge& challenge) EXCLUDES(mu_);
  void SetRegisterBytesLocked() REQUIRES(mu_);  // register_bytes_ from register_header_
  void InstallTable(const pb::NodeTable& table) EXCLUDES(mu_);
  void InstallFirstTableLocked(const pb::NodeTable& table) REQUIRES(mu_);
  // shard_primary_ from a table (I/O thread, or the start-up before it runs).
  void SetShardPrimaries(const pb::NodeTable& table);
  // Non-OK when the node must stop waiting (shutdown, stop, scheduler lost).
  Status StopStatusLocked() const REQUIRES(mu_);
  // have_table_ read without mu_: only the I/O thread writes it (and the start-up before that
  // thread runs), so that thread reads its own writes. I/O thread only.
  bool HaveTableOnIoThread() const NO_THREAD_SAFETY_ANALYSIS { return have_table_; }

  const NodeOptions options_;
  const uint64_t instance_;
  // The REGISTER this node sends (its challenge and proof set once the scheduler challenged it)
  // and its serialized bytes, resent while waiting for the table.
  pb::Header register_header_ GUARDED_BY(mu_);
  std::string register_bytes_ GUARDED_BY(mu_);
  pb::Heartbeat report_ GUARDED_BY(mu_);     // SetReport's
  bool challenged_ GUARDED_BY(mu_) = false;  // a challenge arrived since the last REGISTER was sent
  std::unique_ptr<Transport> transport_;
  std::thread io_;
  std::atomic<bool> io_stop_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> errors_dropped_{0};   // ERROR replies dropped: the peer's queue was full
  std::atomic<uint64_t> replies_dropped_{0};  // other replies dropped: the peer's queue was full
  // Collectives: the last seq this node started, and the answer (values, or the scheduler's
  // refusal) to the one it waits for; an answer to any other seq is dropped.
  uint64_t collective_seq_ GUARDED_BY(mu_) = 0;
  bool collective_answered_ GUARDED_BY(mu_) = false;
  CollectiveResult collective_result_ GUARDED_BY(mu_);
  Status collective_error_ GUARDED_BY(mu_);
  RejectionLog reject_log_;  // warnings on rejected and dropped messages (I/O thread only)
  InboundFilter filter_{&reject_log_};  // foreign and impostor drops (I/O thread; counters: any)
  // What the scheduler tells this node that a peer can cause (NODE_DEAD, its ERRORs); I/O thread.
  RejectionLog event_log_{"job events"};
  std::atomic<uint64_t> tables_installed_{0};

  // Written once by the I/O thread before `have_table_` is set under mu_, then read-only.
  int id_ = -1;
  int rank_ = -1;
  pb::NodeTable table_;
  std::vector<ShardRange> shards_;
  std::vector<uint64_t> shard_lengths_;
  // The latest table's NodeTable.shard_primary (S entries, allocated with the first table): read
  // from any thread, written by the I/O thread.
  std::unique_ptr<std::atomic<int>[]> shard_primary_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled under mu_ on every change a wait below may be waiting for
  bool acked_ GUARDED_BY(mu_) = false;
  // Written by the I/O thread only (which also reads it without mu_: HaveTableOnIoThread).
  bool have_table_ GUARDED_BY(mu_) = false;
  Status register_error_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  bool shutdown_failed_ GUARDED_BY(mu_) = false;
  std::string stop_reason_ GUARDED_BY(mu_);
  bool scheduler_lost_ GUARDED_BY(mu_) = false;
  // The scheduler answered this process's HEARTBEAT with ERROR_NOT_REGISTERED: it was declared
  // dead (OnSchedulerError); StopStatusLocked says so.
  bool dropped_ GUARDED_BY(mu_) = false;
  std::deque<Message> inbox_ GUARDED_BY(mu_);
  // Held while on_data_ runs or changes (taken before mu_, never while holding it): data
  // messages stay in order.
  Mutex data_mu_ ACQUIRED_BEFORE(mu_);
  std::function<void(Message)> on_data_ GUARDED_BY(data_mu_);
  // Interrupt() called since Receive last returned for it.
  bool interrupted_ GUARDED_BY(mu_) = false;
  // Last barrier entered / released, by group.
  std::vector<uint64_t> barrier_seq_ GUARDED_BY(mu_) = std::vector<uint64_t>(4, 0);
  std::vector<uint64_t> barrier_released_ GUARDED_BY(mu_) = std::vector<uint64_t>(4, 0);
  std::set<int> dead_ GUARDED_BY(mu_);
  std::function<void(const pb::NodeDead&)> on_node_dead_ GUARDED_BY(mu_);
  std::function<void(const pb::NodeInfo&)> on_node_rejoined_ GUARDED_BY(mu_);
  std::function<void(const pb::NodeTable&)> on_table_ GUARDED_BY(mu_);
  std::vector<pb::NodeInfo> current_;  // the latest table's entries, by id - 1; I/O thread
  // Peers' messages that arrived before the first node table (a peer that got the scheduler's
  // broadcast first may already send to this node), dispatched once it is installed. I/O thread.
  struct EarlyMessage {
    Frames frames;
    std::string key;  // PeerKey of the original (a copy's frames carry no metadata)
  };
  std::vector<EarlyMessage> before_table_;
  // Header.job this node sends and expects: the token's digest until the first node table, then
  // the job instance's (JobInstanceDigest). I/O thread (and the start-up before it runs).
  uint64_t job_ = 0;
  std::chrono::steady_clock::time_point last_from_scheduler_;
};

}  // namespace sieve

#endif  // SIEVE_NET_NODE_H_
