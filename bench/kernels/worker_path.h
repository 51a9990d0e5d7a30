// The worker's selection path as bench_kernels rows: ErrorFeedback::Select in steady
// state, round after round on one persistent object, the way sieve-worker calls it.
//
// Every row runs a training-like sequence of rounds on a fresh ErrorFeedback: each round a fresh
// gradient g (a window of a fixed N(0,1) noise pool, shifted every round, times a scale that
// drifts as a training gradient's norm does: a slow decay with ±10 % round-to-round noise, seeded)
// is accumulated (momentum 0.9, lr 0.05: the worker's defaults) and then selected from, with the
// last two thresholds carried into SelectOptions as the trainer does. Untimed warm-up rounds come
// first. The timed part of a round depends on the row:
//   ef_<op>            ErrorFeedback::Select alone (the accumulate runs with the timer paused)
//   ef_round_<op>      AccumulateDevice + ErrorFeedback::Select (what a round pays)
//   sl_<op>            the stateless sieve::Select on the same residual with the same options
//                      (a warm thread: earlier rounds made the same call); the round's
//                      ErrorFeedback::Select then runs paused, so the state advances identically
//   ef_lrstep_<op>     ErrorFeedback::Select alone over the 10 rounds right after the learning
//                      rate drops ×0.1 (0.05 → 0.005)
// Counters: passes = counting passes per round (1 + adjustments + the candidate pass of an exact
// fallback; topk: 1), adjust, fallback (share of rounds), selected, k.
// Arguments as bench_kernels': d and ρ·1e4. Thread-safety: rows run one at a time (Google
// Benchmark's default); nothing here is shared between rows.
#ifndef SIEVE_BENCH_KERNELS_WORKER_PATH_H_
#define SIEVE_BENCH_KERNELS_WORKER_PATH_H_

#include <cstdint>

#include "kernels/device.h"

namespace sieve {

// Registers the rows above for one (d, ρ·1e4) on `device` (ef_round_* and sl_* for topk and
// gaussiank, ef_* for topk, gaussiank and dgc, ef_lrstep_* for gaussiank and dgc).
void RegisterWorkerPathRows(Device device, int64_t d, int64_t rho_e4);

}  // namespace sieve

#endif  // SIEVE_BENCH_KERNELS_WORKER_PATH_H_
