// Statistical tests: Gaussian-k on Gaussian, heavy- and light-tailed data; contraction ratio of
// exact top-k against closed forms; σ-histogram. Fixed seeds, CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/normal_quantile.h"
#include "kernels/selection.h"

namespace sieve {
namespace {

enum class Dist { kNormal, kLaplace, kUniform, kTruncNormal };

std::vector<float> Sample(Dist dist, size_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  std::exponential_distribution<double> e(1.0);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> x(d);
  for (float& v : x) {
    switch (dist) {
      case Dist::kNormal:
        v = static_cast<float>(n(rng));
        break;
      case Dist::kLaplace:
        v = static_cast<float>((rng() & 1) ? e(rng) : -e(rng));
        break;
      case Dist::kUniform:
        v = static_cast<float>(u(rng));
        break;
      case Dist::kTruncNormal: {
        double z;
        do z = n(rng);
        while (std::fabs(z) > 2.5);
        v = static_cast<float>(z);
        break;
      }
    }
  }
  return x;
}

constexpr size_t kD = 1000000;
constexpr uint64_t kK = 1000;  // ρ = 0.001

bool InBand(const Selection& s) { return s.size() >= (2 * kK + 2) / 3 && s.size() <= 4 * kK / 3; }

TEST(KernelsGaussianK, NormalDataNeedsNoAdjustment) {
  const std::vector<float> x = Sample(Dist::kNormal, kD, 1);
  for (Compressor c : {Compressor::kGaussiank, Compressor::kGaussiankPaper}) {
    Selection s;
    ASSERT_TRUE(SelectHost(c, x, kK, {}, &s).ok());
    EXPECT_GE(s.size(), 900u) << CompressorName(c);
    EXPECT_LE(s.size(), 1100u) << CompressorName(c);
    EXPECT_EQ(s.iterations, 0) << CompressorName(c);
    EXPECT_FALSE(s.exact_fallback);
  }
}

TEST(KernelsGaussianK, LaplaceDataAdjustsIntoTheBand) {
  const std::vector<float> x = Sample(Dist::kLaplace, kD, 2);
  for (Compressor c : {Compressor::kGaussiank, Compressor::kGaussiankPaper}) {
    Selection s;
    ASSERT_TRUE(SelectHost(c, x, kK, {}, &s).ok());
    EXPECT_GE(s.iterations, 1) << CompressorName(c);
    EXPECT_TRUE(InBand(s)) << CompressorName(c) << " selected " << s.size();
  }
}

TEST(KernelsGaussianK, LightTailsDefeatThePaperRuleOnly) {
  for (Dist dist : {Dist::kUniform, Dist::kTruncNormal}) {
    const std::vector<float> x = Sample(dist, kD, 3);
    Selection paper, robust;
    ASSERT_TRUE(SelectHost(Compressor::kGaussiankPaper, x, kK, {}, &paper).ok());
    ASSERT_TRUE(SelectHost(Compressor::kGaussiank, x, kK, {}, &robust).ok());
    EXPECT_FALSE(InBand(paper)) << "paper rule selected " << paper.size();
    EXPECT_TRUE(InBand(robust)) << "gaussiank selected " << robust.size();
    EXPECT_GE(robust.iterations, 1);
  }
}

TEST(KernelsDgc, LandsNearKOnBellShapedData) {
  for (Dist dist : {Dist::kNormal, Dist::kLaplace}) {
    const std::vector<float> x = Sample(dist, kD, 4);
    Selection s;
    ASSERT_TRUE(SelectHost(Compressor::kDgc, x, kK, {.seed = 5}, &s).ok());
    EXPECT_GE(s.size(), 800u);
    EXPECT_LE(s.size(), 1300u);
  }
  // On uniform data the ×1.3 / ×0.8 steps can overshoot past max|r| and back (DGC's rule):
  // the result is never above the band (exact top-k fallback) and a below-band count is accepted.
  const std::vector<float> u = Sample(Dist::kUniform, kD, 4);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Selection s;
    ASSERT_TRUE(SelectHost(Compressor::kDgc, u, kK, {.seed = seed}, &s).ok());
    EXPECT_LE(s.size(), 1300u);
    EXPECT_LE(s.iterations, 10);
  }
}

TEST(KernelsContraction, TopkMatchesClosedForms) {
  const size_t d = 10000000;
  const double rho = 0.001;
  const uint64_t k = KForDensity(rho, d);
  const double z = NormalQuantile(1.0 - rho / 2.0);
  const double gauss = 1.0 - 2.0 * (z * NormalPdf(z) + 1.0 - NormalCdf(z));
  const double t = std::log(1.0 / rho);
  const double laplace = 1.0 - rho * (t * t + 2.0 * t + 2.0) / 2.0;
  EXPECT_NEAR(gauss, 0.98730, 5e-5);
  EXPECT_NEAR(laplace, 0.96823, 5e-5);
  struct Case {
    Dist dist;
    double expected;
  };
  for (const Case& c : {Case{Dist::kNormal, gauss}, Case{Dist::kLaplace, laplace}}) {
    const std::vector<float> x = Sample(c.dist, d, 6);
    Selection s;
    ASSERT_TRUE(SelectHost(Compressor::kTopk, x, k, {}, &s).ok());
    ASSERT_EQ(s.size(), k);
    EXPECT_NEAR(s.ContractionRatio(), c.expected, 0.002);
    EXPECT_LT(s.ContractionRatio(), (1.0 - rho) * (1.0 - rho));
  }
}

TEST(KernelsContraction, DenseAndEmpty) {
  const std::vector<float> x = Sample(Dist::kNormal, 1000, 7);
  Selection s;
  ASSERT_TRUE(SelectHost(Compressor::kNone, x, 0, {}, &s).ok());
  EXPECT_EQ(s.ContractionRatio(), 0.0);
  ASSERT_TRUE(SelectHost(Compressor::kTopk, x, 0, {}, &s).ok());
  EXPECT_EQ(s.ContractionRatio(), 1.0);
  ASSERT_TRUE(SelectHost(Compressor::kTopk, std::vector<float>(10, 0.0f), 3, {}, &s).ok());
  EXPECT_EQ(s.ContractionRatio(), 0.0);
}

TEST(KernelsSigmaHistogram, NormalMassPerBin) {
  const size_t d = 200000;
  StatusOr<std::unique_ptr<ErrorFeedback>> ef = ErrorFeedback::Create(Device::kCpu, d);
  ASSERT_TRUE(ef.ok());
  ASSERT_TRUE((*ef)->WriteState(std::vector<float>(d, 0.0f), Sample(Dist::kNormal, d, 9)).ok());
  std::vector<uint64_t> h;
  ASSERT_TRUE((*ef)->SigmaHistogram(1.0, 8, &h).ok());  // [-4σ, 4σ) in 1σ bins
  ASSERT_EQ(h.size(), 8u);
  uint64_t total = 0;
  for (uint64_t c : h) total += c;
  EXPECT_EQ(total, d);
  const double centre = NormalCdf(1.0) - 0.5;  // mass of [0, 1σ)
  EXPECT_NEAR(static_cast<double>(h[4]) / d, centre, 0.005);
  EXPECT_NEAR(static_cast<double>(h[3]) / d, centre, 0.005);
  EXPECT_NEAR(static_cast<double>(h[7]) / d, 1.0 - NormalCdf(3.0), 0.001);
  EXPECT_FALSE((*ef)->SigmaHistogram(0.0, 8, &h).ok());
  EXPECT_FALSE((*ef)->SigmaHistogram(1.0, 1, &h).ok());
}

}  // namespace
}  // namespace sieve
