// The models on every backend against independent implementations:
// - CPU: the production Model (kernels/nn underneath) equals the CPU reference model
//   (tests/worker/cpu_reference/, the pre-NnOps code) bitwise — loss, gradient and evaluation —
//   since both make the same sgemm calls and round the same way;
// - CUDA (skipped, never passed, without a GPU): the same weights and batch give the CPU model's
//   loss and gradient within 1e-4 relative, and the same evaluation; error feedback and topk on
//   the GPU-computed gradient select what the CPU selects from the same vector.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device.h"
#include "kernels/model/param_init.h"
#include "kernels/selection.h"
#include "tests/worker/cpu_reference/model.h"
#include "worker/model/model.h"

namespace sieve {
namespace {

struct Batch {
  std::vector<float> params, x;
  std::vector<uint8_t> labels;
  int batch = 0;
};

Batch MakeBatch(const ModelLayout& layout, int batch, uint32_t seed) {
  Batch b;
  b.batch = batch;
  b.params = InitParams(layout, seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.05f), pixel(0.0f, 1.0f);
  for (float& v : b.params) v += noise(rng);
  b.x.resize(static_cast<size_t>(batch) * 784);
  for (float& v : b.x) v = pixel(rng);
  for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<uint8_t>(rng() % 10));
  return b;
}

class WorkerModelVsCpuReference : public ::testing::TestWithParam<const char*> {};

TEST_P(WorkerModelVsCpuReference, LossGradientAndEvaluationAreBitwiseEqual) {
  StatusOr<std::unique_ptr<Model>> model = MakeModel(GetParam(), Device::kCpu);
  StatusOr<std::unique_ptr<cpu_reference::Model>> ref = cpu_reference::MakeModel(GetParam());
  ASSERT_TRUE(model.ok() && ref.ok());
  const Batch b = MakeBatch((*model)->layout(), 19, 41);
  const size_t d = (*model)->num_params();
  std::vector<float> grad(d), grad_ref(d);
  float loss = 0.0f;
  ASSERT_TRUE((*model)
                  ->ForwardBackward(b.params.data(), b.x.data(), b.labels.data(), b.batch,
                                    grad.data(), &loss)
                  .ok());
  const float loss_ref = (*ref)->ForwardBackward(b.params.data(), b.x.data(), b.labels.data(),
                                                 b.batch, grad_ref.data());
  EXPECT_EQ(std::bit_cast<uint32_t>(loss), std::bit_cast<uint32_t>(loss_ref))
      << loss << " vs " << loss_ref;
  for (size_t i = 0; i < d; ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(grad[i]), std::bit_cast<uint32_t>(grad_ref[i]))
        << "grad[" << i << "]: " << grad[i] << " vs " << grad_ref[i];
  }
  EvalResult eval;
  ASSERT_TRUE(
      (*model)->Evaluate(b.params.data(), b.x.data(), b.labels.data(), b.batch, &eval, 7).ok());
  const cpu_reference::EvalResult eval_ref =
      (*ref)->Evaluate(b.params.data(), b.x.data(), b.labels.data(), b.batch, 7);
  EXPECT_EQ(eval.loss, eval_ref.loss);
  EXPECT_EQ(eval.correct, eval_ref.correct);
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, WorkerModelVsCpuReference,
                         ::testing::Values("softmax", "fnn3", "cnn"));

class WorkerModelOnCuda : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no GPU visible";
  }
};

// Copies v into memory of `ctx` (freed by the caller through ctx).
float* Upload(BackendContext* ctx, const std::vector<float>& v) {
  StatusOr<float*> p = ctx->Alloc(v.size());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return nullptr;
  EXPECT_TRUE(ctx->FromHost(v.data(), v.size(), *p).ok());
  return *p;
}

