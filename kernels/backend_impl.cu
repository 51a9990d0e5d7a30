// Implementation of the Backend primitives (see kernels/backend.h for the contract). This one
// source is compiled twice: by g++ through a generated wrapper with SIEVE_KERNEL_NS=cpu (Thrust
// OMP system; hand-written OpenMP twins of the custom kernels) and by nvcc with
// SIEVE_KERNEL_NS=cuda (Thrust CUDA system; custom CUDA kernels where a fused single pass pays:
// count+collect, key histogram, moments). Only explicit execution policies on raw pointers are
// used, never thrust::device / device_vector, so both instantiations coexist in one binary.
#ifndef SIEVE_KERNEL_NS
#error "SIEVE_KERNEL_NS must be defined (cpu or cuda)"
#endif

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/backend.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#include <thrust/sort.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/transform_reduce.h>
#define SIEVE_HD __host__ __device__
#else
#include <omp.h>
#include <thrust/system/omp/execution_policy.h>
#define SIEVE_HD
#endif

namespace sieve::SIEVE_KERNEL_NS {
namespace {

#if defined(__CUDACC__)
inline auto Policy() { return thrust::cuda::par; }
#else
inline auto Policy() { return thrust::omp::par; }
#endif

SIEVE_HD inline uint32_t AbsKey(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x) & 0x7fffffffu;
#else
  return std::bit_cast<uint32_t>(x) & 0x7fffffffu;
#endif
}

// Multiply and add with one rounding each (no FMA contraction), so that both backends produce
// bit-identical error-feedback state and the EF invariant can be checked exactly.
SIEVE_HD inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SIEVE_HD inline float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

struct MomentumFn {
  float* m;
  float* r;
  const float* g;
  float mu;
  float lr;
  SIEVE_HD void operator()(size_t i) const {
    const float mi = AddRn(MulRn(mu, m[i]), g[i]);
    m[i] = mi;
    r[i] = AddRn(r[i], MulRn(lr, mi));
  }
};

struct SampleFn {
  const float* x;
  size_t start;
  size_t stride;
  SIEVE_HD float operator()(size_t j) const { return fabsf(x[start + j * stride]); }
};

struct GatherMaskFn {
  const float* x;
  const uint32_t* idx;
  float* vals;
  float* mask_a;
  float* mask_b;
  SIEVE_HD void operator()(size_t j) const {
    const uint32_t i = idx[j];
    vals[j] = x[i];
    if (mask_a != nullptr) mask_a[i] = 0.0f;
    if (mask_b != nullptr) mask_b[i] = 0.0f;
  }
};

SIEVE_HD inline int SigmaBin(float x, double mean, double inv_width_sigma, int bins) {
  const double z = (static_cast<double>(x) - mean) * inv_width_sigma + 0.5 * bins;
  if (!(z >= 0.0)) return 0;
  if (z >= bins) return bins - 1;
  return static_cast<int>(z);
}

#if defined(__CUDACC__)
// ------------------------------------------------------------------------------ CUDA kernels
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

#else
// ------------------------------------------------------------------- CPU (OpenMP) twins
constexpr size_t kBlock = 512;
// Count+collect tests the max |x| of blocks this small, so that at small densities few blocks
// (1 − (1 − ρ)^64 ≈ 6 % at ρ = 0.001) need the exact scalar scan.
constexpr size_t kScanBlock = 64;

// Whether any key AbsKey(x[i]), i < n, exceeds t (a signed compare: keys are < 2^31, and it
// vectorizes with plain SSE2); with kSumSq also the float Σx² into *ss. Non-finite keys are
// above every t < kNonFiniteKey, so a block holding one always reports a hit.
template <bool kSumSq>
inline bool BlockAbove(const float* x, size_t n, int32_t t, float* ss) {
  int hit = 0;
  float s = 0.0f;
#pragma omp simd reduction(| : hit) reduction(+ : s)
  for (size_t i = 0; i < n; ++i) {
    hit |= static_cast<int32_t>(AbsKey(x[i])) > t;
    if constexpr (kSumSq) s += x[i] * x[i];
  }
  if constexpr (kSumSq) *ss = s;
  return hit != 0;
}

// Contiguous per-thread ranges [lo, hi) keep outputs in index order without a sort.
inline void ThreadRange(size_t n, int t, int nt, size_t* lo, size_t* hi) {
  const size_t per = n / nt, rem = n % nt;
  *lo = t * per + std::min<size_t>(t, rem);
  *hi = *lo + per + (static_cast<size_t>(t) < rem ? 1 : 0);
}

template <bool kHist>
void MomentsCpu(const float* x, size_t n, Moments* out, std::vector<uint64_t>* hist) {
  const int nt = omp_get_max_threads();
  std::vector<Moments> part(nt);
  std::vector<std::vector<uint64_t>> hparts(kHist ? nt : 0);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    size_t lo, hi;
    ThreadRange(n, t, nt, &lo, &hi);
    double s = 0.0, ss = 0.0;
    uint64_t nf = 0;
    std::vector<uint32_t> h(kHist ? kKeyHistBins : 0, 0);
    for (size_t b = lo; b < hi; b += kBlock) {
      const size_t e = std::min(hi, b + kBlock);
      // Plain float sums vectorize; a non-finite entry (or a float overflow) makes one of them
      // non-finite, which sends the block to the exact double scan that also counts the bad ones.
      float fs = 0.0f, fss = 0.0f;
#pragma omp simd reduction(+ : fs, fss)
      for (size_t i = b; i < e; ++i) {
        fs += x[i];
        fss += x[i] * x[i];
      }
      uint64_t bad = 0;
      if (!std::isfinite(fs) || !std::isfinite(fss)) {
        double ds = 0.0, dss = 0.0;
        for (size_t i = b; i < e; ++i) {
          if (AbsKey(x[i]) >= kNonFiniteKey) {
            ++bad;
            continue;
          }
          ds += x[i];
          dss += static_cast<double>(x[i]) * x[i];
        }
        s += ds;
        ss += dss;
      } else {
        s += fs;
        ss += fss;
      }
      nf += bad;
      if constexpr (kHist) {
        for (size_t i = b; i < e; ++i) {
          const uint32_t key = AbsKey(x[i]);
          if (key < kNonFiniteKey) ++h[key >> kKeyHistShift];
        }
      }
    }
    part[t] = Moments{s, ss, nf};
    if constexpr (kHist) hparts[t].assign(h.begin(), h.end());
  }
  Moments m;
  for (const Moments& p : part) {
    m.sum += p.sum;
    m.sumsq += p.sumsq;
    m.nonfinite += p.nonfinite;
  }
  *out = m;
  if constexpr (kHist) {
    hist->assign(kKeyHistBins, 0);
    for (const auto& hp : hparts) {
      for (size_t b = 0; b < kKeyHistBins; ++b) (*hist)[b] += hp[b];
    }
  }
}
#endif

