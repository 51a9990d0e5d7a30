// PsClient: the worker side of sieve's push/pull protocol — the C++ API a training loop links to
// talk to the parameter servers. It registers the worker with the scheduler (through the node
// runtime), splits a sparse selection of the flat parameter vector by server shard, pushes every
// slice before waiting for any reply, and applies the servers' UPDATEs (absolute weight values)
// to the caller's replica. A whole worker loop, compiled and tested against the installed
// library: examples/cpp/worker_loop.cc (docs/worker-api.md):
//
//   auto client = PsClient::Connect(options);       // registers, waits for the node table
//   std::vector<float> w(client->num_params());
//   const std::chrono::milliseconds timeout{60000};
//   client->PullDense(w, timeout);                  // authoritative initial weights
//   client->Barrier(timeout);
//   for (uint64_t round = 0; ...; ++round) {
//     Selection sel = ...;                          // kernels/selection.h
//     client->PushPull(round, &sel, w, &stats, timeout);  // w now holds the servers' values
//   }
//   client->Finish();  client->WaitShutdown(timeout);  // every call returns a Status to check
//
// Every server receives exactly one PUSH per round, with count 0 when the worker selected nothing
// in its shard (docs/architecture.md explains why BSP needs it). Pushed values travel as fp32, or
// as binary16 / bfloat16 (options.push_values); the servers' UPDATE and DENSE values arrive in the
// precision of the servers' `--wire_values` (fp32, fp16 or bf16) and are written as fp32.
//
// Thread-safety: one thread drives a PsClient (its methods are not reentrant); RequestStop may be
// called from any thread. Ownership: the caller owns the replica spans it passes in.
//
// This header is part of the installed API (`cmake --install`, then `find_package(sieve)` and
// `sieve::client`; docs/worker-api.md) with what it includes (base/status.h, kernels/selection.h,
// kernels/compressor.h, kernels/device.h) and base/version.h: none names a ZeroMQ, protobuf, glog
// or net/ type. The node runtime behind it is hidden in PsClient::Impl (ps_client.cc).
#ifndef SIEVE_WORKER_CLIENT_PS_CLIENT_H_
#define SIEVE_WORKER_CLIENT_PS_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/selection.h"
#include "worker/client/worker_progress.h"

namespace sieve {
// Everything a worker sets to join a job; plain values (translated into the node runtime's
// options inside ps_client.cc). Defaults are sieve-worker's.
struct PsClientOptions {
  // The job.
  std::string scheduler;    // the scheduler's "host:port"
  int rank = -1;            // requested worker rank; -1 = the scheduler picks
  uint64_t num_params = 0;  // D declared at registration; 0 = the scheduler's --num_params

  // This worker's receive socket (the servers' UPDATEs arrive on it).
  std::string bind_host = "0.0.0.0";  // interface to bind
  uint16_t port = 0;                  // 0 = any free port
  std::string advertise_host;         // what peers connect to; empty = detect
  // The largest message frame accepted (a peer sending a larger one is disconnected): -1 = 4·D
  // bytes + 1 MiB (a dense shard of the whole vector; no limit while D is 0), 0 = no limit.
  int64_t max_message_bytes = -1;
  std::chrono::milliseconds send_timeout{30000};  // a send that cannot be queued within this fails
  int send_hwm = 1000;                            // messages queued per peer before a send waits
  // CurveZMQ (docs/security.md): a key directory written by `sieve keygen` (server.key,
  // client.key, allowed_clients); empty = plain TCP. Connect fails on a bad directory.
  std::string curve_dir;
  // This worker's own client key pair file (DIR/worker-<rank>.key of `sieve keygen --servers=S
  // --workers=W`, which sieve-worker picks by its rank: net/node_flags.h); empty = the shared
  // client.key in curve_dir.
  std::string curve_key;
  // The job token (proto/job_identity.h): every message carries its digest, other jobs' messages
  // are dropped. Empty = no token; every daemon of the job must be given the same one.
  std::string job_token;

  // Liveness and start-up.
  // 0 disables heartbeats and scheduler-loss detection.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};  // scheduler silent this long -> fail
  int register_attempts = 20;  // REGISTER sends before giving up on the scheduler
  std::chrono::milliseconds register_retry{500};      // wait for REGISTER_ACK per attempt
  std::chrono::milliseconds startup_timeout{600000};  // wait for the node table after the ack

