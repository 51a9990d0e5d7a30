// Per-rank partition of a dataset's examples for data-parallel training.
//
// Rank r of `world` gets the contiguous block [lo_r, hi_r) of [0, n): the first n % world ranks
// get ceil(n / world) examples, the rest floor(n / world), blocks in rank order. The blocks are
// disjoint and together cover [0, n) exactly once. (Fashion-MNIST's files are already in random
// class order, so contiguous blocks are i.i.d. samples; per-epoch shuffling is within a block.)
// Thread-safety: pure functions.
#ifndef SIEVE_WORKER_DATA_PARTITION_H_
#define SIEVE_WORKER_DATA_PARTITION_H_

#include <cstdint>

#include "base/status.h"

namespace sieve {

// The half-open index range [lo, hi).
struct IndexRange {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size() const { return hi - lo; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

// Block of `rank` among `world` ranks over n examples.
// Errors: InvalidArgument unless n >= 0, world >= 1 and 0 <= rank < world.
StatusOr<IndexRange> PartitionRange(int64_t n, int rank, int world);

}  // namespace sieve

#endif  // SIEVE_WORKER_DATA_PARTITION_H_
