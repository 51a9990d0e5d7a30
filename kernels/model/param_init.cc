#include "kernels/model/param_init.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sieve {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The SplitMix64 output function: a bijection on 64-bit words with good avalanche.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A double in [0, 1) from the top 53 bits.
double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

float InitValue(const InitRule& rule, uint64_t seed, uint64_t index) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  switch (rule.kind) {
    case InitKind::kZeros:
      return 0.0f;
    case InitKind::kUniform: {
      const double u = UnitInterval(CounterHash(seed, 2 * index));
      return static_cast<float>((2.0 * u - 1.0) * rule.scale);
    }
    case InitKind::kNormal: {
      // u1 in (0, 1] keeps the logarithm finite.
      const double u1 = 1.0 - UnitInterval(CounterHash(seed, 2 * index));
      const double u2 = UnitInterval(CounterHash(seed, 2 * index + 1));
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
      return static_cast<float>(z * rule.scale);
    }
  }
  return 0.0f;
}

}  // namespace

uint64_t CounterHash(uint64_t seed, uint64_t counter) {
  return Mix64(Mix64(seed + kGolden) ^ (counter * kGolden + kGolden));
}

Status InitSlice(const ModelLayout& layout, uint64_t seed, uint64_t lo, uint64_t hi, float* out) {
  if (lo > hi || hi > layout.num_params) {
    return OutOfRangeError("initial values of [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           ") asked of model " + layout.name + " with " +
                           std::to_string(layout.num_params) + " parameters");
  }
  for (const Segment& s : layout.segments) {
    const uint64_t begin = std::max(lo, s.offset);
    const uint64_t end = std::min(hi, s.offset + s.length);
    for (uint64_t i = begin; i < end; ++i) out[i - lo] = InitValue(s.init, seed, i);
  }
  return Status::Ok();
}

std::vector<float> InitParams(const ModelLayout& layout, uint64_t seed) {
  std::vector<float> params(layout.num_params);
  const Status s = InitSlice(layout, seed, 0, layout.num_params, params.data());
  (void)s;  // [0, D) is always in range
  return params;
}

}  // namespace sieve
