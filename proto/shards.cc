#include "proto/shards.h"

#include <algorithm>
#include <string>

#include "base/balanced_split.h"

namespace sieve {

StatusOr<std::vector<ShardRange>> SplitShards(uint64_t num_params, uint32_t num_servers) {
  if (num_servers == 0) return InvalidArgumentError("need at least one server");
  if (num_params < num_servers) {
    return InvalidArgumentError("D = " + std::to_string(num_params) +
                                " parameters cannot be split over " + std::to_string(num_servers) +
                                " servers (every shard needs >= 1)");
  }
  const uint64_t base = num_params / num_servers;
  const uint64_t extra = num_params % num_servers;
  if (base + (extra ? 1 : 0) > (uint64_t{1} << 32)) {
    return InvalidArgumentError(
        "shard of " + std::to_string(base + 1) +
        " parameters exceeds the 2^32 limit of uint32 wire indices; add servers");
  }
  const std::vector<uint64_t> bounds = BalancedSplitBounds(num_params, num_servers);
  std::vector<ShardRange> ranges(num_servers);
  for (uint32_t s = 0; s < num_servers; ++s) ranges[s] = {bounds[s], bounds[s + 1]};
  return ranges;
}

int ShardOf(const std::vector<ShardRange>& ranges, uint64_t i) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), i,
                             [](uint64_t v, const ShardRange& r) { return v < r.hi; });
  if (it == ranges.end() || i < it->lo) return -1;
  return static_cast<int>(it - ranges.begin());
}

}  // namespace sieve
