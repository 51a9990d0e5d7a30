#include "worker/data/shuffle.h"

#include <numeric>
#include <utility>

#include "kernels/model/param_init.h"

namespace sieve {
namespace {

// A uniform draw from [0, bound) (bound >= 1) by Lemire's multiply-and-reject, pulling 64-bit
// words from CounterHash(key, *counter++).
uint64_t BoundedDraw(uint64_t key, uint64_t* counter, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    const unsigned __int128 m =
        static_cast<unsigned __int128>(CounterHash(key, (*counter)++)) * bound;
    if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
  }
}

}  // namespace

void ShuffleWithKey(std::span<int64_t> values, uint64_t key) {
  uint64_t counter = 0;
  for (size_t i = values.size(); i > 1; --i) {
    const uint64_t j = BoundedDraw(key, &counter, i);
    std::swap(values[i - 1], values[j]);
  }
}

std::vector<int64_t> EpochOrder(IndexRange range, uint64_t seed, uint64_t epoch, int rank) {
  std::vector<int64_t> order(static_cast<size_t>(range.size() > 0 ? range.size() : 0));
  std::iota(order.begin(), order.end(), range.lo);
  const uint64_t key = CounterHash(CounterHash(seed, epoch), static_cast<uint64_t>(rank));
  ShuffleWithKey(order, key);
  return order;
}

}  // namespace sieve
