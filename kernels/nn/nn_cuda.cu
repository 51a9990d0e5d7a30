// The CUDA NnOps (see kernels/nn/nn_ops.h): cuBLAS sgemm for GEMM (row-major handled by computing
// the column-major transpose product), grid-stride kernels over the shared functors of
// nn_functors.h for everything else. Every launch, copy and cuBLAS call goes to the context's
// stream; the host waits only where it reads a result or must release a host input. Host inputs
// (labels, scatter indices and values) are staged through a grow-only device arena per NnOps.
// Every CUDA and cuBLAS error becomes a Status with the library's message. cuBLAS is loaded when
// the first CUDA NnOps is created (cublas_library.h), never at program start.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda_status.h"
#include "kernels/nn/cublas_library.h"
#include "kernels/nn/nn_functors.h"
#include "kernels/nn/nn_ops.h"

namespace sieve {
namespace nn_internal {
namespace {

constexpr int kThreads = 256;

inline Status CublasStatus(const CublasLibrary& lib, cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return InternalError(std::string("cublas: ") + what + ": " + lib.status_string(st));
}
// `lib` is the CublasLibrary the call in `expr` went through.
#define SIEVE_NN_CUBLAS_TRY(lib, expr) SIEVE_RETURN_IF_ERROR(CublasStatus((lib), (expr), #expr))

inline unsigned Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(b, 4096)));
}

// fn(i) for every i < n (grid-stride).
template <typename Fn>
__global__ void ForEachKernel(size_t n, Fn fn) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    fn(i);
  }
}

inline size_t AlignUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

class CudaNnOps final : public NnOps {
 public:
  static StatusOr<std::unique_ptr<NnOps>> Create(BackendContext* ctx) {
    auto ops = std::unique_ptr<CudaNnOps>(new CudaNnOps());
    // The context's stream: borrowed (ctx outlives this), so our work is ordered with its calls.
    ops->stream_ = static_cast<cudaStream_t>(ctx->native_stream());
    SIEVE_ASSIGN_OR_RETURN(ops->cublas_, CublasLibrary::Open());
    const CublasLibrary& lib = *ops->cublas_;
    SIEVE_NN_CUBLAS_TRY(lib, lib.create(&ops->handle_));
    SIEVE_NN_CUBLAS_TRY(lib, lib.set_stream(ops->handle_, ops->stream_));
    // Full fp32 products (no TF32 tensor-op math) and bit-reproducible sgemm across runs (no
    // atomics-based split-K reductions).
    SIEVE_NN_CUBLAS_TRY(lib, lib.set_math_mode(ops->handle_, CUBLAS_DEFAULT_MATH));
    SIEVE_NN_CUBLAS_TRY(lib, lib.set_atomics_mode(ops->handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
    return std::unique_ptr<NnOps>(std::move(ops));
  }
  ~CudaNnOps() override {
    // Nothing to report errors to here; an earlier call has reported any failure of the stream.
    static_cast<void>(cudaStreamSynchronize(stream_));
    if (handle_ != nullptr) static_cast<void>(cublas_->destroy(handle_));
    if (arena_ != nullptr) static_cast<void>(cudaFree(arena_));
  }

  Device device() const override { return Device::kCuda; }

  StatusOr<int32_t*> AllocInt32(size_t n) override {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(1, n) * sizeof(int32_t);
    SIEVE_CUDA_TRY(cudaMalloc(&p, bytes));
    const Status st = CudaStatus(cudaMemsetAsync(p, 0, bytes, stream_), "memset");
    const Status sync = st.ok() ? Sync("alloc") : st;
    if (!sync.ok()) {
      static_cast<void>(cudaFree(p));
      return sync;
    }
    return static_cast<int32_t*>(p);
  }
  void FreeInt32(int32_t* p) override {
    if (p == nullptr) return;
    static_cast<void>(cudaStreamSynchronize(stream_));
    static_cast<void>(cudaFree(p));
  }
  Status ToHostInt32(const int32_t* src, size_t n, int32_t* dst) override {
    if (n == 0) return Status::Ok();
    SIEVE_CUDA_TRY(cudaMemcpyAsync(dst, src, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    return Sync("to host");
  }

  Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
              const float* b, float beta, float* c) override {
    SIEVE_RETURN_IF_ERROR(CheckGemm(m, n, k));
    if (m == 0 || n == 0) return Status::Ok();
    const GemmLd ld = GemmLeadingDims(trans_a, trans_b, m, n, k);
    // Row-major C (m x n) is column-major Cᵀ (n x m) = op(B)ᵀ·op(A)ᵀ.
    SIEVE_NN_CUBLAS_TRY(*cublas_, cublas_->sgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                                 &alpha, b, ld.b, a, ld.a, &beta, c, n));
    return Status::Ok();
  }

  Status BiasFill(const float* bias, int64_t rows, int cols, float* y) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias fill: negative size");
    return LaunchItems(BiasFillFn{bias, rows, cols, y}, "bias fill");
  }
  Status BiasAdd(const float* bias, int64_t rows, int cols, float* y) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias add: negative size");
    return LaunchItems(BiasAddFn{bias, rows, cols, y}, "bias add");
  }
  Status BiasGrad(const float* dy, int64_t rows, int cols, float* dbias) override {
    if (rows < 0 || cols < 0) return InvalidArgumentError("bias grad: negative size");
    return Launch(static_cast<size_t>(cols), BiasGradFn{dy, rows, cols, dbias}, "bias grad");
  }

