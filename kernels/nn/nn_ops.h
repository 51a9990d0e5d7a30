// NnOps: the model math of a worker (dense layers, convolutions as GEMM, ReLU, max-pool, softmax
// cross-entropy, weight decay, the scatter of an UPDATE into the weights) as a backend of
// kernels/. GEMM goes to OpenBLAS sgemm on the CPU and to cuBLAS on CUDA; every other op is one
// shared functor (kernels/nn/nn_functors.h) compiled by g++ (Thrust OMP system) and by nvcc
// (grid-stride kernels).
//
// Memory: pointers named `*_dev` are in the backend's memory (host RAM for the CPU, GPU global
// memory for CUDA); `*_host` ones are host memory. Float buffers come from the context()
// (Alloc / Free / FromHost / ToHost); int32 buffers (max-pool arg-max) from AllocInt32 here.
// The caller owns every buffer; no op keeps a pointer after it returns. Unless stated otherwise,
// inputs and outputs must not overlap.
// Layouts: row-major, batch-major. A matrix "r x c" has element (i, j) at i·c + j. Images are NHWC
// (batch x h x w x c). Sizes are element counts; int arguments must be ≥ 0.
// Ordering: an NnOps enqueues its work on its context (on CUDA: the context's stream), in call
// order with that context's own calls. Ops that return a host result (SoftmaxCrossEntropy,
// CountCorrect, ToHostInt32) return with it complete; the others may return with the work still
// running on the stream (use the context's Synchronize() or ToHost); ops that read `*_host`
// inputs let the caller reuse them on return.
// Errors: a bad argument is InvalidArgument/OutOfRange; every CUDA or cuBLAS failure is a Status
// carrying the library's message; nothing aborts. A failure of asynchronous work is reported by
// the next call that waits.
// Thread-safety: like its context — one thread at a time; distinct NnOps on distinct contexts are
// independent.
#ifndef SIEVE_KERNELS_NN_NN_OPS_H_
#define SIEVE_KERNELS_NN_NN_OPS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "kernels/backend.h"
#include "kernels/device.h"

namespace sieve {

// The loss and accuracy of a batch.
struct XentResult {
  float loss = 0.0f;    // mean over the batch of −log softmax(z)[label] (natural log)
  int64_t correct = 0;  // rows whose arg-max logit (lowest index on ties) equals the label
};

class NnOps {
 public:
  // Ops for ctx's device, enqueued on ctx. ctx must outlive the NnOps. CUDA: creates a cuBLAS
  // handle bound to ctx's stream.
  static StatusOr<std::unique_ptr<NnOps>> Create(BackendContext* ctx);
  // Ops on a fresh context of their own (GetBackend(device)->NewContext()), for users outside
  // kernels/: float buffers through context(). FailedPrecondition for an unavailable device.
  static StatusOr<std::unique_ptr<NnOps>> Create(Device device);

  virtual ~NnOps() = default;
  virtual Device device() const = 0;
  // The context the ops run on (owned by this NnOps only when made by Create(Device)).
  BackendContext* context() const { return ctx_; }

  // int32 buffers in backend memory (zero-initialized); FreeInt32 accepts nullptr and waits for
  // work on the context to finish first.
  virtual StatusOr<int32_t*> AllocInt32(size_t n) = 0;
  virtual void FreeInt32(int32_t* p_dev) = 0;
  virtual Status ToHostInt32(const int32_t* src_dev, size_t n, int32_t* dst_host) = 0;

  // c = alpha·op(a)·op(b) + beta·c, all row-major and dense: op(a) is m x k (a is k x m when
  // trans_a), op(b) is k x n (b is n x k when trans_b), c is m x n. beta = 0 ignores c's content.
  virtual Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const float* a_dev, const float* b_dev, float beta, float* c_dev) = 0;

  // y[r][j] = bias[j] (BiasFill) or y[r][j] += bias[j] (BiasAdd); y is rows x cols.
  virtual Status BiasFill(const float* bias_dev, int64_t rows, int cols, float* y_dev) = 0;
  virtual Status BiasAdd(const float* bias_dev, int64_t rows, int cols, float* y_dev) = 0;
  // dbias[j] = Σ_r dy[r][j], summed in row order (overwrites dbias).
  virtual Status BiasGrad(const float* dy_dev, int64_t rows, int cols, float* dbias_dev) = 0;

  // In place: v[i] = max(v[i], 0) (NaN → 0).
  virtual Status ReluForward(float* v_dev, int64_t n) = 0;
  // Given the forward *output* y: dv[i] = 0 wherever y[i] ≤ 0, else unchanged.
  virtual Status ReluBackward(const float* y_dev, int64_t n, float* dv_dev) = 0;

