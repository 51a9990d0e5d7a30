// StartWorker: how a worker enters its job — the one implementation of the start protocol that
// sieve-worker (worker/trainer) and the Python module (sieve.torch) both call
// (docs/architecture.md, "Start-up" and "Worker rejoin: exact semantics"):
//   - a worker of a job that is starting: worker 0 first offers its own initial weights to the
//     servers (PsClient::OfferInitialWeights: a server started without a model starts from them,
//     one with --model / --init_weights / a checkpoint keeps its own), then every worker passes
//     the workers' start barrier, pulls the servers' weights and passes a second barrier (so no
//     push precedes any pull); it pushes first the round the servers reported: 0, or the round
//     they restored from their checkpoints (a job restarted whole, e.g. by a JobSet's failure
//     policy, with `sieve-server --restore=always`);
//   - a worker admitted into a running job (PsClient::joined_late: a restarted worker): pulls
//     the servers' weights and joins `margin` rounds past the furthest server (2, doubled up to
//     256 when a server passed that round before the JOIN arrived); it pushes its join round
//     first and skips the barrier.
// `weights` (length D, host memory, caller-owned): on entry this worker's own initial weights
// (read only by worker 0 of a starting job); on success the servers' weights.
// `timeout` bounds each PsClient call it makes (not the whole start).
// Errors: those of the PsClient calls (the rejoin's last refusal names its attempts).
// Thread-safety: as PsClient (one thread drives the client).
#ifndef SIEVE_WORKER_CLIENT_WORKER_START_H_
#define SIEVE_WORKER_CLIENT_WORKER_START_H_

#include <chrono>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "worker/client/ps_client.h"

namespace sieve {

struct WorkerStart {
  uint64_t first_round = 0;  // the round this worker pushes first
  bool rejoined = false;     // it joined a running job (no barrier was passed)
  uint64_t servers_at = 0;   // rejoin: the furthest round the servers reported
  int attempts = 1;          // rejoin: JOINs sent until one was accepted
};

StatusOr<WorkerStart> StartWorker(PsClient* client, std::span<float> weights,
                                  std::chrono::milliseconds timeout);

}  // namespace sieve

#endif  // SIEVE_WORKER_CLIENT_WORKER_START_H_
