// The CPU NnOps (see kernels/nn/nn_ops.h): OpenBLAS cblas_sgemm for GEMM, the shared functors of
// nn_functors.h over Thrust's OMP system (explicit thrust::omp::par on raw pointers only, so this
// object coexists with the CUDA implementation in one binary) for everything else. Host memory
// throughout: "device" pointers are host pointers and every op is complete on return.
#include <cblas.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/nn/nn_functors.h"
#include "kernels/nn/nn_ops.h"

namespace sieve {
namespace nn_internal {
namespace {

template <typename Fn>
void ForEach(size_t n, Fn fn) {
  if (n == 0) return;
  thrust::for_each(thrust::omp::par, thrust::counting_iterator<size_t>(0),
                   thrust::counting_iterator<size_t>(n), fn);
}

// A functor of nn_functors.h over its items().
template <typename Fn>
void RunItems(const Fn& fn) {
  ForEach(fn.items(), fn);
}

class CpuNnOps final : public NnOps {
 public:
  Device device() const override { return Device::kCpu; }

  StatusOr<int32_t*> AllocInt32(size_t n) override {
    int32_t* p = new (std::nothrow) int32_t[std::max<size_t>(1, n)]();
    if (p == nullptr)
      return UnavailableError("out of host memory (" + std::to_string(n) + " int32)");
    return p;
  }
  void FreeInt32(int32_t* p) override { delete[] p; }
  Status ToHostInt32(const int32_t* src, size_t n, int32_t* dst) override {
    if (n > 0) std::memcpy(dst, src, n * sizeof(int32_t));
    return Status::Ok();
  }

  Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              const float* b, float beta, float* c) override {
    SIEVE_RETURN_IF_ERROR(CheckGemm(m, n, k));
    if (m == 0 || n == 0) return Status::Ok();
    const GemmLd ld = GemmLeadingDims(trans_a, trans_b, m, n, k);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, ld.a, b, ld.b, beta, c, n);
    return Status::Ok();
  }

