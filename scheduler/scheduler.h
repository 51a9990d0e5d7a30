// Scheduler: the coordinator of a sieve job. It admits servers and workers (REGISTER), assigns
// ranks and balanced shard ranges once the expected counts are in, broadcasts the NODE_TABLE,
// releases barriers, tracks heartbeats (declaring silent nodes dead and telling the others), and
// ends the job with SHUTDOWN when every worker has FINISHED. A worker that dies is dropped from
// the job. A dead server is waited for (SchedulerOptions::wait_for_server_restart): a restarted
// process registering under its rank is re-admitted and the new table goes to everyone; if none
// comes within server_restart_timeout, or with the `fail` policy, the job fails. A REGISTER that
// requests the rank of a live node of its role after the start replaces that node (it is declared
// dead first): a restarted process need not wait for its predecessor's heartbeat timeout. Under
// CURVE it must come with the client key the live node registered with, else it is refused with
// ERROR_RANK_TAKEN and the live node keeps its rank; and every message claiming a registered
// node's id must come with that node's key (else it is dropped unanswered and counted). Each
// node's key goes out in the NODE_TABLE (NodeInfo.key), so the nodes check each other the same way.
// A peer's bad message gets an ERROR reply and changes nothing; a message of another job
// (Header.job differs from options.transport.job) is dropped unanswered and counted.
//
// The scheduler keeps the job's status (JobStatus, sieve.proto): its phase, every node's row with
// the report the node sends on its heartbeats (checked by NodeReports: a report out of range is
// refused and counted), and the job's progress summed from the workers' reports. status() returns
// the latest copy, rebuilt at most every 250 ms and at every change of phase.
//
// Thread-safety: Run() executes the whole protocol on the calling thread; Stop() and status() may
// be called from any thread (e.g. a signal watcher, the metrics endpoint).
#ifndef SIEVE_SCHEDULER_SCHEDULER_H_
#define SIEVE_SCHEDULER_SCHEDULER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/log_limiter.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "net/inbound_filter.h"
#include "net/loop_stall.h"
#include "net/rejection_log.h"
#include "net/transport.h"
#include "proto/codec.h"
#include "proto/register_proof.h"
#include "proto/shards.h"
#include "scheduler/node_reports.h"

namespace sieve {

struct SchedulerOptions {
  uint32_t num_workers = 1;
  uint32_t num_servers = 1;
  uint64_t num_params = 0;  // D; 0 = take it from the workers' registrations
  TransportOptions transport;
  std::chrono::milliseconds heartbeat_timeout{10000};  // 0 disables dead-node detection
  std::chrono::milliseconds startup_timeout{600000};   // all nodes must register within this
  // A dead server: wait up to server_restart_timeout for its restart (true), or fail the job
  // at once (false).
  bool wait_for_server_restart = true;
  std::chrono::milliseconds server_restart_timeout{60000};
  // Backup copies of every shard (0 = none; < num_servers): shard s's backups are the servers
  // s+1..s+r (mod S). A dead server's shards are served at once by their first live backup
  // (NodeTable.shard_primary); only a shard with no live backup left falls back to the
  // wait_for_server_restart policy.
  uint32_t replication = 0;
  // Workers that must finish for the job to succeed (0 = every one, num_workers). A job whose
  // other workers finish after some died fails when fewer than this finished (a worker restarted
  // under its rank that finishes counts).
  uint32_t min_workers = 0;
  // Under CURVE with keys bound to nodes in the allow-list (a "bound job"): whether an
  // allow-listed key bound to no node may register at all (then only for ranks bound to no key,
  // before the start and at a dead node's takeover). False: it is refused, ERROR_BAD_REGISTRATION.
  bool allow_unbound_keys = false;
  // The job token's key (proto/register_proof.h, JobKey of --job_token; zero = no token). With a
  // token, a REGISTER counts only once it answers this scheduler's challenge with a proof made
  // with the token, so a REGISTER recorded in another job is never believed.
  SipKey job_key;
  // The job's name in its status (JobStatus.job).
  std::string job_name = "sieve";
  // Called on Run()'s thread with every status built (at most every 250 ms, and at every change
  // of phase), the last one with the job's final phase just before Run() returns. Keep it short
  // (it delays the protocol): the daemon writes its status file from it.
  std::function<void(const pb::JobStatus&)> on_status;
};

class Scheduler {
 public:
  // Binds the scheduler's socket. Errors: InvalidArgument (zero counts), Unavailable (bind).
  static StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options);

  const std::string& host() const { return transport_->host(); }
  uint16_t port() const { return transport_->port(); }

