#include "worker/trainer/synthetic_gradient.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "kernels/model/param_init.h"

namespace sieve {
namespace {

static_assert((kSyntheticPoolSize & (kSyntheticPoolSize - 1)) == 0, "P must be a power of two");
static_assert(kSyntheticPoolBlock <= kSyntheticPoolSize, "a block must not repeat pool entries");

// The OpenMP threshold of the O(D) loops: below it, thread start-up costs more than it saves.
constexpr uint64_t kParallelMin = uint64_t{1} << 20;

// A 53-bit uniform in (0, 1) (never 0 or 1: the offset of half a step keeps the logs finite).
double Uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

uint64_t RankKey(const SyntheticGradientSpec& spec) {
  return CounterHash(spec.seed, 0x7261'6e6b'0000'0000ULL + static_cast<uint32_t>(spec.rank));
}

// Key of (seed, rank, round): a two-level hash so nearby ranks/rounds are unrelated streams.
uint64_t RoundKey(const SyntheticGradientSpec& spec, uint64_t round) {
  return CounterHash(RankKey(spec), round);
}

// Key of the pool of (seed, rank): a counter no round index reaches.
uint64_t PoolKey(const SyntheticGradientSpec& spec) {
  return CounterHash(RankKey(spec), 0x706f'6f6c'0000'0000ULL | (uint64_t{1} << 63));
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

// Offset of block `block` of the round with key `round_key`: uniform in [0, P).
uint64_t PoolOffset(uint64_t round_key, uint64_t block) {
  return CounterHash(round_key, block) & (kSyntheticPoolSize - 1);
}

std::vector<float> MakePool(GradDist dist, uint64_t key) {
  const int64_t p = static_cast<int64_t>(kSyntheticPoolSize);
  std::vector<float> pool(kSyntheticPoolSize);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < p; ++j) {
    pool[static_cast<size_t>(j)] = Draw(dist, key, static_cast<uint64_t>(j));
  }
  // Standardize in a fixed (serial) order so the pool does not depend on the thread count.
  double sum = 0.0;
  for (float v : pool) sum += v;
  const double mean = sum / static_cast<double>(p);
  double m2 = 0.0;
  for (float v : pool) m2 += (v - mean) * (v - mean);
  const double inv_sd = 1.0 / std::sqrt(m2 / static_cast<double>(p));
  for (float& v : pool) v = static_cast<float>((v - mean) * inv_sd);
  return pool;
}

// out[c] = scale·x[c] + pull·w[c] (w may be null: pull·w = 0), for c in [0, n).
void ScaleAdd(const float* x, float scale, const float* w, float pull, float* out, uint64_t n) {
  if (w == nullptr) {
#pragma omp simd
    for (uint64_t c = 0; c < n; ++c) out[c] = scale * x[c];
    return;
  }
#pragma omp simd
  for (uint64_t c = 0; c < n; ++c) out[c] = scale * x[c] + pull * w[c];
}

void PoolGradient(const SyntheticGradientSpec& spec, uint64_t round, const float* w, float* grad,
                  uint64_t d) {
  const std::shared_ptr<const std::vector<float>> pool = SyntheticNoisePool(spec);
  const float* table = pool->data();
  const uint64_t key = RoundKey(spec, round);
  const float scale = static_cast<float>(spec.scale);
  const float pull = static_cast<float>(spec.pull);
  const int64_t blocks = static_cast<int64_t>((d + kSyntheticPoolBlock - 1) / kSyntheticPoolBlock);
#pragma omp parallel for schedule(static) if (d > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t lo = static_cast<uint64_t>(b) * kSyntheticPoolBlock;
    const uint64_t n = std::min(kSyntheticPoolBlock, d - lo);
    const uint64_t offset = PoolOffset(key, static_cast<uint64_t>(b));
    // The window [offset, offset + n) of the pool, in at most two pieces (it may wrap).
    const uint64_t first = std::min(n, kSyntheticPoolSize - offset);
    const float* w_lo = w == nullptr ? nullptr : w + lo;
    ScaleAdd(table + offset, scale, w_lo, pull, grad + lo, first);
    ScaleAdd(table, scale, w_lo == nullptr ? nullptr : w_lo + first, pull, grad + lo + first,
             n - first);
  }
}

}  // namespace

std::shared_ptr<const std::vector<float>> SyntheticNoisePool(const SyntheticGradientSpec& spec) {
  using Key = std::tuple<GradDist, uint64_t>;
  struct Entry {
    Key key;
    std::shared_ptr<const std::vector<float>> pool;
  };
  constexpr size_t kMaxEntries = 4;
  static Mutex* const mu = new Mutex;
  static std::vector<Entry>* const cache PT_GUARDED_BY(*mu) =
      new std::vector<Entry>;  // most recent last
  const Key key{spec.dist, PoolKey(spec)};
  MutexLock lock(mu);
  for (size_t e = 0; e < cache->size(); ++e) {
    if ((*cache)[e].key == key) return (*cache)[e].pool;
  }
  auto pool = std::make_shared<const std::vector<float>>(MakePool(spec.dist, std::get<1>(key)));
  if (cache->size() == kMaxEntries) cache->erase(cache->begin());
  cache->push_back({key, pool});
  return pool;
}

float SyntheticNoise(const SyntheticGradientSpec& spec, uint64_t round, uint64_t i) {
  if (spec.noise == SyntheticNoiseSource::kPool) {
    const uint64_t offset = PoolOffset(RoundKey(spec, round), i / kSyntheticPoolBlock);
    const uint64_t slot = (offset + i % kSyntheticPoolBlock) & (kSyntheticPoolSize - 1);
    return (*SyntheticNoisePool(spec))[slot];
  }
  return Draw(spec.dist, RoundKey(spec, round), i);
}

void SyntheticGradient(const SyntheticGradientSpec& spec, uint64_t round,
                       std::span<const float> weights, std::span<float> grad) {
  const bool use_w = spec.pull != 0.0 && weights.size() == grad.size();
  if (spec.noise == SyntheticNoiseSource::kPool) {
    PoolGradient(spec, round, use_w ? weights.data() : nullptr, grad.data(), grad.size());
    return;
  }
  const uint64_t key = RoundKey(spec, round);
  const int64_t d = static_cast<int64_t>(grad.size());
  const float scale = static_cast<float>(spec.scale);
  const float pull = static_cast<float>(spec.pull);
  const GradDist dist = spec.dist;
#pragma omp parallel for schedule(static) if (grad.size() > kParallelMin)
  for (int64_t i = 0; i < d; ++i) {
    float g = scale * Draw(dist, key, static_cast<uint64_t>(i));
    if (use_w) g += pull * weights[static_cast<size_t>(i)];
    grad[static_cast<size_t>(i)] = g;
  }
}

void SyntheticPoolOffsets(const SyntheticGradientSpec& spec, uint64_t round, uint64_t d,
                          std::vector<uint64_t>* offsets) {
  const uint64_t key = RoundKey(spec, round);
  offsets->resize((d + kSyntheticPoolBlock - 1) / kSyntheticPoolBlock);
  for (uint64_t b = 0; b < offsets->size(); ++b) (*offsets)[b] = PoolOffset(key, b);
}

double SyntheticLoss(double pull, std::span<const float> weights) {
  if (weights.empty()) return 0.0;
  const float* w = weights.data();
  const size_t d = weights.size();
  double sumsq = 0.0;
#pragma omp simd reduction(+ : sumsq)
  for (size_t i = 0; i < d; ++i) sumsq += static_cast<double>(w[i]) * w[i];
  return 0.5 * pull * sumsq / static_cast<double>(d);
}

}  // namespace sieve
