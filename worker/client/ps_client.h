// PsClient: the worker side of sieve's push/pull protocol — the C++ API a training loop links to
// talk to the parameter servers. It registers the worker with the scheduler (through the node
// runtime), splits a sparse selection of the flat parameter vector by server shard, pushes every
// slice before waiting for any reply, and applies the servers' UPDATEs (absolute weight values)
// to the caller's replica. Example (docs/worker-api.md):
//
//   auto client = PsClient::Connect(options);          // registers, waits for the node table
//   std::vector<float> w(client->num_params());
//   client->PullDense(w, 60000);                       // authoritative initial weights
//   client->Barrier(60000);
//   for (uint64_t round = 0; ...; ++round) {
//     Selection sel = ...;                             // kernels/selection.h
//     RoundStats stats;
//     client->PushPull(round, sel, w, &stats, 60000);  // w now holds the servers' values
//   }
//   client->Finish();  client->WaitShutdown(60000);
//
// Every server receives exactly one PUSH per round, with count 0 when the worker selected nothing
// in its shard (docs/architecture.md explains why BSP needs it). Values travel as fp32, or fp16
// when options.fp16 is set.
//
// Thread-safety: one thread drives a PsClient (its methods are not reentrant); RequestStop may be
// called from any thread. Ownership: the caller owns the replica spans it passes in.
#ifndef SIEVE_WORKER_CLIENT_PS_CLIENT_H_
#define SIEVE_WORKER_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/selection.h"
#include "net/node.h"

namespace sieve {

struct PsClientOptions {
  NodeOptions node;   // role is forced to worker; node.num_params declares D
  bool fp16 = false;  // send pushed values as binary16
  bool checksum = true;
  // While PushPull waits, it checks every resend_check_ms whether a new node table arrived (a
  // peer was re-admitted, e.g. a server restarted from a checkpoint); if so it sends the round's
  // PUSH again to every server that has not answered. At most one resend per table change, so a
  // healthy job never resends; servers apply a (worker, round) once, so resends are harmless.
  // 0 = never resend.
  int resend_check_ms = 100;
};

struct RoundStats {
  uint64_t bytes_up = 0;    // payload bytes pushed (indices + values + headers)
  uint64_t bytes_down = 0;  // payload bytes received in UPDATEs
  uint64_t pairs_up = 0;    // (index, value) pairs pushed (dense: D)
  uint64_t pairs_down = 0;  // (index, value) pairs received
  double push_seconds = 0;  // splitting + sending
  double wait_seconds = 0;  // waiting for and applying the UPDATEs
};

// Receives the values of one UPDATE (or one part of a split UPDATE) of a round, for callers whose
// replica is not a host array (a GPU-resident one): for a sparse part, values[j] is the new weight
// at global index lo + rel[j]; for a dense part (rel empty), values[j] belongs at lo + j. The
// spans are valid only during the call; fp16 payloads arrive converted to fp32.
using UpdateSink =
    std::function<void(uint64_t lo, std::span<const uint32_t> rel, std::span<const float> values)>;

class PsClient {
 public:
  // Registers with the scheduler and waits for the node table. Errors: those of Node::Start.
  static StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options);

  int rank() const { return node_->rank(); }
  uint64_t num_params() const { return node_->num_params(); }
  uint32_t num_workers() const { return node_->num_workers(); }
  uint32_t num_servers() const { return node_->num_servers(); }
  Node& node() { return *node_; }
  uint64_t resends() const { return resends_; }  // PUSHes sent again (see resend_check_ms)
  // ERRORs a peer could have caused (a corrupted or forged copy of our request, a forged ERROR)
  // that were answered by sending the request again instead of failing (see Collect).
  uint64_t errors_retried() const { return errors_retried_; }

  // Replaces `weights` (length D) with the servers' current values; *at (optional) receives the
  // largest round the servers reported (BSP: the round being aggregated; ASP/SSP: the clock this
  // worker should continue from; 0 at the start of a job). The request is sent again to servers
  // that have not answered when a new node table arrives; for a worker that joined late also
  // after 1 s, then at doubling intervals up to 8 s (each answer is a whole shard). Errors:
  // InvalidArgument (wrong length), DeadlineExceeded, Aborted/Unavailable (job ended),
  // FailedPrecondition with the server's ERROR message.
  Status PullDense(std::span<float> weights, int timeout_ms, uint64_t* at = nullptr);

