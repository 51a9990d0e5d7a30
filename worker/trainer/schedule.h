// The per-round schedules of a training run, as pure functions of TrainerOptions so that a
// single-process reference (tests/) reproduces exactly what every worker does:
//   - StepsPerEpoch: rounds per epoch, equal on every worker (BSP needs it): the smallest
//     partition floor(n / W) divided by the batch size, rounded down (the rest is dropped).
//   - EpochBatchOrder: the global example indices rank r visits in epoch e (its partition's
//     seeded shuffle, truncated to StepsPerEpoch·batch_size); batch j is items [j·B, (j+1)·B).
//   - LearningRate: η_t of round t (0-based, counted across epochs): linear warm-up
//     lr·(t+1)/T over the first T = round(lr_warmup_epochs·steps_per_epoch) rounds, then
//     lr·gamma^(number of lr_steps ≤ epoch of t).
//   - DensityForEpoch: density_warmup[e] while e < its length, then density.
// Thread-safety: pure functions.
#ifndef SIEVE_WORKER_TRAINER_SCHEDULE_H_
#define SIEVE_WORKER_TRAINER_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {

// Errors: InvalidArgument unless n >= 0, world >= 1, batch_size >= 1.
StatusOr<int64_t> StepsPerEpoch(int64_t n, int world, int batch_size);

// Errors: those of PartitionRange / StepsPerEpoch.
StatusOr<std::vector<int64_t>> EpochBatchOrder(int64_t n, int rank, int world, int batch_size,
                                               uint64_t seed, uint64_t epoch);

// steps_per_epoch >= 1.
double LearningRate(const TrainerOptions& options, uint64_t round, int64_t steps_per_epoch);

double DensityForEpoch(const TrainerOptions& options, uint64_t epoch);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_SCHEDULE_H_
