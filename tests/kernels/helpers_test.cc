// Tests of the stateless helpers: Φ⁻¹, name parsing, shard split, scatter-add, fp16, bf16 and the
// saturating rounding of pushed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
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

// The bf16 a float rounds to, computed independently of the implementation: the two bf16
// neighbours of x (x's bits truncated to 16, and the next bf16 away from zero), the nearer in
// double arithmetic, a tie to the even pattern. Past the largest finite bf16 the upper neighbour
// is ±2^128 (IEEE rounding with an unbounded exponent), which stands for ±Inf.
uint16_t OracleBf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isinf(x)) return static_cast<uint16_t>(bits >> 16);
  const uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
  const double lo_value = std::bit_cast<float>(lo);
  const double hi_value = (hi & 0x7fffffffu) == 0x7f800000u
                              ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(x))
                              : static_cast<double>(std::bit_cast<float>(hi));
  const double below = std::fabs(static_cast<double>(x) - lo_value);
  const double above = std::fabs(hi_value - static_cast<double>(x));
  if (below < above) return static_cast<uint16_t>(lo >> 16);
  if (above < below) return static_cast<uint16_t>(hi >> 16);
  return static_cast<uint16_t>(((lo >> 16) & 1u) == 0 ? lo >> 16 : hi >> 16);
}

void ExpectBf16OfFloat(float x) {
  const uint16_t got = FloatToBf16(x);
  if (std::isnan(x)) {
    EXPECT_EQ(got & 0x7f80u, 0x7f80u) << std::bit_cast<uint32_t>(x);
    EXPECT_NE(got & 0x0040u, 0u) << "quiet NaN, bits " << std::bit_cast<uint32_t>(x);
    EXPECT_EQ(got & 0x8000u, (std::bit_cast<uint32_t>(x) >> 16) & 0x8000u) << "sign kept";
    return;
  }
  ASSERT_EQ(got, OracleBf16(x)) << "x bits 0x" << std::hex << std::bit_cast<uint32_t>(x);
}

TEST(KernelsBf16, MatchesANearestNeighbourOracle) {
  // Every bf16 pattern with the dropped half at the interesting places (exact, just above and
  // below the midpoint, the midpoint itself, the ends), both signs, subnormals, the largest
  // finite values (which overflow to Inf past the midpoint), Inf and NaN.
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x3fffu, 0x7fffu, 0x8000u, 0x8001u, 0xc000u, 0xffffu};
  for (uint32_t b = 0; b < 65536; ++b) {
    for (uint32_t low : lows) ExpectBf16OfFloat(std::bit_cast<float>((b << 16) | low));
  }
  std::mt19937 rng(35);
  for (int i = 0; i < 2000000; ++i)
    ExpectBf16OfFloat(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  // Known values.
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80u);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie -> even (down)
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie -> even (up)
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80u);  // overflows to Inf
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xff80u);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7fu);  // just below the midpoint
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x00018000u)), 0x0002u);  // subnormal tie -> even
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000u);
}

TEST(KernelsBf16, DecodingIsExactAndEveryBf16RoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), b << 16) << b;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    EXPECT_EQ(FloatToBf16(f), b) << b;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> in(1000), back(1000);
  for (float& v : in) v = n(rng);
  std::vector<uint16_t> packed(in.size());
  ASSERT_TRUE(PackBf16(in, packed).ok());
  ASSERT_TRUE(UnpackBf16(packed, back).ok());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(packed[i], OracleBf16(in[i])) << i;
    EXPECT_EQ(FloatToBf16(back[i]), packed[i]) << i;  // a decoded value packs to itself
    EXPECT_LE(std::fabs(back[i] - in[i]), std::ldexp(std::fabs(in[i]), -8)) << i;
  }
  EXPECT_FALSE(PackBf16(in, std::span<uint16_t>(packed.data(), 999)).ok());
  EXPECT_FALSE(UnpackBf16(packed, std::span<float>(back.data(), 999)).ok());
}

// RoundToValuePrecision is the 16-bit pack and unpack, except that a finite value past the
// precision's range saturates to its largest finite value instead of becoming Inf.
TEST(KernelsValuePrecision, RoundsLikeThePackAndSaturates) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isfinite(x)) continue;
    EXPECT_EQ(std::bit_cast<uint32_t>(RoundToValuePrecision(x, ValuePrecision::kFp32)),
              std::bit_cast<uint32_t>(x));
    const float b = Bf16ToFloat(FloatToBf16(x));
    const float h = HalfToFloat(FloatToHalf(x));
    const float bf16 = RoundToValuePrecision(x, ValuePrecision::kBf16);
    const float fp16 = RoundToValuePrecision(x, ValuePrecision::kFp16);
    if (std::isfinite(b)) {
      EXPECT_EQ(std::bit_cast<uint32_t>(bf16), std::bit_cast<uint32_t>(b));
    } else {
      EXPECT_EQ(bf16, std::copysign(Bf16ToFloat(0x7f7fu), x));
    }
    if (std::isfinite(h)) {
      EXPECT_EQ(std::bit_cast<uint32_t>(fp16), std::bit_cast<uint32_t>(h));
    } else {
      EXPECT_EQ(fp16, std::copysign(65504.0f, x));
    }
  }
  EXPECT_EQ(RoundToValuePrecision(1e6f, ValuePrecision::kFp16), 65504.0f);
  EXPECT_EQ(RoundToValuePrecision(-65520.0f, ValuePrecision::kFp16), -65504.0f);
  EXPECT_EQ(RoundToValuePrecision(65519.0f, ValuePrecision::kFp16), 65504.0f);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(RoundToValuePrecision(-inf, ValuePrecision::kFp16), -inf);
  EXPECT_EQ(RoundToValuePrecision(inf, ValuePrecision::kBf16), inf);
  EXPECT_TRUE(std::isnan(RoundToValuePrecision(std::nanf(""), ValuePrecision::kBf16)));
  std::vector<float> in = {1e6f, -1e6f, 0.1f, std::numeric_limits<float>::max()};
  std::vector<uint16_t> out(in.size());
  ASSERT_TRUE(PackSaturating(in, ValuePrecision::kFp16, out).ok());
  EXPECT_EQ(out, (std::vector<uint16_t>{0x7bffu, 0xfbffu, FloatToHalf(0.1f), 0x7bffu}));
  ASSERT_TRUE(PackSaturating(in, ValuePrecision::kBf16, out).ok());
  EXPECT_EQ(out, (std::vector<uint16_t>{FloatToBf16(1e6f), FloatToBf16(-1e6f), FloatToBf16(0.1f),
                                        0x7f7fu}));
  std::vector<float> back(in.size());
  ASSERT_TRUE(Unpack16(out, ValuePrecision::kBf16, back).ok());
  EXPECT_EQ(back[3], Bf16ToFloat(0x7f7fu));
  EXPECT_FALSE(PackSaturating(in, ValuePrecision::kFp32, out).ok());
  EXPECT_FALSE(Unpack16(out, ValuePrecision::kFp32, back).ok());
}

}  // namespace
}  // namespace sieve
