// Σ of a push's values in fp64, for ShardServerStats::pushed_sum (the conservation checks).
// Four independent accumulators: one long dependency chain of fp64 adds would cost more than the
// rest of a push's bookkeeping. Pure function.
#ifndef SIEVE_SERVER_SHARD_SUM_AS_DOUBLE_H_
#define SIEVE_SERVER_SHARD_SUM_AS_DOUBLE_H_

#include <cstddef>
#include <span>

namespace sieve {

inline double SumAsDouble(std::span<const float> values) {
  double s[4] = {0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= values.size(); j += 4) {
    for (int u = 0; u < 4; ++u) s[u] += values[j + u];
  }
  for (; j < values.size(); ++j) s[0] += values[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace sieve

#endif  // SIEVE_SERVER_SHARD_SUM_AS_DOUBLE_H_