  // The wire.
  // The precision of pushed values (`--wire_values`): each value is rounded to it to nearest even
  // (a finite value beyond fp16's range saturates to ±65504) and packed. Selections made by
  // ErrorFeedback::Select with SelectOptions::round_values = push_values are packed exactly,
  // their rounding error kept in the residual; other values lose their rounding error.
  ValuePrecision push_values = ValuePrecision::kFp32;
  // Deprecated (`--fp16`): push_values = kFp16. Connect fails (InvalidArgument) when it is set
  // together with a push_values other than kFp16.
  bool fp16 = false;
  bool checksum = true;
  // Code each PUSH's indices compactly (protocol 7: Stream VByte gaps or a bitmap, whichever is
  // smaller; docs/protocol.md "Index coding"); false = raw uint32 indices (`--wire=v4`).
  bool compact_indices = true;
  // While PushPull waits, it checks every resend_check whether a new node table arrived (a
  // peer was re-admitted, e.g. a server restarted from a checkpoint); if so it sends the round's
  // PUSH again to every server that has not answered. At most one resend per table change, so a
  // healthy job never resends; servers apply a (worker, round) once, so resends are harmless.
  // 0 disables resending.
  std::chrono::milliseconds resend_check{100};
};

struct RoundStats {
  uint64_t bytes_up = 0;    // payload bytes pushed (indices + values + headers)
  uint64_t bytes_down = 0;  // payload bytes received in UPDATEs
  uint64_t pairs_up = 0;    // (index, value) pairs pushed (dense: D)
  uint64_t pairs_down = 0;  // (index, value) pairs received
  double push_seconds = 0;  // splitting + sending
  double wait_seconds = 0;  // waiting for and applying the UPDATEs
  // BSP with backup workers (sieve-server --backup_workers; always 0 / empty otherwise):
  // Rounds after this one that closed without this worker at every server and whose UPDATEs this
  // call applied: the caller's next round is round + 1 + rounds_skipped (it skips their
  // minibatches, and pushes nothing for them).
  uint64_t rounds_skipped = 0;
  // With --late_pushes=return: the pushed pairs (global ascending indices, values as pushed) of
  // the shards whose round closed without this push: no server applied them, nor ever will.
  // Return them to the residual (ErrorFeedback::ReturnUnapplied) or they are lost. A dense push's
  // missed shards are listed pair by pair. (With apply, the default, the servers apply late pushes
  // and these stay empty.)
  std::vector<uint32_t> missed_indices;
  std::vector<float> missed_values;
  uint32_t missed_shards = 0;  // how many shards' slices those are
};

// Receives the values of one UPDATE (or one part of a split UPDATE) of a round, for callers whose
// replica is not a host array (a GPU-resident one): for a sparse part, values[j] is the new weight
// at global index lo + rel[j]; for a dense part (rel empty), values[j] belongs at lo + j. The
// spans are valid only during the call; fp16 and bf16 payloads arrive converted to fp32.
using UpdateSink =
    std::function<void(uint64_t lo, std::span<const uint32_t> rel, std::span<const float> values)>;

// A peer's refusal (a server's or the scheduler's ERROR) comes back as a Status whose wire_code()
// is the protocol's error code (docs/protocol.md, "Error codes"; e.g. 9 = ERROR_UNKNOWN_ROUND,
// 18 = ERROR_JOIN_TOO_LATE) and whose code() follows from it (InvalidArgument for a malformed
// request, OutOfRange for a bound, AlreadyExists for a rank held, FailedPrecondition for a state
// that does not allow it, DataLoss for a checksum): test those, never the message.
class PsClient {
 public:
  // Registers with the scheduler and waits for the node table. Errors: Unavailable (bind failed,
  // scheduler never answered), the scheduler's ERROR (e.g. registration full: AlreadyExists; a
  // version mismatch: FailedPrecondition), DeadlineExceeded (no node table), those of a bad
  // curve_dir.
  static StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options);

  ~PsClient();  // leaves the job's sockets (pending sends get 2 s to flush)
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  int rank() const;
  uint64_t num_params() const;
  // The precision of this client's pushes (options.push_values, or kFp16 for options.fp16): what
  // SelectOptions::round_values must be for the pushes to lose nothing.
  ValuePrecision push_values() const;
  uint32_t num_workers() const;
  uint32_t num_servers() const;
  size_t dead_nodes() const;  // peers the scheduler has declared dead so far
  uint64_t resends() const;   // PUSHes sent again (see resend_check)
  // ERRORs a peer could have caused (a corrupted or forged copy of our request, a forged ERROR)
  // that were answered by sending the request again instead of failing.
  uint64_t errors_retried() const;

  // Replaces `weights` (length D) with the servers' current values; *at (optional) receives the
  // largest round the servers reported (BSP: the round being aggregated; ASP/SSP: the clock this
  // worker should continue from; 0 at the start of a job). The request is sent again to servers
  // that have not answered when a new node table arrives; for a worker that joined late also
  // after 1 s, then at doubling intervals up to 8 s (each answer is a whole shard). Errors:
  // InvalidArgument (wrong length), DeadlineExceeded, Aborted/Unavailable (job ended), the
  // server's ERROR (with its wire code).
  Status PullDense(std::span<float> weights, std::chrono::milliseconds timeout,
                   uint64_t* at = nullptr);

