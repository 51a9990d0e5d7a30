// Tests of the stateless helpers: Φ⁻¹, name parsing, shard split, scatter-add, fp16.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/compressor.h"
#include "kernels/device.h"
#include "kernels/normal_quantile.h"
#include "kernels/sparse_ops.h"

namespace sieve {
namespace {

TEST(KernelsNormalQuantile, KnownQuantiles) {
  struct Known {
    double p, z;
  };
  const Known known[] = {{0.5, 0.0},
                         {0.9, 1.2815515655446004},
                         {0.95, 1.6448536269514722},
                         {0.975, 1.959963984540054},
                         {0.99, 2.3263478740408408},
                         {0.999, 3.090232306167813},
                         {0.025, -1.959963984540054},
                         {0.001, -3.090232306167813}};
  for (const Known& k : known) EXPECT_NEAR(NormalQuantile(k.p), k.z, 1e-9) << k.p;
}

TEST(KernelsNormalQuantile, InvertsTheCdfTo1e9) {
  // Newton-refined reference from an accurate Φ (erfc): the refined root is the true quantile.
  for (double p : {1e-300, 1e-100, 1e-20, 1e-10, 1e-5, 0.0005, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.9995,
                   0.97575, 0.999999, 1 - 1e-12}) {
    const double z = NormalQuantile(p);
    double ref = z;
    for (int i = 0; i < 3; ++i) {
      const double pdf = NormalPdf(ref);
      if (pdf < 1e-300) break;
      ref -= (NormalCdf(ref) - p) / pdf;
    }
    EXPECT_NEAR(z, ref, 1e-9 * std::max(1.0, std::fabs(ref))) << p;
  }
  EXPECT_NEAR(NormalQuantile(1.0 - 0.001 / 2), 3.2905267314919, 1e-9);
  EXPECT_TRUE(std::isinf(NormalQuantile(0.0)) && NormalQuantile(0.0) < 0);
  EXPECT_TRUE(std::isinf(NormalQuantile(1.0)) && NormalQuantile(1.0) > 0);
  EXPECT_TRUE(std::isnan(NormalQuantile(-0.1)));
  EXPECT_TRUE(std::isnan(NormalQuantile(std::nan(""))));
}

TEST(KernelsNames, ParseCompressorRoundTrips) {
  for (const char* name : {"none", "topk", "gaussiank", "gaussiank_paper", "dgc", "randomk"}) {
    StatusOr<Compressor> c = ParseCompressor(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_EQ(CompressorName(*c), name);
  }
  for (const char* bad : {"", "TopK", "gaussian", "top-k", "dgc "}) {
    StatusOr<Compressor> c = ParseCompressor(bad);
    EXPECT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(KernelsNames, ParseDevice) {
  ASSERT_TRUE(ParseDevice("cpu").ok());
  EXPECT_EQ(*ParseDevice("cpu"), Device::kCpu);
  StatusOr<Device> a = ParseDevice("auto");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, CudaDeviceAvailable() ? Device::kCuda : Device::kCpu);
  StatusOr<Device> c = ParseDevice("cuda");
  EXPECT_EQ(c.ok(), CudaDeviceAvailable());
  if (!c.ok()) {
    EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(ParseDevice("gpu").status().code(), StatusCode::kInvalidArgument);
}

TEST(KernelsScatterAdd, AddsAndValidates) {
  std::vector<float> dense(8, 1.0f);
  ASSERT_TRUE(
      ScatterAdd(std::vector<uint32_t>{1, 3, 3}, std::vector<float>{2.0f, 1.0f, 0.5f}, 2.0f, dense)
          .ok());
  EXPECT_EQ(dense, (std::vector<float>{1, 5, 1, 4, 1, 1, 1, 1}));
  const std::vector<float> before = dense;
  EXPECT_EQ(ScatterAdd(std::vector<uint32_t>{0, 8}, std::vector<float>{1, 1}, 1.0f, dense).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(dense, before);  // nothing touched on error
  EXPECT_FALSE(ScatterAdd(std::vector<uint32_t>{0}, std::vector<float>{}, 1.0f, dense).ok());
}

TEST(KernelsFp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << h;
  }
}

TEST(KernelsFp16, RoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00u);  // ties to even → Inf
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00u);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00u);     // tie → even (1.0)
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02u);     // tie → even (upwards)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);  // tie → even (zero)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000u);
  std::vector<float> in = {0.1f, -2.5f, 3e-6f}, back(3);
  std::vector<uint16_t> packed(3);
  ASSERT_TRUE(PackFp16(in, packed).ok());
  ASSERT_TRUE(UnpackFp16(packed, back).ok());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(back[i], in[i], std::max(std::fabs(in[i]) * 1e-3, 6e-8));
  EXPECT_FALSE(PackFp16(in, std::span<uint16_t>(packed.data(), 2)).ok());
}

}  // namespace
}  // namespace sieve
