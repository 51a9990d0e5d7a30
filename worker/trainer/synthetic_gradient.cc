#include "worker/trainer/synthetic_gradient.h"

#include <cmath>
#include <numbers>

#include "kernels/model/param_init.h"

namespace sieve {
namespace {

// A 53-bit uniform in (0, 1) (never 0 or 1: the offset of half a step keeps the logs finite).
double Uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Key of (seed, rank, round): a two-level hash so nearby ranks/rounds are unrelated streams.
uint64_t RoundKey(const SyntheticGradientSpec& spec, uint64_t round) {
  uint64_t rank_key =
      CounterHash(spec.seed, 0x7261'6e6b'0000'0000ULL + static_cast<uint32_t>(spec.rank));
  return CounterHash(rank_key, round);
}

float Draw(GradDist dist, uint64_t key, uint64_t i) {
  const double u1 = Uniform(CounterHash(key, 2 * i));
  if (dist == GradDist::kLaplace) {
    // Inverse CDF with b = 1/√2 (variance 2b² = 1).
    const double centred = u1 - 0.5;
    const double magnitude = -std::numbers::sqrt2 / 2 * std::log(1.0 - 2.0 * std::fabs(centred));
    return static_cast<float>(centred < 0 ? -magnitude : magnitude);
  }
  const double u2 = Uniform(CounterHash(key, 2 * i + 1));
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace

float SyntheticNoise(const SyntheticGradientSpec& spec, uint64_t round, uint64_t i) {
  return Draw(spec.dist, RoundKey(spec, round), i);
}

void SyntheticGradient(const SyntheticGradientSpec& spec, uint64_t round,
                       std::span<const float> weights, std::span<float> grad) {
  const uint64_t key = RoundKey(spec, round);
  const int64_t d = static_cast<int64_t>(grad.size());
  const float scale = static_cast<float>(spec.scale);
  const float pull = static_cast<float>(spec.pull);
  const bool use_w = spec.pull != 0.0 && weights.size() == grad.size();
  const GradDist dist = spec.dist;
#pragma omp parallel for schedule(static) if (d > (int64_t{1} << 20))
  for (int64_t i = 0; i < d; ++i) {
    float g = scale * Draw(dist, key, static_cast<uint64_t>(i));
    if (use_w) g += pull * weights[static_cast<size_t>(i)];
    grad[static_cast<size_t>(i)] = g;
  }
}

double SyntheticLoss(double pull, std::span<const float> weights) {
  if (weights.empty()) return 0.0;
  double sumsq = 0.0;
  for (float w : weights) sumsq += static_cast<double>(w) * w;
  return 0.5 * pull * sumsq / static_cast<double>(weights.size());
}

}  // namespace sieve