  // Worker 0 at the start of a job, before the start barrier: offers `weights` (length D, its
  // own initial weights, e.g. a torch model's init) to every server (MSG_INIT, each server its
  // slice; copied, the caller keeps its span). A server started without a model starts from
  // them; one with its own initial weights keeps those. Returns once every server acknowledged.
  // Errors: InvalidArgument (wrong length, non-finite value), a server's ERROR (e.g. this is not
  // worker 0: wire code ERROR_NOT_INITIALIZED), DeadlineExceeded, Aborted/Unavailable.
  Status OfferInitialWeights(std::span<const float> weights, std::chrono::milliseconds timeout);

  // A worker admitted into a running job (joined_late()) asks every server to count it again
  // from `round` on (MSG_JOIN, resent like PullDense until acknowledged). After OK the worker
  // pushes `round` next. Errors: a server's ERROR_JOIN_TOO_LATE (wire code 18, code OutOfRange:
  // the job passed `round` there: pull again and join a later round; servers that accepted
  // `round` move to the later one, see ShardServer::OnJoin), any other ERROR, DeadlineExceeded,
  // Aborted.
  Status Join(uint64_t round, std::chrono::milliseconds timeout);
  bool joined_late() const;

  // One round: pushes `*sel` (global ascending indices into [0, D), or dense with D values) split
  // by shard to every server, then waits for each server's UPDATE of `round` and writes its values
  // into `weights` (length D). With backup workers a server may close `round` without this push:
  // its UPDATE still arrives (possibly before the call), the server applies the push in a later
  // round (--late_pushes=apply) or refuses it and flags the UPDATE (return: the slice's pairs come
  // back in stats->missed_*); UPDATEs of later rounds that arrived meanwhile are applied too
  // (stats->rounds_skipped, see RoundStats).
  // Zero-copy: sel's index and value arrays are lent to ZeroMQ for the call and handed back on
  // return (only if ZeroMQ still holds them after an error are they kept until it lets go, and *sel
  // comes back with empty arrays). Errors as PullDense, plus InvalidArgument for a malformed
  // selection (nothing is sent then). A server's ERROR for this round fails the call.
  Status PushPull(uint64_t round, Selection* sel, std::span<float> weights, RoundStats* stats,
                  std::chrono::milliseconds timeout);
  // The same round with each UPDATE handed to `sink` instead of written into a host replica
  // (called on this thread, before PushPull returns, once per UPDATE part; never after an error
  // return for the parts that did not arrive).
  Status PushPull(uint64_t round, Selection* sel, const UpdateSink& sink, RoundStats* stats,
                  std::chrono::milliseconds timeout);

  // Waits until every live worker entered the workers' barrier. Errors: DeadlineExceeded,
  // Aborted/Unavailable (job ended).
  Status Barrier(std::chrono::milliseconds timeout);
  // A collective over every live worker's `values` through the scheduler (Node::Collective):
  // their element-wise sum (fp64 in rank order, rounded once), or worker `root`'s values. Every
  // worker calls the same collectives in the same order with the same op, root and size; at
  // most 65536 values, all finite. Errors as Node::Collective.
  // The result: the values, and how many workers' parts they combine.
  enum class CollectiveOp { kSum, kBroadcast };
  StatusOr<std::pair<std::vector<float>, uint32_t>> Collective(CollectiveOp op, int root,
                                                               std::span<const float> values,
                                                               std::chrono::milliseconds timeout);
  // Tells the scheduler this worker's training is done (the job ends when every worker is), with
  // the last report given to Report.
  Status Finish();
  // This worker's part of the job's status (worker_progress.h: round, loss, accuracy, bytes...):
  // sent to the scheduler on the next heartbeat and with FINISHED. Cheap; call it after every
  // round. Any thread.
  void Report(const WorkerProgress& progress);
  // Waits for the scheduler's SHUTDOWN: OK when the job ended normally; Aborted with the reason
  // when it failed or RequestStop was called; DeadlineExceeded after `timeout`.
  Status WaitShutdown(std::chrono::milliseconds timeout);
  // Wakes every wait with Aborted (e.g. on SIGTERM). Safe from any thread, repeatable.
  void RequestStop(const std::string& reason);

 private:
  friend class PsClientTesting;  // worker/client/ps_client_testing.h: a client on test transports
  class Impl;  // the node runtime, the wire and the round's buffers (ps_client.cc)
  explicit PsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_CLIENT_PS_CLIENT_H_
