#include "worker/trainer/schedule.h"

#include <cmath>

#include "worker/data/partition.h"
#include "worker/data/shuffle.h"

namespace sieve {

StatusOr<int64_t> StepsPerEpoch(int64_t n, int world, int batch_size) {
  if (n < 0 || world < 1 || batch_size < 1) {
    return InvalidArgumentError("StepsPerEpoch needs n >= 0, world >= 1, batch_size >= 1");
  }
  return (n / world) / batch_size;
}

StatusOr<std::vector<int64_t>> EpochBatchOrder(int64_t n, int rank, int world, int batch_size,
                                               uint64_t seed, uint64_t epoch) {
  SIEVE_ASSIGN_OR_RETURN(auto range, PartitionRange(n, rank, world));
  SIEVE_ASSIGN_OR_RETURN(auto steps, StepsPerEpoch(n, world, batch_size));
  std::vector<int64_t> order = EpochOrder(range, seed, epoch, rank);
  order.resize(static_cast<size_t>(steps * batch_size));
  return order;
}

double LearningRate(const TrainerOptions& o, uint64_t round, int64_t steps_per_epoch) {
  const uint64_t spe = steps_per_epoch < 1 ? 1 : static_cast<uint64_t>(steps_per_epoch);
  const uint64_t epoch = round / spe;
  const double warmup = std::round(o.lr_warmup_epochs * static_cast<double>(spe));
  double lr = o.lr;
  if (warmup >= 1.0 && static_cast<double>(round) < warmup) {
    lr = o.lr * static_cast<double>(round + 1) / warmup;
  }
  for (int step : o.lr_steps) {
    if (epoch >= static_cast<uint64_t>(step)) lr *= o.lr_gamma;
  }
  return lr;
}

double DensityForEpoch(const TrainerOptions& o, uint64_t epoch) {
  return epoch < o.density_warmup.size() ? o.density_warmup[epoch] : o.density;
}

}  // namespace sieve
