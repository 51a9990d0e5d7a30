#include "worker/client/worker_start.h"

#include <glog/logging.h>

#include <string>

#include "proto/error_code.h"

namespace sieve {

StatusOr<WorkerStart> StartWorker(PsClient* client, std::span<float> weights,
                                  std::chrono::milliseconds timeout) {
  WorkerStart start;
  if (!client->joined_late()) {
    if (client->rank() == 0) {
      SIEVE_RETURN_IF_ERROR(client->OfferInitialWeights(weights, timeout));
    }
    SIEVE_RETURN_IF_ERROR(client->Barrier(timeout));
    uint64_t at = 0;
    SIEVE_RETURN_IF_ERROR(client->PullDense(weights, timeout, &at));
    // Nobody pushes before every worker pulled: `at` is the servers' round at the start, the same
    // for every worker (0, or the round servers restored from their checkpoints).
    SIEVE_RETURN_IF_ERROR(client->Barrier(timeout));
    start.first_round = at;
    start.servers_at = at;
    if (at > 0) LOG(INFO) << "the servers restored round " << at << "; the job goes on from there";
    return start;
  }
  // The join round lies `margin` rounds past the furthest server, so that no server passes it
  // before the JOIN arrives; the replica is resynchronized by that round's dense UPDATE.
  constexpr uint64_t kFirstJoinMargin = 2;
  constexpr int kJoinAttempts = 8;  // margins 2, 4, ..., 256 rounds
  uint64_t margin = kFirstJoinMargin;
  start.rejoined = true;
  for (int attempt = 1;; ++attempt, margin *= 2) {
    uint64_t at = 0;
    SIEVE_RETURN_IF_ERROR(client->PullDense(weights, timeout, &at));
    const uint64_t join = at + margin;
    Status joined = client->Join(join, timeout);
    if (joined.ok()) {
      LOG(INFO) << "rejoined a running job: servers at round " << at << ", counted from round "
                << join << " (attempt " << attempt << ")";
      start.first_round = join;
      start.servers_at = at;
      start.attempts = attempt;
      return start;
    }
    if (!HasWireCode(joined, pb::ERROR_JOIN_TOO_LATE) || attempt == kJoinAttempts) {
      return joined.Prefixed("rejoin at round " + std::to_string(join) + " failed after " +
                             std::to_string(attempt) + " attempt(s): ");
    }
    LOG(WARNING) << "join round " << join << " already passed (" << joined.message()
                 << "); pulling again and joining " << 2 * margin << " rounds ahead";
  }
}

}  // namespace sieve
