// Seeded per-epoch shuffling of a rank's examples.
//
// EpochOrder returns the indices [range.lo, range.hi) in an order that depends only on
// (seed, epoch, rank): the same triple gives the same order on every machine and run (the
// generator is sieve's CounterHash and the shuffle is a Fisher-Yates with exact, unbiased bounded
// draws; nothing from the standard library's unspecified distributions). Different epochs or
// ranks give independent orders.
// Thread-safety: pure functions.
#ifndef SIEVE_WORKER_DATA_SHUFFLE_H_
#define SIEVE_WORKER_DATA_SHUFFLE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "worker/data/partition.h"

namespace sieve {

// Permutes `values` in place with a generator keyed by `key`.
void ShuffleWithKey(std::span<int64_t> values, uint64_t key);

// The global indices of `range`, shuffled for (seed, epoch, rank).
std::vector<int64_t> EpochOrder(IndexRange range, uint64_t seed, uint64_t epoch, int rank);

}  // namespace sieve

#endif  // SIEVE_WORKER_DATA_SHUFFLE_H_