class BackendImpl final : public Backend {
 public:
#if defined(__CUDACC__)
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
#else
  Device device() const override { return Device::kCpu; }

  StatusOr<float*> Alloc(size_t n) override {
    float* p = new (std::nothrow) float[std::max<size_t>(1, n)]();
    if (p == nullptr)
      return InternalError("out of host memory for " + std::to_string(n) + " floats");
    return p;
  }
  void Free(float* p) override { delete[] p; }
  Status ToHost(const float* src, size_t n, float* dst) override {
    if (n != 0) std::memcpy(dst, src, n * sizeof(float));
    return Status::Ok();
  }
  Status FromHost(const float* src, size_t n, float* dst) override {
    if (n != 0) std::memcpy(dst, src, n * sizeof(float));
    return Status::Ok();
  }
  Status Zero(float* p, size_t n) override {
    if (n != 0) std::memset(p, 0, n * sizeof(float));
    return Status::Ok();
  }
#endif

  Status MomentumAccumulate(float* m, float* r, const float* g, size_t n, float mu,
                            float lr) override {
    thrust::for_each(Policy(), thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(n), MomentumFn{m, r, g, mu, lr});
    return Sync("momentum");
  }

  Status ComputeMoments(const float* x, size_t n, Moments* out) override {
#if defined(__CUDACC__)
    return MomentsGpu<false>(x, n, out, nullptr);
#else
    MomentsCpu<false>(x, n, out, nullptr);
    return Status::Ok();
#endif
  }