  // Softmax cross-entropy of logits (batch x classes) against labels_host (batch bytes, each
  // < classes, else InvalidArgument and no output). Per row in double with the max subtracted;
  // the mean over rows is summed in row order on the host. When dlogits_dev is non-null it is
  // overwritten with d(mean loss)/d(logits) = (softmax − onehot) / batch. batch ≥ 1.
  virtual Status SoftmaxCrossEntropy(const float* logits_dev, const uint8_t* labels_host, int batch,
                                     int classes, float* dlogits_dev, XentResult* out) = 0;
  // The arg-max accuracy alone: *correct = #rows whose arg-max equals the label.
  virtual Status CountCorrect(const float* logits_dev, const uint8_t* labels_host, int batch,
                              int classes, int64_t* correct) = 0;

  // k x k, stride-1, "valid" patches of NHWC x: patches is (batch·oh·ow) x (k·k·c), columns
  // ordered (ky, kx, channel), oh = h − k + 1, ow = w − k + 1 (Im2ColFn in nn_functors.h).
  virtual Status Im2Col(const float* x_dev, int batch, int h, int w, int c, int k,
                        float* patches_dev) = 0;
  // The adjoint: overwrites dx (batch x h x w x c) with the sum of the patch gradients at each
  // source position (a gather, no atomics: deterministic).
  virtual Status Col2Im(const float* dpatches_dev, int batch, int h, int w, int c, int k,
                        float* dx_dev) = 0;

  // 2x2, stride-2 max pool of NHWC x (h, w even; batch·h·w·c < 2^31): y is batch x h/2 x w/2 x c,
  // argmax[j] the flat index into x of y[j]'s maximum (first on ties, in (dy, dx) order).
  virtual Status MaxPool2x2Forward(const float* x_dev, int batch, int h, int w, int c, float* y_dev,
                                   int32_t* argmax_dev) = 0;
  // Overwrites dx (batch x h x w x c) with dy routed to the arg-max positions, zeros elsewhere.
  virtual Status MaxPool2x2Backward(const float* dy_dev, const int32_t* argmax_dev, int batch,
                                    int h, int w, int c, float* dx_dev) = 0;

  // g[i] += wd·w[i] (one rounding per multiply and add).
  virtual Status WeightDecayAdd(const float* w_dev, size_t n, float wd, float* g_dev) = 0;

  // The mini-batch gather: row j of dst = row rows_host[j] of src (row_size floats each), j <
  // count. src has src_rows rows; an index outside [0, src_rows) is OutOfRange and dst is
  // unchanged. rows_host may be reused on return.
  virtual Status GatherRows(const float* src_dev, int64_t src_rows, int row_size,
                            const int64_t* rows_host, int count, float* dst_dev) = 0;

  // The synthetic model's gradient with pool noise (worker/trainer/synthetic_gradient.h), in
  // device memory: grad[i] = scale·pool[(offsets[i / block] + i mod block) mod pool_size] +
  // pull·w[i] (no pull term when w_dev is null), i < d. pool_size and block are powers of two,
  // block ≥ 64 and ≤ pool_size; offsets_host has ceil(d / block) entries, each < pool_size
  // (InvalidArgument otherwise). One rounding per multiply and add, as the host version.
  virtual Status PoolNoiseGradient(const float* pool_dev, uint64_t pool_size, uint64_t block,
                                   const uint64_t* offsets_host, float scale, float pull,
                                   const float* w_dev, uint64_t d, float* grad_dev) = 0;

  // The scatter of an UPDATE into the weights: w[idx[j]] = vals[j] for j < count. Indices must be
  // < n (else OutOfRange and w is unchanged) and distinct.
  virtual Status ScatterSet(const uint32_t* idx_host, const float* vals_host, size_t count,
                            float* w_dev, size_t n) = 0;

 private:
  BackendContext* ctx_ = nullptr;
  // Declared last of the base's state: destroyed after the implementation has released its work.
  std::unique_ptr<BackendContext> owned_ctx_;
};

namespace nn_internal {
StatusOr<std::unique_ptr<NnOps>> NewCpuNnOps(BackendContext* ctx);
StatusOr<std::unique_ptr<NnOps>> NewCudaNnOps(BackendContext* ctx);
// Validation shared by both implementations (pure; Ok or InvalidArgument/OutOfRange).
Status CheckGemm(int m, int n, int k);
// The row-major leading dimensions of Gemm's a and b (at least 1, as BLAS requires).
struct GemmLd {
  int a;
  int b;
};
GemmLd GemmLeadingDims(bool trans_a, bool trans_b, int m, int n, int k);
Status CheckLabels(const uint8_t* labels_host, int batch, int classes);
Status CheckConv(int batch, int h, int w, int c, int k);
Status CheckPool(int batch, int h, int w, int c);
Status CheckScatter(const uint32_t* idx_host, size_t count, size_t n);
Status CheckGather(int64_t src_rows, int row_size, const int64_t* rows_host, int count);
Status CheckPoolNoise(uint64_t pool_size, uint64_t block, const uint64_t* offsets_host, uint64_t d);
// The host-side reduction of the per-row results, in row order (row_loss may be null: loss 0).
XentResult ReduceXentRows(const double* row_loss_host, const int32_t* row_hit_host, int batch);
}  // namespace nn_internal

}  // namespace sieve

#endif  // SIEVE_KERNELS_NN_NN_OPS_H_