  Status BiasFill(const float* bias, int64_t rows, int cols, float* y) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias fill: negative size");
    RunItems(BiasFillFn{bias, rows, cols, y});
    return Status::Ok();
  }
  Status BiasAdd(const float* bias, int64_t rows, int cols, float* y) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias add: negative size");
    RunItems(BiasAddFn{bias, rows, cols, y});
    return Status::Ok();
  }
  Status BiasGrad(const float* dy, int64_t rows, int cols, float* dbias) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias grad: negative size");
    ForEach(static_cast<size_t>(cols), BiasGradFn{dy, rows, cols, dbias});
    return Status::Ok();
  }

  Status ReluForward(float* v, int64_t n) override {
    if (n < 0) return InvalidArgumentError("relu: negative size");
    ForEach(static_cast<size_t>(n), ReluForwardFn{v});
    return Status::Ok();
  }
  Status ReluBackward(const float* y, int64_t n, float* dv) override {
    if (n < 0) return InvalidArgumentError("relu: negative size");
    ForEach(static_cast<size_t>(n), ReluBackwardFn{y, dv});
    return Status::Ok();
  }

  Status SoftmaxCrossEntropy(const float* logits, const uint8_t* labels, int batch, int classes,
                             float* dlogits, XentResult* out) override {
    SIEVE_RETURN_IF_ERROR(CheckLabels(labels, batch, classes));
    row_loss_.resize(batch);
    row_hit_.resize(batch);
    ForEach(static_cast<size_t>(batch),
            SoftmaxXentRowFn{logits, labels, classes, 1.0f / static_cast<float>(batch), dlogits,
                             row_loss_.data(), row_hit_.data()});
    *out = ReduceXentRows(row_loss_.data(), row_hit_.data(), batch);
    return Status::Ok();
  }
  Status CountCorrect(const float* logits, const uint8_t* labels, int batch, int classes,
                      int64_t* correct) override {
    SIEVE_RETURN_IF_ERROR(CheckLabels(labels, batch, classes));
    row_hit_.resize(batch);
    ForEach(static_cast<size_t>(batch), ArgMaxHitFn{logits, labels, classes, row_hit_.data()});
    *correct = ReduceXentRows(nullptr, row_hit_.data(), batch).correct;
    return Status::Ok();
  }

  Status Im2Col(const float* x, int batch, int h, int w, int c, int k, float* patches) override {
    SIEVE_RETURN_IF_ERROR(CheckConv(batch, h, w, c, k));
    const int64_t oh = h - k + 1, ow = w - k + 1;
    RunItems(Im2ColFn{x, batch, h, w, c, k, oh, ow, patches});
    return Status::Ok();
  }
  Status Col2Im(const float* dpatches, int batch, int h, int w, int c, int k, float* dx) override {
    SIEVE_RETURN_IF_ERROR(CheckConv(batch, h, w, c, k));
    const int64_t oh = h - k + 1, ow = w - k + 1;
    RunItems(Col2ImFn{dpatches, batch, h, w, c, k, oh, ow, dx});
    return Status::Ok();
  }

  Status MaxPool2x2Forward(const float* x, int batch, int h, int w, int c, float* y,
                           int32_t* argmax) override {
    SIEVE_RETURN_IF_ERROR(CheckPool(batch, h, w, c));
    RunItems(MaxPoolForwardFn{x, batch, h, w, c, y, argmax});
    return Status::Ok();
  }
  Status MaxPool2x2Backward(const float* dy, const int32_t* argmax, int batch, int h, int w, int c,
                            float* dx) override {
    SIEVE_RETURN_IF_ERROR(CheckPool(batch, h, w, c));
    const int64_t n = int64_t{batch} * h * w * c;
    if (n > 0) std::memset(dx, 0, sizeof(float) * n);
    ForEach(static_cast<size_t>(n / 4), MaxPoolBackwardFn{dy, argmax, dx});
    return Status::Ok();
  }

  Status WeightDecayAdd(const float* w, size_t n, float wd, float* g) override {
    ForEach(n, WeightDecayFn{w, wd, g});
    return Status::Ok();
  }

  Status GatherRows(const float* src, int64_t src_rows, int row_size, const int64_t* rows,
                    int count, float* dst) override {
    SIEVE_RETURN_IF_ERROR(CheckGather(src_rows, row_size, rows, count));
    RunItems(GatherRowsFn{src, rows, count, row_size, dst});
    return Status::Ok();
  }

  Status PoolNoiseGradient(const float* pool, uint64_t pool_size, uint64_t block,
                           const uint64_t* offsets, float scale, float pull, const float* w,
                           uint64_t d, float* grad) override {
    SIEVE_RETURN_IF_ERROR(CheckPoolNoise(pool_size, block, offsets, d));
    RunItems(PoolNoiseFn{pool, pool_size - 1, static_cast<uint64_t>(std::countr_zero(block)),
                         offsets, scale, pull, w, d, grad});
    return Status::Ok();
  }

  Status ScatterSet(const uint32_t* idx, const float* vals, size_t count, float* w,
                    size_t n) override {
    SIEVE_RETURN_IF_ERROR(CheckScatter(idx, count, n));
    ForEach(count, ScatterSetFn{idx, vals, w});
    return Status::Ok();
  }

 private:
  // Per-row scratch of the cross-entropy (grow-only).
  std::vector<double> row_loss_;
  std::vector<int32_t> row_hit_;
};

}  // namespace

StatusOr<std::unique_ptr<NnOps>> NewCpuNnOps(BackendContext* ctx) {
  if (ctx->device() != Device::kCpu) return InvalidArgumentError("NnOps: not a CPU context");
  return std::unique_ptr<NnOps>(std::make_unique<CpuNnOps>());
}

}  // namespace nn_internal
}  // namespace sieve
