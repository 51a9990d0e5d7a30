// The synthetic model's gradient computed in device memory (NnOps::PoolNoiseGradient from the
// pool and SyntheticPoolOffsets) against the host implementation (SyntheticGradient): bitwise on
// the CPU backend and on CUDA (the same single-rounded multiplies and adds; CUDA skipped without a
// GPU), with and without the pull term, across block and pool wrap-around.
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/nn/nn_ops.h"
#include "worker/trainer/synthetic_gradient.h"

namespace sieve {
namespace {

class SyntheticOnDevice : public ::testing::TestWithParam<Device> {};

TEST_P(SyntheticOnDevice, PoolGradientEqualsTheHostOne) {
  if (GetParam() == Device::kCuda && !CudaDeviceAvailable()) GTEST_SKIP() << "no GPU visible";
  StatusOr<std::unique_ptr<NnOps>> ops = NnOps::Create(GetParam());
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  BackendContext* ctx = (*ops)->context();
  // Three blocks and a partial fourth: offsets near the pool's end make windows wrap.
  const uint64_t d = 3 * kSyntheticPoolBlock + 1000;
  std::vector<float> w(d);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : w) v = normal(rng);

  SyntheticGradientSpec spec{GradDist::kLaplace, 0.7, 0.25, 9, 2, SyntheticNoiseSource::kPool};
  const std::shared_ptr<const std::vector<float>> pool = SyntheticNoisePool(spec);
  StatusOr<float*> pool_dev = ctx->Alloc(pool->size());
  StatusOr<float*> w_dev = ctx->Alloc(d);
  StatusOr<float*> g_dev = ctx->Alloc(d);
  ASSERT_TRUE(pool_dev.ok() && w_dev.ok() && g_dev.ok());
  ASSERT_TRUE(ctx->FromHost(pool->data(), pool->size(), *pool_dev).ok());
  ASSERT_TRUE(ctx->FromHost(w.data(), d, *w_dev).ok());

  for (uint64_t round : {uint64_t{0}, uint64_t{17}, uint64_t{123456}}) {
    for (double pull : {0.25, 0.0}) {
      spec.pull = pull;
      std::vector<float> want(d);
      SyntheticGradient(spec, round, w, want);
      std::vector<uint64_t> offsets;
      SyntheticPoolOffsets(spec, round, d, &offsets);
      ASSERT_EQ(offsets.size(), 4u);
      ASSERT_TRUE((*ops)
                      ->PoolNoiseGradient(*pool_dev, kSyntheticPoolSize, kSyntheticPoolBlock,
                                          offsets.data(), static_cast<float>(spec.scale),
                                          static_cast<float>(pull), pull != 0.0 ? *w_dev : nullptr,
                                          d, *g_dev)
                      .ok());
      std::vector<float> got(d);
      ASSERT_TRUE(ctx->ToHost(*g_dev, d, got.data()).ok());
      for (uint64_t i = 0; i < d; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "round " << round << " pull " << pull << " i " << i;
      }
    }
  }
  std::vector<uint64_t> bad = {0, kSyntheticPoolSize, 0, 0};
  EXPECT_EQ((*ops)
                ->PoolNoiseGradient(*pool_dev, kSyntheticPoolSize, kSyntheticPoolBlock, bad.data(),
                                    1.0f, 0.0f, nullptr, d, *g_dev)
                .code(),
            StatusCode::kInvalidArgument);
  ctx->Free(*pool_dev);
  ctx->Free(*w_dev);
  ctx->Free(*g_dev);
}

INSTANTIATE_TEST_SUITE_P(Backends, SyntheticOnDevice,
                         ::testing::Values(Device::kCpu, Device::kCuda),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           return std::string(DeviceName(info.param));
                         });

}  // namespace
}  // namespace sieve
