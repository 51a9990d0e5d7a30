// Balanced contiguous key-range sharding of the flat parameter vector [0, D) over S servers.
// Shard s owns [lo_s, hi_s); ranges are contiguous, disjoint, cover [0, D) exactly once, and their
// sizes differ by at most one (the first D mod S shards hold one extra index); a worker splits its
// sorted global indices into per-shard slices with the shard-relative uint32 indices the wire
// carries. Pure functions (on caller buffers: thread-safe as long as buffers are not shared).
#ifndef SIEVE_PROTO_SHARDS_H_
#define SIEVE_PROTO_SHARDS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace sieve {

struct ShardRange {
  uint64_t lo = 0;
  uint64_t hi = 0;  // exclusive
  uint64_t size() const { return hi - lo; }
  bool operator==(const ShardRange&) const = default;
};

// Errors: InvalidArgument when num_servers == 0 or num_params < num_servers (a shard would be
// empty), or num_params > 2^32 * num_servers (shard-relative indices are uint32 on the wire).
StatusOr<std::vector<ShardRange>> SplitShards(uint64_t num_params, uint32_t num_servers);

// Index of the shard owning global index `i`; -1 when `i` is outside every range.
// `ranges` must come from SplitShards (sorted, contiguous). O(log S).
int ShardOf(const std::vector<ShardRange>& ranges, uint64_t i);

// Splits ascending global indices by contiguous shard ranges. `bounds` has S+1 entries
// 0 = b_0 ≤ b_1 ≤ … ≤ b_S (shard s owns [b_s, b_{s+1})). On success `offsets` has S+1 entries:
// shard s owns positions [offsets[s], offsets[s+1]) of `indices` (and of the matching values,
// which therefore need no copy), and relative[j] = indices[j] − b_s for those positions.
// Fails when bounds are malformed, indices are not strictly ascending, or an index is ≥ b_S.
Status SplitByShard(std::span<const uint32_t> indices, std::span<const uint64_t> bounds,
                    std::vector<size_t>* offsets, std::vector<uint32_t>* relative);

}  // namespace sieve

#endif  // SIEVE_PROTO_SHARDS_H_
