#include "worker/trainer/synthetic_gradient.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace sieve {
namespace {

struct Moments {
  double mean = 0, var = 0, excess_kurtosis = 0;
};

Moments Measure(const std::vector<float>& x) {
  double n = static_cast<double>(x.size()), s = 0;
  for (float v : x) s += v;
  Moments m;
  m.mean = s / n;
  double m2 = 0, m4 = 0;
  for (float v : x) {
    double c = v - m.mean;
    m2 += c * c;
    m4 += c * c * c * c;
  }
  m.var = m2 / n;
  m.excess_kurtosis = (m4 / n) / (m.var * m.var) - 3.0;
  return m;
}

std::vector<float> Draw(const SyntheticGradientSpec& spec, uint64_t round, size_t d) {
  std::vector<float> g(d);
  SyntheticGradient(spec, round, {}, g);
  return g;
}

TEST(WorkerTrainerSynthetic, DeterministicAndPerIndex) {
  SyntheticGradientSpec spec{GradDist::kGaussian, 1.0, 0.0, 9, 2};
  auto a = Draw(spec, 5, 3000000);  // large enough to take the OpenMP path
  auto b = Draw(spec, 5, 3000000);
  EXPECT_EQ(a, b);
  for (uint64_t i : {0u, 17u, 2999999u}) EXPECT_EQ(a[i], SyntheticNoise(spec, 5, i));
  // Prefix property: the value of index i does not depend on D.
  auto small = Draw(spec, 5, 100);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), a.begin()));
  // Other round, other rank, other seed: different streams.
  EXPECT_NE(Draw(spec, 6, 100), small);
  SyntheticGradientSpec other_rank = spec;
  other_rank.rank = 3;
  EXPECT_NE(Draw(other_rank, 5, 100), small);
  SyntheticGradientSpec other_seed = spec;
  other_seed.seed = 10;
  EXPECT_NE(Draw(other_seed, 5, 100), small);
}

// 1e6 draws of each distribution against its closed-form moments: mean 0, variance scale² (the
// Laplace's b = scale / √2), excess kurtosis 0 (Gaussian) and 3 (Laplace).
TEST(WorkerTrainerSynthetic, MomentsMatchTheClosedForm) {
  struct Case {
    GradDist dist;
    double scale, var, var_tol, kurtosis, kurtosis_tol;
  };
  for (const Case& c : {Case{GradDist::kGaussian, 2.0, 4.0, 0.03, 0.0, 0.05},
                        Case{GradDist::kLaplace, 1.0, 1.0, 0.01, 3.0, 0.25}}) {
    SCOPED_TRACE(c.dist == GradDist::kGaussian ? "gaussian" : "laplace");
    Moments m = Measure(Draw(SyntheticGradientSpec{c.dist, c.scale, 0.0, 1, 0}, 0, 1000000));
    EXPECT_NEAR(m.mean, 0.0, 0.01);
    EXPECT_NEAR(m.var, c.var, c.var_tol);
    EXPECT_NEAR(m.excess_kurtosis, c.kurtosis, c.kurtosis_tol);
  }
}

