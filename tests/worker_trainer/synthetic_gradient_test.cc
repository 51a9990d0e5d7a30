#include "worker/trainer/synthetic_gradient.h"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(WorkerTrainerSynthetic, GaussianMoments) {
  SyntheticGradientSpec spec{GradDist::kGaussian, 2.0, 0.0, 1, 0};
  Moments m = Measure(Draw(spec, 0, 1000000));
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.var, 4.0, 0.03);
  EXPECT_NEAR(m.excess_kurtosis, 0.0, 0.05);
}

TEST(WorkerTrainerSynthetic, LaplaceMoments) {
  SyntheticGradientSpec spec{GradDist::kLaplace, 1.0, 0.0, 1, 0};
  Moments m = Measure(Draw(spec, 0, 1000000));
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.var, 1.0, 0.01);
  EXPECT_NEAR(m.excess_kurtosis, 3.0, 0.25);
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

}  // namespace
}  // namespace sieve
