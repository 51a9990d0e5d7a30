#include "worker/data/partition.h"

#include <algorithm>
#include <string>

namespace sieve {

StatusOr<IndexRange> PartitionRange(int64_t n, int rank, int world) {
  if (n < 0 || world < 1 || rank < 0 || rank >= world) {
    return InvalidArgumentError("bad partition: n=" + std::to_string(n) + " rank=" +
                                std::to_string(rank) + " world=" + std::to_string(world));
  }
  const int64_t base = n / world;
  const int64_t extra = n % world;
  IndexRange r;
  r.lo = rank * base + std::min<int64_t>(rank, extra);
  r.hi = r.lo + base + (rank < extra ? 1 : 0);
  return r;
}

}  // namespace sieve