  // Runs the job to its end. OK when every live worker finished and at least min_workers did; an
  // error when the job failed (startup timeout, D missing or too small, every worker or any server
  // dead, fewer than min_workers finished: FailedPrecondition, Stop()). Every live node has been
  // sent SHUTDOWN when Run returns.
  Status Run() EXCLUDES(stop_mu_);

  // Handles one received message (`frames` as the transport delivered them) exactly as Run()'s
  // loop does, on the calling thread: for harnesses that drive the scheduler without Run() (the
  // control-message fuzzer, tests/fuzz). Never call it while Run() runs.
  void HandleMessage(Frames frames) { Handle(std::move(frames)); }

  // Ends Run() soon with Aborted(reason), shutting the nodes down. Thread-safe.
  void Stop(const std::string& reason) EXCLUDES(stop_mu_);

  // The job's latest status (a copy; any thread).
  pb::JobStatus status() const EXCLUDES(status_mu_);

  // Nodes declared dead so far (monitoring; any thread).
  uint64_t nodes_declared_dead() const { return dead_count_.load(std::memory_order_relaxed); }
  // HEARTBEATs received from registered nodes (each one echoed; any thread).
  uint64_t heartbeats_received() const { return heartbeats_.load(std::memory_order_relaxed); }
  // Messages of another job (Header.job differs from options.transport.job), dropped unanswered
  // (any thread).
  uint64_t foreign_messages() const { return filter_.foreign(); }
  // Under CURVE: messages claiming a registered node's id over a connection with another client
  // key than the one that node registered with, dropped unanswered (any thread).
  uint64_t impostor_messages() const { return filter_.impostors(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    pb::NodeInfo info;
    Clock::time_point last_seen;
    bool dead = false;
    bool finished = false;
    bool failed_over = false;  // a dead server whose shards moved to their backups
    // Whether this node's current process was sent a node table, so knows the job instance:
    // from then on every message to it carries the instance's digest (JobFor).
    bool sent_table = false;
    // Collectives: whether this worker takes part (a worker re-admitted under a dead one's rank
    // does from its first COLLECTIVE on), and what to add to its seq to get the job's.
    bool collective_member = true;
    int64_t collective_offset = 0;
    Clock::time_point dead_since;
    // The job status's view: processes that took this rank after the first, how the latest one
    // came (a new process after the rank was lost, or one that replaced a live holder), and why
    // the rank was last declared dead.
    uint32_t restarts = 0;
    uint32_t promotions = 0;  // a server: failovers that gave it another's shard
    pb::NodeState comeback = pb::NODE_ALIVE;
    bool replaced = false;  // declared dead because a new process took its rank
    std::string lost_reason;
  };

  explicit Scheduler(const SchedulerOptions& options)
      : options_(options),
        created_(Clock::now()),
        challenge_replies_(static_cast<int>(4 * (options.num_servers + options.num_workers) + 16),
                           std::chrono::seconds(10)) {}
  // Run's loop; Run adds the final status.
  Status RunJob();
  void Handle(Frames frames);
  // A node's report (a HEARTBEAT's or a FINISHED's): kept for the status, or refused and counted.
  void TakeReport(const Entry& from, const pb::Heartbeat& report);
  // The job's status now (scheduler_status.cc), and its publication: status() and on_status get
  // it when `force` or 250 ms passed since the last one.
  pb::JobStatus BuildStatus(pb::JobPhase phase);
  void PublishStatus(pb::JobPhase phase, bool force);
  // The phase while Run() goes on.
  pb::JobPhase CurrentPhase() const { return started_ ? pb::JOB_RUNNING : pb::JOB_FORMING; }
  // `key`: the client key CURVE authenticated for the REGISTER (empty without CURVE).
  void HandleRegister(const pb::Header& h, const std::string& key);
  // HandleRegister's parts. VetRegister: every check a REGISTER passes before it may take a slot
  // (fields, the token's challenge and proof, version, rank, key bindings, D); it sends the
  // challenge, drops an unproven REGISTER unanswered (its address may be another node's) or
  // answers a refusal itself, and returns false. CheckRegisterFields / CheckRegisterVersion /
  // CheckRegisterRank: the checks without the challenge, OK when they pass; a refusal is a Status
  // whose wire code (WireCodeOf, proto/error_code.h) and message are the ERROR that answers the
  // REGISTER, its code StatusCodeOf(that wire code). Readmit: after the start, a resent
  // registration, a restart replacing its rank's holder, or a new process taking a dead node's
  // rank. AddPending: before the start, a registration counted towards the job.
  bool VetRegister(const pb::Header& h, const std::string& key);
  // Whether `r` answers this scheduler's challenge with the token's proof (always without a
  // token): only then may a REGISTER that failed to decode be answered at the address it names.
  bool Proven(const pb::Register& r) const;
  Status CheckRegisterFields(const pb::Register& r) const;
  // The protocol version a REGISTER declares; checked only once the REGISTER is proven.
  Status CheckRegisterVersion(const pb::Register& r) const;
  Status CheckRegisterRank(const pb::Register& r, const std::string& key) const;
  void Readmit(const pb::Header& h, const std::string& key);
  void AddPending(const pb::Header& h, const std::string& key);
  uint32_t ExpectedOf(pb::Role role) const {
    return role == pb::ROLE_SERVER ? options_.num_servers : options_.num_workers;
  }
  void HandleBarrier(int id, const pb::Barrier& b);
  // A worker's part of a collective (MSG_COLLECTIVE): kept until every live worker's part is in
  // (CheckCollectives), refused with ERROR_BAD_COLLECTIVE when it disagrees with the others'.
  void HandleCollective(Entry& from, const pb::Collective& c);
  // Tells every other live node that worker `e` finished before the others (NODE_DEAD with
  // finished set) and re-checks the barriers and collectives, which no longer wait for it.
  void AnnounceDeparture(const Entry& e);
  // A re-admitted server process knows nothing of what happened before it: every worker that is
  // dead (and not re-admitted) or finished, and every server that is dead, is announced again to
  // node `to` alone, after its table, so that its shards' rounds do not wait for those workers
  // and it offers no snapshot to a dead server (the server's restart is sent one).
  void RetellDepartures(int to);
  static pb::Header NodeDeadMessage(const Entry& e, const std::string& reason, bool finished);
  static constexpr char kFinishedReason[] = "finished its training before the others";
  // The seq worker `id` numbers the job's collective `seq` with (Entry::collective_offset).
  uint64_t WorkerSeq(int id, uint64_t seq);
  // Answers every collective whose parts are all in (or whose broadcast root died).
  void CheckCollectives();
  // A primary's report that server h.origin holds a copy of shard h.shard again.
  void HandleCopyReady(const Entry& from, const pb::Header& h);
  // A primary's report that it handed shard h.shard back to server h.origin (its own server).
  void HandleHandover(const Entry& from, const pb::Header& h);
  // Whether `from` is shard h.shard's primary and h.origin names a live server other than it;
  // else the sender is answered with ERROR_UNEXPECTED_TYPE.
  bool CheckShardReport(const Entry& from, const pb::Header& h);
  Status MaybeStart();
  void CheckHeartbeats();
  void CheckBarriers();
  void DeclareDead(Entry& e, const std::string& reason);
  // Replication: moves every shard served by dead server `rank` to its first live backup that
  // still holds its copy. True when none of its shards is left without a server (the job goes on
  // without waiting for a restart).
  bool FailOver(int rank);
  void SendTo(int id, const pb::Header& h);
  void ReplyError(const pb::Header& to, pb::ErrorCode code, const std::string& message);
  // Answers a REGISTER whose challenge is not this scheduler's with REGISTER_CHALLENGE (at the
  // address it names, at most challenge_replies_'s rate).
  void SendChallenge(const pb::Header& to, uint64_t challenge);
  // Sends `h` to a node without an id at the address its REGISTER `r` names, over a connection
  // of its own, if `limiter` allows. Pending nodes are answered on their connection.
  void SendToRegisteringPeer(const pb::Register& r, const pb::Header& h, LogLimiter* limiter);
  // Sends `h` to `host`:`port` over a connection of its own (closed at once; ZeroMQ's linger
  // delivers the message), if the address is well-formed and `limiter` allows.
  void SendToAddress(const std::string& host, uint32_t port, const pb::Header& h,
                     LogLimiter* limiter);
  // A STATUS_QUERY: the published status as STATUS at the address it names (status_replies_'s
  // rate); a malformed address is ignored. Never an ERROR: a client without a node id is only
  // ever answered with what it asked for.
  void AnswerStatusQuery(const pb::Header& query);
  void Broadcast(const pb::Header& h, int except = -1);
  void ShutdownAll(const std::string& reason, bool failed);
  pb::NodeTable BuildTable() const;
  // Under CURVE: whether the allow-list binds keys to nodes, and whether `role` `rank` is bound
  // to a key.
  bool BoundJob() const;
  bool RankBound(pb::Role role, int rank) const;
  Entry* Find(int id);
  // Header.job of a message of `type` to node `id`: the token's digest for the registration
  // messages (kTokenStampedToNode) to a node not yet sent the node table, else the instance's.
  uint64_t JobFor(pb::MsgType type, int id);

  const SchedulerOptions options_;
  const Clock::time_point created_;
  // RunJob's passes: a receive of at most 100 ms, one message's handling, the status file.
  LoopStall loop_stall_{std::chrono::milliseconds(350)};
  // This job instance's random id (NodeTable.job_instance) and the digest every message after the
  // table carries (JobInstanceDigest of the token's digest and the id; 0 without a token).
  uint64_t job_instance_ = 0;
  uint64_t instance_job_ = 0;
  std::unique_ptr<Transport> transport_;  // stamps nothing: SendTo stamps each message (JobFor)
  Mutex stop_mu_;
  std::string stop_reason_ GUARDED_BY(stop_mu_);
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dead_count_{0};
  std::atomic<uint64_t> heartbeats_{0};

  // Everything below is touched by the Run() thread only (filter_'s counters: any thread).
  RejectionLog reject_log_;             // warnings on rejected and dropped messages
  InboundFilter filter_{&reject_log_};  // foreign and impostor drops
  // Job events a peer's message can cause (deaths, rejoins, registrations it cannot reach, sends
  // that fail), so that a peer cannot flood the log through them either.
  RejectionLog event_log_{"job events"};
  // Replies to refused REGISTERs from peers without a node id go to the address the REGISTER
  // names, over a connection of their own: at most 20 per 10 s, so that a peer cannot make the
  // scheduler open connections (and hold their descriptors for the linger) at its rate.
  LogLimiter unknown_replies_{20, std::chrono::seconds(10)};
  // REGISTER_CHALLENGEs to peers without an id: every node of a starting job gets one, so the
  // budget is 4 per expected node + 16 per 10 s (a replayer can make the scheduler connect to
  // that many addresses, not more).
  LogLimiter challenge_replies_;
  // STATUS answers to `sieve status --scheduler`: at most 50 per 10 s (five clients watching
  // every second), so that a peer cannot make the scheduler connect out at its rate.
  LogLimiter status_replies_{50, std::chrono::seconds(10)};
  SipKey challenge_secret_;  // drawn at Create; the challenges' key (proto/register_proof.h)
  uint64_t num_params_ = 0;
  bool started_ = false;
  uint64_t generation_ = 0;
  int next_temp_id_ = -1000;    // connection ids for peers without a node id yet
  std::vector<Entry> pending_;  // registered before the table went out
  // Replication: the server rank serving each shard (NodeTable.shard_primary), and the servers
  // that died since the start: their copies are gone (a process restarted under a rank holds none).
  std::vector<int> shard_primary_;
  // Replication: the servers holding an up-to-date copy of each shard besides its primary (ring
  // order from the shard: s+1..s+r at the start; a failover retires the others; a rebuilt
  // replacement is added when the primary reports it, MSG_COPY_READY).
  std::vector<std::vector<int>> copies_;
  std::map<int, Entry> nodes_;  // by node id, after the table went out
  // At most this many pending barriers per node; a BARRIER beyond it is ERROR_BAD_BARRIER.
  static constexpr int kMaxPendingBarriersPerNode = 4;
  std::map<std::pair<uint32_t, uint64_t>, std::set<int>> barriers_;  // (group, seq) -> arrived
  std::array<uint64_t, kGroupAll + 1> barrier_released_{};  // by group: the last seq released
  // Collectives in progress, by seq: the op, root and size the first part declared, each
  // worker's values by node id, and why it failed if it did. collectives_done_: the highest seq
  // answered (or refused to every live worker).
  struct PendingCollective {
    pb::CollectiveOp op;
    int root;
    int size;
    std::map<int, std::vector<float>> parts;
    std::string failure;  // set when two parts disagreed: every part is refused with it
  };
  std::map<uint64_t, PendingCollective> collectives_;
  uint64_t collectives_done_ = 0;
  Status failure_;         // set when the job must end as failed
  int failure_node_ = -1;  // the node whose fault failure_ is (-1: none in particular)
  NodeReports reports_;
  Clock::time_point last_status_{};
  pb::JobPhase last_phase_ = pb::JOB_PHASE_UNSPECIFIED;
  mutable Mutex status_mu_;
  pb::JobStatus status_ GUARDED_BY(status_mu_);
  bool done_ = false;
};

}  // namespace sieve

#endif  // SIEVE_SCHEDULER_SCHEDULER_H_