  // A worker admitted into a running job (joined_late()) asks every server to count it again
  // from `round` on (MSG_JOIN, resent like PullDense until acknowledged). After OK the worker
  // pushes `round` next. Errors: OutOfRange when a server answered ERROR_JOIN_TOO_LATE (the job
  // passed `round` there: pull again and join a later round; servers that accepted `round` move
  // to the later one, see ShardServer::OnJoin), FailedPrecondition with any other ERROR,
  // DeadlineExceeded, Aborted.
  Status Join(uint64_t round, int timeout_ms);
  bool joined_late() const { return node_->joined_late(); }

  // One round: pushes `*sel` (global ascending indices into [0, D), or dense with D values) split
  // by shard to every server, then waits for each server's UPDATE of `round` and writes its values
  // into `weights` (length D). Zero-copy: sel's index and value arrays are lent to ZeroMQ for the
  // call and handed back on return (only if ZeroMQ still holds them after an error are they kept
  // until it lets go, and *sel comes back with empty arrays). Errors as PullDense, plus
  // InvalidArgument for a malformed selection (nothing is sent then). A server's ERROR for this
  // round fails the call.
  Status PushPull(uint64_t round, Selection* sel, std::span<float> weights, RoundStats* stats,
                  int timeout_ms);
  // The same round with each UPDATE handed to `sink` instead of written into a host replica
  // (called on this thread, before PushPull returns, once per UPDATE part; never after an error
  // return for the parts that did not arrive).
  Status PushPull(uint64_t round, Selection* sel, const UpdateSink& sink, RoundStats* stats,
                  int timeout_ms);

  Status Barrier(int timeout_ms) { return node_->Barrier(kGroupWorkers, timeout_ms); }
  Status Finish() { return node_->Finish(); }
  Status WaitShutdown(int timeout_ms) { return node_->WaitShutdown(timeout_ms); }
  void RequestStop(const std::string& reason) { node_->RequestStop(reason); }

 private:
  PsClient(const PsClientOptions& options, std::unique_ptr<Node> node);
  // Waits for one data message of `type` and `round` from each server in `pending` (by rank),
  // calling apply(server_rank, message) for each; a reply split into parts (docs/protocol.md,
  // "Split replies") calls apply once per distinct part and counts once all have arrived. ERRORs
  // for the round fail the wait. `resend(server_rank)`, when given, is called for each server still
  // missing when a new node table was installed since the last send (checked every
  // options_.resend_check_ms), or, with always_resend_ms > 0, first after that many ms and then at
  // doubling intervals up to 8 s. With `any_round`, messages of any round are taken.
  // An ERROR for the request whose code a peer can cause without our fault (checksum, malformed
  // or out-of-range content, unknown round: our requests are validated before they leave, so it
  // was corrupted or forged) is answered with resend(server) — at most kErrorRetries times per
  // server and wait — and logged; any other ERROR, or one past the retries, fails the wait.
  static constexpr int kErrorRetries = 8;
  template <typename Fn>
  Status Collect(pb::MsgType type, uint64_t round, int timeout_ms, Fn apply,
                 const std::function<void(int)>& resend = nullptr, int always_resend_ms = 0,
                 bool any_round = false);
  // One round of PushPull, each arriving UPDATE given to apply(server_rank, message).
  Status PushPullWith(uint64_t round, Selection* sel,
                      const std::function<void(int, const Message&)>& apply, RoundStats* stats,
                      int timeout_ms);
  // Sends a header-only `type` for `round` to server `s`.
  Status SendControl(pb::MsgType type, uint64_t round, int s);

  // Arrays lent to ZeroMQ during a round; reused while no frame of an earlier round holds them.
  struct SendBuffers {
    std::vector<uint32_t> indices;   // the selection's global indices (moved in from Selection)
    std::vector<float> values;       // the selection's values (moved in from Selection)
    std::vector<uint32_t> relative;  // shard-relative indices
    std::vector<uint16_t> half;      // fp16 values
  };

  const PsClientOptions options_;
  std::unique_ptr<Node> node_;
  std::vector<uint64_t> bounds_;  // S+1 shard boundaries
  std::vector<size_t> offsets_;   // reused across rounds
  std::shared_ptr<SendBuffers> buffers_;
  std::vector<float> sink_scratch_;  // fp16 UPDATE values converted for an UpdateSink
  uint64_t resends_ = 0;
  uint64_t errors_retried_ = 0;
  uint64_t tables_at_send_ = 0;  // node tables installed when the round's PUSHes went out
};

}  // namespace sieve

#endif  // SIEVE_WORKER_CLIENT_PS_CLIENT_H_