  Status KeyHistogram(const float* x, size_t n, std::vector<uint64_t>* hist,
                      Moments* out) override {
#if defined(__CUDACC__)
    return MomentsGpu<true>(x, n, out, hist);
#else
    MomentsCpu<true>(x, n, out, hist);
    return Status::Ok();
#endif
  }

  Status CountCollect(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                      std::vector<uint32_t>* idx, uint64_t* count, uint64_t* nonfinite,
                      double* sumsq) override {
    cap = std::min<uint64_t>(cap, n);
#if defined(__CUDACC__)
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
#else
    const int nt = omp_get_max_threads();
    std::vector<std::vector<uint32_t>> local(nt);
    std::vector<uint64_t> cnt(nt, 0), bad(nt, 0);
    std::vector<double> sq(nt, 0.0);
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num();
      size_t lo, hi;
      ThreadRange(n, t, nt, &lo, &hi);
      uint64_t c = 0, nf = 0;
      double s2 = 0.0;
      std::vector<uint32_t>& v = local[t];
      // Scans [i0, i1) exactly: counts non-finite entries, collects keys above key_thr.
      auto scan = [&](size_t i0, size_t i1) {
        for (size_t i = i0; i < i1; ++i) {
          const uint32_t key = AbsKey(x[i]);
          if (key >= kNonFiniteKey) {
            ++nf;
          } else if (static_cast<int64_t>(key) > key_thr) {
            if (c < cap) v.push_back(static_cast<uint32_t>(i));
            ++c;
          }
        }
      };
      // Blocks with no key above t are skipped after the vector test; the others are scanned
      // exactly. At small densities few blocks hold a selected entry.
      const int32_t t_block = static_cast<int32_t>(std::min<int64_t>(key_thr, kNonFiniteKey - 1));
      for (size_t b = lo; b < hi; b += kScanBlock) {
        const size_t e = std::min(hi, b + kScanBlock);
        const size_t len = e - b;
        bool hit;
        if (sumsq == nullptr) {
          hit = len == kScanBlock ? BlockAbove<false>(x + b, kScanBlock, t_block, nullptr)
                                  : BlockAbove<false>(x + b, len, t_block, nullptr);
        } else {
          float fss = 0.0f;
          hit = len == kScanBlock ? BlockAbove<true>(x + b, kScanBlock, t_block, &fss)
                                  : BlockAbove<true>(x + b, len, t_block, &fss);
          if (std::isfinite(fss)) {
            s2 += fss;
          } else {  // float overflow (or non-finite input): redo in double
            for (size_t i = b; i < e; ++i) {
              if (AbsKey(x[i]) < kNonFiniteKey) s2 += static_cast<double>(x[i]) * x[i];
            }
          }
        }
        if (hit) scan(b, e);
      }
      cnt[t] = c;
      bad[t] = nf;
      sq[t] = s2;
    }
    uint64_t total = 0, nf = 0;
    double total_ss = 0.0;
    for (int t = 0; t < nt; ++t) {
      total += cnt[t];
      nf += bad[t];
      total_ss += sq[t];
    }
    if (sumsq != nullptr) *sumsq = total_ss;
    *count = total;
    *nonfinite = nf;
    if (total <= cap && nf == 0) {
      idx->clear();
      idx->reserve(total);
      for (const auto& v : local) idx->insert(idx->end(), v.begin(), v.end());
    }
    return Status::Ok();
#endif
  }

  Status StridedSampleAbs(const float* x, size_t n, size_t start, size_t stride,
                          std::vector<float>* out) override {
    const size_t m = start < n ? (n - start + stride - 1) / stride : 0;
    out->resize(m);
#if defined(__CUDACC__)
    Scratch<float> tmp;
    SIEVE_RETURN_IF_ERROR(tmp.Init(m));
    thrust::transform(Policy(), thrust::counting_iterator<size_t>(0),
                      thrust::counting_iterator<size_t>(m), tmp.get(), SampleFn{x, start, stride});
    SIEVE_CUDA_TRY(cudaMemcpy(out->data(), tmp.get(), m * sizeof(float), cudaMemcpyDeviceToHost));
#else
    thrust::transform(Policy(), thrust::counting_iterator<size_t>(0),
                      thrust::counting_iterator<size_t>(m), out->data(),
                      SampleFn{x, start, stride});
#endif
    return Sync("sample");
  }

  Status GatherMask(const float* x, const uint32_t* idx, size_t count, float* vals, float* mask_a,
                    float* mask_b) override {
    if (count == 0) return Status::Ok();
#if defined(__CUDACC__)
    Scratch<uint32_t> didx;
    Scratch<float> dvals;
    SIEVE_RETURN_IF_ERROR(didx.Init(count));
    SIEVE_RETURN_IF_ERROR(dvals.Init(count));
    SIEVE_CUDA_TRY(cudaMemcpy(didx.get(), idx, count * sizeof(uint32_t), cudaMemcpyHostToDevice));
    thrust::for_each(Policy(), thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(count),
                     GatherMaskFn{x, didx.get(), dvals.get(), mask_a, mask_b});
    SIEVE_CUDA_TRY(cudaMemcpy(vals, dvals.get(), count * sizeof(float), cudaMemcpyDeviceToHost));
#else
    thrust::for_each(Policy(), thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(count),
                     GatherMaskFn{x, idx, vals, mask_a, mask_b});
#endif
    return Sync("gather");
  }

  Status SigmaHistogram(const float* x, size_t n, double mean, double sigma, double width, int bins,
                        std::vector<uint64_t>* counts) override {
    const double inv_w = 1.0 / (sigma * width);
    counts->assign(bins, 0);
#if defined(__CUDACC__)
    Scratch<unsigned long long> dc;
    SIEVE_RETURN_IF_ERROR(dc.Init(bins));
    if (n != 0) {
      SigmaHistKernel<<<Blocks(n, 1024), kThreads, bins * sizeof(unsigned)>>>(x, n, mean, inv_w,
                                                                              bins, dc.get());
    }
    SIEVE_CUDA_TRY(
        cudaMemcpy(counts->data(), dc.get(), bins * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    return Sync("sigma histogram");
#else
    const int nt = omp_get_max_threads();
    std::vector<std::vector<uint64_t>> parts(nt, std::vector<uint64_t>(bins, 0));
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num();
      size_t lo, hi;
      ThreadRange(n, t, nt, &lo, &hi);
      std::vector<uint64_t>& h = parts[t];
      for (size_t i = lo; i < hi; ++i) {
        if (AbsKey(x[i]) >= kNonFiniteKey) continue;
        ++h[SigmaBin(x[i], mean, inv_w, bins)];
      }
    }
    for (const auto& h : parts) {
      for (int b = 0; b < bins; ++b) (*counts)[b] += h[b];
    }
    return Status::Ok();
#endif
  }

 private:
#if defined(__CUDACC__)
  static Status Sync(const char* what) {
    SIEVE_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), what));
    return CudaStatus(cudaDeviceSynchronize(), what);
  }

  template <bool kHist>
  static Status MomentsGpu(const float* x, size_t n, Moments* out, std::vector<uint64_t>* hist) {
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
      SIEVE_CUDA_TRY(cudaMemcpy(hist->data(), h.get(), kKeyHistBins * sizeof(uint64_t),
                                cudaMemcpyDeviceToHost));
    }
    return Sync("moments");
  }
#else
  static Status Sync(const char*) { return Status::Ok(); }
#endif
};

}  // namespace

Backend* Instance() {
  static BackendImpl* const instance = new BackendImpl();
  return instance;
}

#if defined(__CUDACC__)
int VisibleDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}
#endif

}  // namespace sieve::SIEVE_KERNEL_NS