TEST(WorkerTrainerSynthetic, PullTowardZeroAndLoss) {
  SyntheticGradientSpec spec{GradDist::kGaussian, 0.0, 0.5, 1, 0};
  std::vector<float> w = {2.0f, -4.0f};
  std::vector<float> g(2);
  SyntheticGradient(spec, 0, w, g);
  EXPECT_EQ(g, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_DOUBLE_EQ(SyntheticLoss(0.5, w), 0.5 * 0.5 * 20.0 / 2);
  EXPECT_DOUBLE_EQ(SyntheticLoss(0.5, {}), 0.0);
}

// --- pool mode -------------------------------------------------------------------------------

SyntheticGradientSpec PoolSpec(GradDist dist, int rank = 0) {
  SyntheticGradientSpec spec{dist, 1.0, 0.0, 7, rank};
  spec.noise = SyntheticNoiseSource::kPool;
  return spec;
}

double Correlation(const std::vector<float>& a, const std::vector<float>& b) {
  double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0, n = static_cast<double>(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    sa += a[i];
    sb += b[i];
    sab += static_cast<double>(a[i]) * b[i];
    saa += static_cast<double>(a[i]) * a[i];
    sbb += static_cast<double>(b[i]) * b[i];
  }
  const double cov = sab / n - (sa / n) * (sb / n);
  return cov / std::sqrt((saa / n - (sa / n) * (sa / n)) * (sbb / n - (sb / n) * (sb / n)));
}

TEST(WorkerTrainerSynthetic, ParseNoiseSource) {
  EXPECT_EQ(*ParseSyntheticNoiseSource("hash"), SyntheticNoiseSource::kHash);
  EXPECT_EQ(*ParseSyntheticNoiseSource("pool"), SyntheticNoiseSource::kPool);
  EXPECT_FALSE(ParseSyntheticNoiseSource("table").ok());
  EXPECT_EQ(TrainerOptions{}.synthetic_noise, SyntheticNoiseSource::kPool);
}

TEST(WorkerTrainerSynthetic, PoolIsStandardizedGaussian) {
  auto pool = SyntheticNoisePool(PoolSpec(GradDist::kGaussian));
  ASSERT_EQ(pool->size(), kSyntheticPoolSize);
  Moments m = Measure(*pool);
  EXPECT_NEAR(m.mean, 0.0, 1e-5);  // standardized, up to float rounding
  EXPECT_NEAR(m.var, 1.0, 1e-5);
  EXPECT_NEAR(m.excess_kurtosis, 0.0, 0.05);
  // Tails of 2^20 normal draws: the extremes lie near 5σ.
  const auto [lo, hi] = std::minmax_element(pool->begin(), pool->end());
  EXPECT_LT(*lo, -4.0f);
  EXPECT_GT(*hi, 4.0f);
  EXPECT_GT(*lo, -7.0f);
  EXPECT_LT(*hi, 7.0f);
}

TEST(WorkerTrainerSynthetic, PoolIsStandardizedLaplace) {
  Moments m = Measure(*SyntheticNoisePool(PoolSpec(GradDist::kLaplace)));
  EXPECT_NEAR(m.mean, 0.0, 1e-5);
  EXPECT_NEAR(m.var, 1.0, 1e-5);
  EXPECT_NEAR(m.excess_kurtosis, 3.0, 0.25);
}

TEST(WorkerTrainerSynthetic, PoolGradientMomentsAcrossBlocks) {
  for (GradDist dist : {GradDist::kGaussian, GradDist::kLaplace}) {
    SyntheticGradientSpec spec = PoolSpec(dist);
    spec.scale = 2.0;
    Moments m = Measure(Draw(spec, 3, 3000000));
    EXPECT_NEAR(m.mean, 0.0, 0.02);
    EXPECT_NEAR(m.var, 4.0, 0.06);
    EXPECT_NEAR(m.excess_kurtosis, dist == GradDist::kLaplace ? 3.0 : 0.0, 0.3);
  }
}

TEST(WorkerTrainerSynthetic, PoolDeterministicAndPerIndex) {
  SyntheticGradientSpec spec = PoolSpec(GradDist::kGaussian, 2);
  auto a = Draw(spec, 5, 3000000);  // OpenMP path; 46 blocks, several of them wrap the pool
  EXPECT_EQ(a, Draw(spec, 5, 3000000));
  const uint64_t b = kSyntheticPoolBlock;
  for (uint64_t i : {uint64_t{0}, uint64_t{17}, b - 1, b, 7 * b + 3, uint64_t{2999999}}) {
    EXPECT_EQ(a[i], SyntheticNoise(spec, 5, i)) << i;
  }
  // Prefix property (serial path vs parallel path, partial last block).
  auto small = Draw(spec, 5, b + 100);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), a.begin()));
  // Every value is a pool entry, and one block is a cyclic window of the pool.
  auto pool = SyntheticNoisePool(spec);
  const auto start = std::find(pool->begin(), pool->end(), a[b]);
  ASSERT_NE(start, pool->end());
  const uint64_t offset = static_cast<uint64_t>(start - pool->begin());
  for (uint64_t c = 0; c < b; ++c) {
    ASSERT_EQ(a[b + c], (*pool)[(offset + c) % kSyntheticPoolSize]) << c;
  }
}