TEST_P(WorkerModelOnCuda, MatchesTheCpuModelWithin1e4Relative) {
  StatusOr<std::unique_ptr<Model>> cpu = MakeModel(GetParam(), Device::kCpu);
  StatusOr<std::unique_ptr<Model>> gpu = MakeModel(GetParam(), Device::kCuda);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_EQ((*gpu)->device(), Device::kCuda);
  const Batch b = MakeBatch((*cpu)->layout(), 32, 43);
  const size_t d = (*cpu)->num_params();
  std::vector<float> grad_cpu(d);
  float loss_cpu = 0.0f;
  ASSERT_TRUE((*cpu)
                  ->ForwardBackward(b.params.data(), b.x.data(), b.labels.data(), b.batch,
                                    grad_cpu.data(), &loss_cpu)
                  .ok());

  BackendContext* ctx = (*gpu)->context();
  float* params = Upload(ctx, b.params);
  float* x = Upload(ctx, b.x);
  StatusOr<float*> grad_dev = ctx->Alloc(d);
  ASSERT_TRUE(params != nullptr && x != nullptr && grad_dev.ok());
  float loss_gpu = 0.0f;
  ASSERT_TRUE(
      (*gpu)->ForwardBackward(params, x, b.labels.data(), b.batch, *grad_dev, &loss_gpu).ok());
  std::vector<float> grad_gpu(d);
  ASSERT_TRUE(ctx->ToHost(*grad_dev, d, grad_gpu.data()).ok());
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-4 * std::fabs(loss_cpu));
  double max_abs = 0.0;
  for (float g : grad_cpu) max_abs = std::max(max_abs, std::fabs(double{g}));
  for (size_t i = 0; i < d; ++i) {
    ASSERT_NEAR(grad_gpu[i], grad_cpu[i], 1e-4 * std::max(std::fabs(double{grad_cpu[i]}), max_abs))
        << "grad[" << i << "]";
  }
  // The selection of the GPU-computed gradient (error feedback and topk on CUDA) equals the CPU
  // selection of the same vector.
  const uint64_t k = KForDensity(0.01, d);
  Selection sel_gpu, sel_cpu;
  auto ef_gpu = ErrorFeedback::Create(Device::kCuda, d);
  auto ef_cpu = ErrorFeedback::Create(Device::kCpu, d);
  ASSERT_TRUE(ef_gpu.ok() && ef_cpu.ok());
  ASSERT_TRUE((*ef_gpu)->AccumulateDevice(*grad_dev, 0.0f, 1.0f).ok());
  ASSERT_TRUE((*ef_gpu)->Select(Compressor::kTopk, k, SelectOptions{}, &sel_gpu).ok());
  ASSERT_TRUE((*ef_cpu)->Accumulate(grad_gpu, 0.0f, 1.0f).ok());
  ASSERT_TRUE((*ef_cpu)->Select(Compressor::kTopk, k, SelectOptions{}, &sel_cpu).ok());
  EXPECT_EQ(sel_gpu.indices, sel_cpu.indices);
  EXPECT_EQ(sel_gpu.values, sel_cpu.values);

  EvalResult e_cpu, e_gpu;
  ASSERT_TRUE(
      (*cpu)->Evaluate(b.params.data(), b.x.data(), b.labels.data(), b.batch, &e_cpu, 10).ok());
  ASSERT_TRUE((*gpu)->Evaluate(params, x, b.labels.data(), b.batch, &e_gpu, 10).ok());
  EXPECT_NEAR(e_gpu.loss, e_cpu.loss, 1e-4 * e_cpu.loss);
  EXPECT_EQ(e_gpu.correct, e_cpu.correct);
  ctx->Free(params);
  ctx->Free(x);
  ctx->Free(*grad_dev);
}

INSTANTIATE_TEST_SUITE_P(AllModels, WorkerModelOnCuda,
                         ::testing::Values("softmax", "fnn3", "cnn", "cnn_large"));

TEST(WorkerModelDevice, CudaWithoutAGpuIsAClearError) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a GPU is visible";
  StatusOr<std::unique_ptr<Model>> m = MakeModel("fnn3", Device::kCuda);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("CUDA"), std::string::npos) << m.status().ToString();
}

}  // namespace
}  // namespace sieve
