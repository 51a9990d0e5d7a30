// The CUDA Backend (see kernels/backend.h for the contract): Thrust's CUDA system for the plain
// element-wise passes and custom kernels where a fused single pass pays (count+collect, key
// histogram, moments, σ-histogram). Only explicit execution policies on raw pointers are used,
// never thrust::device or device_vector, so this object coexists with the CPU backend.
#include <cuda_runtime.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/transform.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_functors.h"

namespace sieve {
namespace backend_internal {
namespace {

constexpr int kThreads = 256;

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return InternalError(std::string("cuda: ") + what + ": " + cudaGetErrorString(err));
}
#define SIEVE_CUDA_TRY(expr) SIEVE_RETURN_IF_ERROR(CudaStatus((expr), #expr))

inline unsigned Blocks(size_t n, unsigned max_blocks = 2048) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(b, max_blocks)));
}

// Sums a double across the warp; lane 0 holds the result.
__device__ inline double WarpSum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// Moments (+ optional key histogram) in one pass; acc = {sum, sumsq}, nonfinite counter.
template <bool kHist>
__global__ void MomentsKernel(const float* x, size_t n, double* acc, unsigned long long* nonfinite,
                              unsigned long long* hist) {
  __shared__ unsigned int sh[kHist ? kKeyHistBins : 1];
  if (kHist) {
    for (unsigned b = threadIdx.x; b < kKeyHistBins; b += blockDim.x) sh[b] = 0;
    __syncthreads();
  }
  double s = 0.0, ss = 0.0;
  unsigned long long nf = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    const uint32_t key = AbsKey(v);
    if (key >= kNonFiniteKey) {
      ++nf;
      continue;
    }
    s += v;
    ss += static_cast<double>(v) * v;
    if (kHist) atomicAdd(&sh[key >> kKeyHistShift], 1u);
  }
  s = WarpSum(s);
  ss = WarpSum(ss);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc[0], s);
    atomicAdd(&acc[1], ss);
  }
  if (nf != 0) atomicAdd(nonfinite, nf);
  if (kHist) {
    __syncthreads();
    for (unsigned b = threadIdx.x; b < kKeyHistBins; b += blockDim.x) {
      if (sh[b] != 0) atomicAdd(&hist[b], static_cast<unsigned long long>(sh[b]));
    }
  }
}

// Fused count + collect (warp-aggregated atomics; output order is fixed up by a sort).
__global__ void CountCollectKernel(const float* x, size_t n, long long key_thr,
                                   unsigned long long cap, uint32_t* out,
                                   unsigned long long* counters, double* sumsq) {
  const unsigned lane = threadIdx.x & 31;
  double ss = 0.0;
  for (size_t base = blockIdx.x * size_t{blockDim.x}; base < n;
       base += size_t{gridDim.x} * blockDim.x) {
    const size_t i = base + threadIdx.x;
    bool sel = false;
    if (i < n) {
      const float v = x[i];
      const uint32_t key = AbsKey(v);
      if (key >= kNonFiniteKey) {
        atomicAdd(&counters[1], 1ull);
      } else {
        sel = static_cast<long long>(key) > key_thr;
        ss += static_cast<double>(v) * v;
      }
    }
    const unsigned mask = __ballot_sync(0xffffffffu, sel);
    if (mask == 0) continue;
    const int leader = __ffs(mask) - 1;
    unsigned long long pos0 = 0;
    if (static_cast<int>(lane) == leader) pos0 = atomicAdd(&counters[0], __popc(mask));
    pos0 = __shfl_sync(0xffffffffu, pos0, leader);
    if (sel) {
      const unsigned long long pos = pos0 + __popc(mask & ((1u << lane) - 1u));
      if (pos < cap) out[pos] = static_cast<uint32_t>(i);
    }
  }
  ss = WarpSum(ss);
  if (lane == 0) atomicAdd(sumsq, ss);
}