TEST(WorkerTrainerSynthetic, PoolDependsOnRoundRankSeedAndDist) {
  SyntheticGradientSpec spec = PoolSpec(GradDist::kGaussian, 1);
  const size_t d = 2 * kSyntheticPoolBlock;
  auto base = Draw(spec, 4, d);
  // Another round: new offsets, uncorrelated values.
  auto next = Draw(spec, 5, d);
  EXPECT_NE(next, base);
  EXPECT_LT(std::fabs(Correlation(base, next)), 0.02);
  // Another rank, seed or distribution: another pool.
  SyntheticGradientSpec other = spec;
  other.rank = 2;
  EXPECT_NE(*SyntheticNoisePool(other), *SyntheticNoisePool(spec));
  EXPECT_LT(std::fabs(Correlation(Draw(other, 4, d), base)), 0.02);
  other = spec;
  other.seed = 8;
  EXPECT_NE(*SyntheticNoisePool(other), *SyntheticNoisePool(spec));
  other = spec;
  other.dist = GradDist::kLaplace;
  EXPECT_NE(*SyntheticNoisePool(other), *SyntheticNoisePool(spec));
  // Pool values differ from hash mode's.
  other = spec;
  other.noise = SyntheticNoiseSource::kHash;
  EXPECT_NE(Draw(other, 4, d), base);
}

TEST(WorkerTrainerSynthetic, PoolRoundsOfOneCoordinateAreIndependentDraws) {
  // Coordinate i over many rounds: i.i.d. picks from the pool (mean 0, variance 1, no lag-1
  // correlation); the neighbour in the same block is a different pool entry every round.
  SyntheticGradientSpec spec = PoolSpec(GradDist::kGaussian);
  const uint64_t rounds = 20000;
  std::vector<float> xs(rounds), ys(rounds);
  for (uint64_t t = 0; t < rounds; ++t) {
    xs[t] = SyntheticNoise(spec, t, 12345);
    ys[t] = SyntheticNoise(spec, t, 12346);
  }
  Moments m = Measure(xs);
  EXPECT_NEAR(m.mean, 0.0, 0.04);
  EXPECT_NEAR(m.var, 1.0, 0.05);
  std::vector<float> lag(xs.begin() + 1, xs.end());
  xs.pop_back();
  EXPECT_LT(std::fabs(Correlation(xs, lag)), 0.04);
  ys.pop_back();
  EXPECT_LT(std::fabs(Correlation(xs, ys)), 0.04);
  // Within one round and block, the B values are distinct pool entries.
  auto block = Draw(spec, 0, kSyntheticPoolBlock);
  EXPECT_GT(std::set<float>(block.begin(), block.end()).size(), kSyntheticPoolBlock * 99 / 100);
}

TEST(WorkerTrainerSynthetic, PoolPullTowardZero) {
  SyntheticGradientSpec spec = PoolSpec(GradDist::kLaplace);
  spec.scale = 0.5;
  spec.pull = 0.25;
  std::vector<float> w(kSyntheticPoolBlock + 10);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) - 6.0f;
  std::vector<float> g(w.size());
  SyntheticGradient(spec, 9, w, g);
  for (size_t i : {size_t{0}, size_t{5}, w.size() - 1}) {
    EXPECT_EQ(g[i], 0.5f * SyntheticNoise(spec, 9, i) + 0.25f * w[i]) << i;
  }
  spec.scale = 0.0;
  SyntheticGradient(spec, 9, w, g);
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(g[i], 0.25f * w[i]) << i;
}

}  // namespace
}  // namespace sieve
