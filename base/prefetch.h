// Software prefetch for loops that touch a large array at scattered, data-dependent positions
// (a sparse update applied to a shard or a replica). Hardware prefetchers cannot predict those
// addresses; asking for the line a fixed number of iterations ahead keeps several cache misses in
// flight. A hint only: it never faults and never changes results.
#ifndef SIEVE_BASE_PREFETCH_H_
#define SIEVE_BASE_PREFETCH_H_

#include <cstddef>

namespace sieve {

// Iterations ahead to prefetch in a scatter/gather loop (a few hundred ns of memory latency at a
// few ns per iteration).
inline constexpr size_t kScatterPrefetchDistance = 32;

// Prefetches the cache line of `p` for a write (read-for-ownership).
inline void PrefetchForWrite(const void* p) { __builtin_prefetch(p, 1, 3); }

}  // namespace sieve

#endif  // SIEVE_BASE_PREFETCH_H_