__global__ void SigmaHistKernel(const float* x, size_t n, double mean, double inv_w, int bins,
                                unsigned long long* counts) {
  extern __shared__ unsigned int shb[];
  for (int b = threadIdx.x; b < bins; b += blockDim.x) shb[b] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    if (AbsKey(v) >= kNonFiniteKey) continue;
    atomicAdd(&shb[SigmaBin(v, mean, inv_w, bins)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    if (shb[b] != 0) atomicAdd(&counts[b], static_cast<unsigned long long>(shb[b]));
  }
}

// RAII device scratch.
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  ~Scratch() {
    if (p_ != nullptr) cudaFree(p_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Status Init(size_t n) {
    SIEVE_CUDA_TRY(cudaMalloc(&p_, std::max<size_t>(1, n) * sizeof(T)));
    return CudaStatus(cudaMemset(p_, 0, std::max<size_t>(1, n) * sizeof(T)), "memset");
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

Status Sync(const char* what) {
  SIEVE_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), what));
  return CudaStatus(cudaDeviceSynchronize(), what);
}

template <bool kHist>
Status MomentsGpu(const float* x, size_t n, Moments* out, std::vector<uint64_t>* hist) {
  Scratch<double> acc;
  Scratch<unsigned long long> nf;
  Scratch<unsigned long long> h;
  SIEVE_RETURN_IF_ERROR(acc.Init(2));
  SIEVE_RETURN_IF_ERROR(nf.Init(1));
  SIEVE_RETURN_IF_ERROR(h.Init(kHist ? kKeyHistBins : 1));
  if (n != 0) {
    MomentsKernel<kHist>
        <<<Blocks(n, kHist ? 1024 : 4096), kThreads>>>(x, n, acc.get(), nf.get(), h.get());
  }
  double a[2];
  unsigned long long bad = 0;
  SIEVE_CUDA_TRY(cudaMemcpy(a, acc.get(), sizeof(a), cudaMemcpyDeviceToHost));
  SIEVE_CUDA_TRY(cudaMemcpy(&bad, nf.get(), sizeof(bad), cudaMemcpyDeviceToHost));
  *out = Moments{a[0], a[1], bad};
  if (kHist) {
    hist->resize(kKeyHistBins);
    SIEVE_CUDA_TRY(
        cudaMemcpy(hist->data(), h.get(), kKeyHistBins * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  }
  return Sync("moments");
}

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::kCuda; }

  StatusOr<float*> Alloc(size_t n) override {
    float* p = nullptr;
    SIEVE_CUDA_TRY(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(float)));
    SIEVE_CUDA_TRY(cudaMemset(p, 0, std::max<size_t>(1, n) * sizeof(float)));
    return p;
  }
  void Free(float* p) override {
    if (p != nullptr) cudaFree(p);
  }
  Status ToHost(const float* src, size_t n, float* dst) override {
    return CudaStatus(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost), "to host");
  }
  Status FromHost(const float* src, size_t n, float* dst) override {
    return CudaStatus(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice), "from host");
  }
  Status Zero(float* p, size_t n) override {
    return CudaStatus(cudaMemset(p, 0, n * sizeof(float)), "memset");
  }

  Status MomentumAccumulate(float* m, float* r, const float* g, size_t n, float mu,
                            float lr) override {
    thrust::for_each(thrust::cuda::par, thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(n), MomentumFn{m, r, g, mu, lr});
    return Sync("momentum");
  }

  Status ComputeMoments(const float* x, size_t n, Moments* out) override {
    return MomentsGpu<false>(x, n, out, nullptr);
  }

  Status KeyHistogram(const float* x, size_t n, std::vector<uint64_t>* hist,
                      Moments* out) override {
    return MomentsGpu<true>(x, n, out, hist);
  }

  Status CountCollect(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                      std::vector<uint32_t>* idx, uint64_t* count, uint64_t* nonfinite,
                      double* sumsq) override {
    cap = std::min<uint64_t>(cap, n);
    Scratch<uint32_t> out;
    Scratch<unsigned long long> counters;
    Scratch<double> ss;
    SIEVE_RETURN_IF_ERROR(out.Init(cap));
    SIEVE_RETURN_IF_ERROR(counters.Init(2));
    SIEVE_RETURN_IF_ERROR(ss.Init(1));
    if (n != 0) {
      CountCollectKernel<<<Blocks(n, 4096), kThreads>>>(x, n, key_thr, cap, out.get(),
                                                        counters.get(), ss.get());
    }
    unsigned long long c[2];
    SIEVE_CUDA_TRY(cudaMemcpy(c, counters.get(), sizeof(c), cudaMemcpyDeviceToHost));
    double total_ss = 0.0;
    SIEVE_CUDA_TRY(cudaMemcpy(&total_ss, ss.get(), sizeof(double), cudaMemcpyDeviceToHost));
    if (sumsq != nullptr) *sumsq = total_ss;
    *count = c[0];
    *nonfinite = c[1];
    if (c[0] <= cap && c[1] == 0) {
      thrust::sort(thrust::cuda::par, out.get(), out.get() + c[0]);
      idx->resize(c[0]);
      SIEVE_CUDA_TRY(
          cudaMemcpy(idx->data(), out.get(), c[0] * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    }
    return Sync("count-collect");
  }

  Status StridedSampleAbs(const float* x, size_t n, size_t start, size_t stride,
                          std::vector<float>* out) override {
    const size_t m = start < n ? (n - start + stride - 1) / stride : 0;
    out->resize(m);
    Scratch<float> tmp;
    SIEVE_RETURN_IF_ERROR(tmp.Init(m));
    thrust::transform(thrust::cuda::par, thrust::counting_iterator<size_t>(0),
                      thrust::counting_iterator<size_t>(m), tmp.get(), SampleFn{x, start, stride});
    SIEVE_CUDA_TRY(cudaMemcpy(out->data(), tmp.get(), m * sizeof(float), cudaMemcpyDeviceToHost));
    return Sync("sample");
  }

  Status GatherMask(const float* x, const uint32_t* idx, size_t count, float* vals, float* mask_a,
                    float* mask_b) override {
    if (count == 0) return Status::Ok();
    Scratch<uint32_t> didx;
    Scratch<float> dvals;
    SIEVE_RETURN_IF_ERROR(didx.Init(count));
    SIEVE_RETURN_IF_ERROR(dvals.Init(count));
    SIEVE_CUDA_TRY(cudaMemcpy(didx.get(), idx, count * sizeof(uint32_t), cudaMemcpyHostToDevice));
    thrust::for_each(thrust::cuda::par, thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(count),
                     GatherMaskFn{x, didx.get(), dvals.get(), mask_a, mask_b});
    SIEVE_CUDA_TRY(cudaMemcpy(vals, dvals.get(), count * sizeof(float), cudaMemcpyDeviceToHost));
    return Sync("gather");
  }

  Status SigmaHistogram(const float* x, size_t n, double mean, double sigma, double width, int bins,
                        std::vector<uint64_t>* counts) override {
    const double inv_w = 1.0 / (sigma * width);
    counts->assign(bins, 0);
    Scratch<unsigned long long> dc;
    SIEVE_RETURN_IF_ERROR(dc.Init(bins));
    if (n != 0) {
      SigmaHistKernel<<<Blocks(n, 1024), kThreads, bins * sizeof(unsigned)>>>(x, n, mean, inv_w,
                                                                              bins, dc.get());
    }
    SIEVE_CUDA_TRY(
        cudaMemcpy(counts->data(), dc.get(), bins * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    return Sync("sigma histogram");
  }
};

}  // namespace
}  // namespace backend_internal

namespace cuda {
Backend* Instance() {
  static backend_internal::CudaBackend* const instance = new backend_internal::CudaBackend();
  return instance;
}

int VisibleDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace cuda
}  // namespace sieve
