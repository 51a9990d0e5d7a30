// The balanced split of [0, n) into `parts` contiguous ranges, the first n % parts of them one
// longer: the key ranges of the servers' shards (proto/shards.h validates and names them).
// Thread-safety: pure.
#ifndef SIEVE_BASE_BALANCED_SPLIT_H_
#define SIEVE_BASE_BALANCED_SPLIT_H_

#include <cstdint>
#include <vector>

namespace sieve {

// parts + 1 ascending bounds b with b[0] = 0 and b[parts] = n; range s is [b[s], b[s + 1]).
// parts = 0 gives {0}.
inline std::vector<uint64_t> BalancedSplitBounds(uint64_t n, uint32_t parts) {
  std::vector<uint64_t> b(static_cast<size_t>(parts) + 1, 0);
  if (parts == 0) return b;
  const uint64_t per = n / parts, rem = n % parts;
  for (uint32_t s = 0; s < parts; ++s) b[s + 1] = b[s] + per + (s < rem ? 1 : 0);
  return b;
}

}  // namespace sieve

#endif  // SIEVE_BASE_BALANCED_SPLIT_H_