  Status ReluForward(float* v, int64_t n) override {
    if (n < 0) return InvalidArgumentError("relu: negative size");
    return Launch(static_cast<size_t>(n), ReluForwardFn{v}, "relu forward");
  }
  Status ReluBackward(const float* y, int64_t n, float* dv) override {
    if (n < 0) return InvalidArgumentError("relu: negative size");
    return Launch(static_cast<size_t>(n), ReluBackwardFn{y, dv}, "relu backward");
  }

  Status SoftmaxCrossEntropy(const float* logits, const uint8_t* labels, int batch, int classes,
                             float* dlogits, XentResult* out) override {
    SIEVE_RETURN_IF_ERROR(CheckLabels(labels, batch, classes));
    const size_t nb = static_cast<size_t>(batch);
    const size_t loss_bytes = AlignUp(nb * sizeof(double));
    const size_t hit_bytes = AlignUp(nb * sizeof(int32_t));
    StatusOr<char*> scratch = Reserve(loss_bytes + hit_bytes + nb);
    if (!scratch.ok()) return scratch.status();
    char* const base = *scratch;
    double* row_loss = reinterpret_cast<double*>(base);
    int32_t* row_hit = reinterpret_cast<int32_t*>(base + loss_bytes);
    uint8_t* dlabels = reinterpret_cast<uint8_t*>(base + loss_bytes + hit_bytes);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(dlabels, labels, nb, cudaMemcpyHostToDevice, stream_));
    SIEVE_RETURN_IF_ERROR(
        Launch(nb,
               SoftmaxXentRowFn{logits, dlabels, classes, 1.0f / static_cast<float>(batch), dlogits,
                                row_loss, row_hit},
               "softmax cross-entropy"));
    loss_host_.resize(nb);
    hit_host_.resize(nb);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(loss_host_.data(), row_loss, nb * sizeof(double),
                                   cudaMemcpyDeviceToHost, stream_));
    SIEVE_CUDA_TRY(cudaMemcpyAsync(hit_host_.data(), row_hit, nb * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, stream_));
    SIEVE_RETURN_IF_ERROR(Sync("softmax cross-entropy"));
    *out = ReduceXentRows(loss_host_.data(), hit_host_.data(), batch);
    return Status::Ok();
  }
  Status CountCorrect(const float* logits, const uint8_t* labels, int batch, int classes,
                      int64_t* correct) override {
    SIEVE_RETURN_IF_ERROR(CheckLabels(labels, batch, classes));
    const size_t nb = static_cast<size_t>(batch);
    const size_t hit_bytes = AlignUp(nb * sizeof(int32_t));
    StatusOr<char*> scratch = Reserve(hit_bytes + nb);
    if (!scratch.ok()) return scratch.status();
    char* const base = *scratch;
    int32_t* row_hit = reinterpret_cast<int32_t*>(base);
    uint8_t* dlabels = reinterpret_cast<uint8_t*>(base + hit_bytes);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(dlabels, labels, nb, cudaMemcpyHostToDevice, stream_));
    SIEVE_RETURN_IF_ERROR(
        Launch(nb, ArgMaxHitFn{logits, dlabels, classes, row_hit}, "arg-max accuracy"));
    hit_host_.resize(nb);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(hit_host_.data(), row_hit, nb * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, stream_));
    SIEVE_RETURN_IF_ERROR(Sync("arg-max accuracy"));
    *correct = ReduceXentRows(nullptr, hit_host_.data(), batch).correct;
    return Status::Ok();
  }

  Status Im2Col(const float* x, int batch, int h, int w, int c, int k, float* patches) override {
    SIEVE_RETURN_IF_ERROR(CheckConv(batch, h, w, c, k));
    const int64_t oh = h - k + 1, ow = w - k + 1;
    return LaunchItems(Im2ColFn{x, batch, h, w, c, k, oh, ow, patches}, "im2col");
  }
  Status Col2Im(const float* dpatches, int batch, int h, int w, int c, int k, float* dx) override {
    SIEVE_RETURN_IF_ERROR(CheckConv(batch, h, w, c, k));
    const int64_t oh = h - k + 1, ow = w - k + 1;
    return LaunchItems(Col2ImFn{dpatches, batch, h, w, c, k, oh, ow, dx}, "col2im");
  }

  Status MaxPool2x2Forward(const float* x, int batch, int h, int w, int c, float* y,
                           int32_t* argmax) override {
    SIEVE_RETURN_IF_ERROR(CheckPool(batch, h, w, c));
    return LaunchItems(MaxPoolForwardFn{x, batch, h, w, c, y, argmax}, "max-pool forward");
  }
  Status MaxPool2x2Backward(const float* dy, const int32_t* argmax, int batch, int h, int w, int c,
                            float* dx) override {
    SIEVE_RETURN_IF_ERROR(CheckPool(batch, h, w, c));
    const int64_t n = int64_t{batch} * h * w * c;
    if (n == 0) return Status::Ok();
    SIEVE_CUDA_TRY(cudaMemsetAsync(dx, 0, n * sizeof(float), stream_));
    return Launch(static_cast<size_t>(n / 4), MaxPoolBackwardFn{dy, argmax, dx},
                  "max-pool backward");
  }

  Status WeightDecayAdd(const float* w, size_t n, float wd, float* g) override {
    return Launch(n, WeightDecayFn{w, wd, g}, "weight decay");
  }

  Status GatherRows(const float* src, int64_t src_rows, int row_size, const int64_t* rows,
                    int count, float* dst) override {
    SIEVE_RETURN_IF_ERROR(CheckGather(src_rows, row_size, rows, count));
    if (count == 0 || row_size == 0) return Status::Ok();
    StatusOr<char*> scratch = Reserve(count * sizeof(int64_t));
    if (!scratch.ok()) return scratch.status();
    int64_t* drows = reinterpret_cast<int64_t*>(*scratch);
    SIEVE_CUDA_TRY(
        cudaMemcpyAsync(drows, rows, count * sizeof(int64_t), cudaMemcpyHostToDevice, stream_));
    SIEVE_RETURN_IF_ERROR(
        LaunchItems(GatherRowsFn{src, drows, count, row_size, dst}, "gather rows"));
    // The row indices may come from pageable memory: wait so that the caller may reuse them.
    return Sync("gather rows");
  }

  Status PoolNoiseGradient(const float* pool, uint64_t pool_size, uint64_t block,
                           const uint64_t* offsets, float scale, float pull, const float* w,
                           uint64_t d, float* grad) override {
    SIEVE_RETURN_IF_ERROR(CheckPoolNoise(pool_size, block, offsets, d));
    if (d == 0) return Status::Ok();
    const size_t blocks = static_cast<size_t>((d + block - 1) / block);
    StatusOr<char*> scratch = Reserve(blocks * sizeof(uint64_t));
    if (!scratch.ok()) return scratch.status();
    uint64_t* doffsets = reinterpret_cast<uint64_t*>(*scratch);
    SIEVE_CUDA_TRY(cudaMemcpyAsync(doffsets, offsets, blocks * sizeof(uint64_t),
                                   cudaMemcpyHostToDevice, stream_));
    SIEVE_RETURN_IF_ERROR(
        LaunchItems(PoolNoiseFn{pool, pool_size - 1, static_cast<uint64_t>(std::countr_zero(block)),
                                doffsets, scale, pull, w, d, grad},
                    "pool noise gradient"));
    // The offsets may come from pageable memory: wait so that the caller may reuse them.
    return Sync("pool noise gradient");
  }

  Status ScatterSet(const uint32_t* idx, const float* vals, size_t count, float* w,
                    size_t n) override {
    SIEVE_RETURN_IF_ERROR(CheckScatter(idx, count, n));
    if (count == 0) return Status::Ok();
    const size_t idx_bytes = AlignUp(count * sizeof(uint32_t));
    StatusOr<char*> scratch = Reserve(idx_bytes + count * sizeof(float));
    if (!scratch.ok()) return scratch.status();
    char* const base = *scratch;
    uint32_t* didx = reinterpret_cast<uint32_t*>(base);
    float* dvals = reinterpret_cast<float*>(base + idx_bytes);
    SIEVE_CUDA_TRY(
        cudaMemcpyAsync(didx, idx, count * sizeof(uint32_t), cudaMemcpyHostToDevice, stream_));
    SIEVE_CUDA_TRY(
        cudaMemcpyAsync(dvals, vals, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
    SIEVE_RETURN_IF_ERROR(Launch(count, ScatterSetFn{didx, dvals, w}, "scatter"));
    // The host inputs may come from pageable memory: wait so that the caller may reuse them.
    return Sync("scatter");
  }

 private:
  CudaNnOps() = default;

  template <typename Fn>
  Status Launch(size_t n, Fn fn, const char* what) {
    if (n == 0) return Status::Ok();
    ForEachKernel<<<Blocks(n), kThreads, 0, stream_>>>(n, fn);
    return CudaStatus(cudaGetLastError(), what);
  }

  // A functor of nn_functors.h over its items().
  template <typename Fn>
  Status LaunchItems(const Fn& fn, const char* what) {
    return Launch(fn.items(), fn, what);
  }

  Status Sync(const char* what) { return CudaStatus(cudaStreamSynchronize(stream_), what); }

  // `bytes` of device scratch, valid until the next Reserve (work already enqueued on the stream
  // keeps using the old block safely: growing waits for the stream before freeing it).
  StatusOr<char*> Reserve(size_t bytes) {
    if (bytes > arena_bytes_) {
      const size_t grow = std::max(bytes, arena_bytes_ + arena_bytes_ / 2);
      if (arena_ != nullptr) {
        SIEVE_RETURN_IF_ERROR(Sync("arena"));
        SIEVE_CUDA_TRY(cudaFree(arena_));
      }
      arena_ = nullptr;
      arena_bytes_ = 0;
      SIEVE_CUDA_TRY(cudaMalloc(&arena_, grow));
      arena_bytes_ = grow;
    }
    return static_cast<char*>(arena_);
  }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CublasLibrary> cublas_;  // declared before handle_: outlives it
  cublasHandle_t handle_ = nullptr;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<double> loss_host_;
  std::vector<int32_t> hit_host_;
};

}  // namespace

StatusOr<std::unique_ptr<NnOps>> NewCudaNnOps(BackendContext* ctx) {
  if (ctx->device() != Device::kCuda || ctx->native_stream() == nullptr) {
    return InvalidArgumentError("NnOps: not a CUDA context");
  }
  return CudaNnOps::Create(ctx);
}

}  // namespace nn_internal
}  // namespace sieve
