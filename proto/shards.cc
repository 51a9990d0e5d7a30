#include "proto/shards.h"

#include <algorithm>
#include <string>

namespace sieve {

namespace {

// parts + 1 ascending bounds b with b[0] = 0 and b[parts] = n; range s is [b[s], b[s + 1]); the
// first n % parts ranges are one longer.
std::vector<uint64_t> BalancedSplitBounds(uint64_t n, uint32_t parts) {
  std::vector<uint64_t> b(static_cast<size_t>(parts) + 1, 0);
  const uint64_t per = n / parts, rem = n % parts;
  for (uint32_t s = 0; s < parts; ++s) b[s + 1] = b[s] + per + (s < rem ? 1 : 0);
  return b;
}

}  // namespace

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

Status SplitByShard(std::span<const uint32_t> indices, std::span<const uint64_t> bounds,
                    std::vector<size_t>* offsets, std::vector<uint32_t>* relative) {
  if (bounds.size() < 2 || bounds[0] != 0) {
    return InvalidArgumentError("shard bounds need at least 2 entries starting at 0");
  }
  for (size_t s = 1; s < bounds.size(); ++s) {
    if (bounds[s] < bounds[s - 1]) return InvalidArgumentError("shard bounds must not decrease");
    if (bounds[s] - bounds[s - 1] > (uint64_t{1} << 32)) {
      return InvalidArgumentError("a shard longer than 2^32 cannot use uint32 indices");
    }
  }
  for (size_t j = 0; j < indices.size(); ++j) {
    if (j > 0 && indices[j] <= indices[j - 1]) {
      return InvalidArgumentError("indices must be strictly ascending (position " +
                                  std::to_string(j) + ")");
    }
  }
  if (!indices.empty() && indices.back() >= bounds.back()) {
    return OutOfRangeError("index " + std::to_string(indices.back()) +
                           " >= D = " + std::to_string(bounds.back()));
  }
  const size_t shards = bounds.size() - 1;
  offsets->assign(shards + 1, 0);
  relative->resize(indices.size());
  size_t j = 0;
  for (size_t s = 0; s < shards; ++s) {
    (*offsets)[s] = j;
    while (j < indices.size() && indices[j] < bounds[s + 1]) {
      (*relative)[j] = static_cast<uint32_t>(indices[j] - bounds[s]);
      ++j;
    }
  }
  (*offsets)[shards] = j;
  return Status::Ok();
}

}  // namespace sieve
