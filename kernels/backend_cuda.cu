// The CUDA Backend (see kernels/backend.h for the contract): custom kernels for the fused passes
// (count+collect, key histogram, moments, σ-histogram), grid-stride kernels over the shared
// functors for the element-wise ones and CUB's radix sort. Every launch, copy and memset goes to
// the context's stream; the host waits (cudaStreamSynchronize) only where it reads a result.
// Scratch comes from a grow-only device arena and a grow-only pinned host buffer per context, so
// steady-state calls allocate nothing. No Thrust (it reports errors by exceptions and allocates
// its own temporaries); every CUDA error becomes a Status.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_functors.h"
#include "kernels/cuda_status.h"

namespace sieve {
namespace backend_internal {
namespace {

constexpr int kThreads = 256;

inline unsigned Blocks(size_t n, unsigned max_blocks = 2048) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(b, max_blocks)));
}

// fn(i) for every i < n (grid-stride).
template <typename Fn>
__global__ void ForEachKernel(size_t n, Fn fn) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    fn(i);
  }
}

// out[j] = fn(j) for every j < n (grid-stride).
template <typename Fn>
__global__ void TransformKernel(size_t n, Fn fn, float* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < n;
       j += size_t{gridDim.x} * blockDim.x) {
    out[j] = fn(j);
  }
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

// Byte offsets of the pieces of one call's scratch (each 256-byte aligned).
class Layout {
 public:
  size_t Add(size_t bytes) {
    const size_t off = bytes_;
    bytes_ = (off + std::max<size_t>(bytes, 1) + 255) & ~size_t{255};
    return off;
  }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

// One stream, a grow-only device arena and a grow-only pinned host staging buffer. Growing frees
// the old block (cudaFree / cudaFreeHost wait for the device), so pieces of one call are taken
// from a single Reserve, never across two.
class CudaContext final : public BackendContext {
 public:
  static StatusOr<std::unique_ptr<BackendContext>> Create() {
    auto ctx = std::unique_ptr<CudaContext>(new CudaContext());
    SIEVE_CUDA_TRY(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
    return std::unique_ptr<BackendContext>(std::move(ctx));
  }
  void* native_stream() const override { return stream_; }
  ~CudaContext() override {
    // Nothing to report errors to here; an earlier call has reported any failure of the stream.
    if (stream_ != nullptr) static_cast<void>(cudaStreamSynchronize(stream_));
    if (arena_ != nullptr) static_cast<void>(cudaFree(arena_));
    if (pinned_ != nullptr) static_cast<void>(cudaFreeHost(pinned_));
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  Device device() const override { return Device::kCuda; }
  Status Synchronize() override { return Wait("synchronize"); }

  StatusOr<float*> Alloc(size_t n) override {
    float* p = nullptr;
    SIEVE_CUDA_TRY(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(float)));
    const Status st = [&]() -> Status {
      SIEVE_CUDA_TRY(cudaMemsetAsync(p, 0, std::max<size_t>(1, n) * sizeof(float), stream_));
      return Wait("alloc");
    }();
    if (!st.ok()) {
      static_cast<void>(cudaFree(p));
      return st;
    }
    return p;
  }
  void Free(float* p) override {
    if (p != nullptr) static_cast<void>(cudaFree(p));
  }
  Status ToHost(const float* src, size_t n, float* dst) override {
    if (n != 0) {
      SIEVE_CUDA_TRY(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
    return Wait("to host");
  }
  Status FromHost(const float* src, size_t n, float* dst) override {
    if (n != 0) {
      SIEVE_CUDA_TRY(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
    return Wait("from host");  // src may be pinned memory: the copy must end before it is reused
  }
  Status Zero(float* p, size_t n) override {
    if (n == 0) return Status::Ok();
    return CudaStatus(cudaMemsetAsync(p, 0, n * sizeof(float), stream_), "memset");
  }

  Status MomentumAccumulate(float* m, float* r, const float* g, size_t n, float mu,
                            float lr) override {
    if (n == 0) return Status::Ok();
    ForEachKernel<<<Blocks(n, 4096), kThreads, 0, stream_>>>(n, MomentumFn{m, r, g, mu, lr});
    return CudaStatus(cudaGetLastError(), "momentum");
  }
  Status MomentumAccumulateFromHost(float* m, float* r, const float* g, size_t n, float mu,
                                    float lr) override {
    StatusOr<void*> g_dev = Reserve(n * sizeof(float));
    if (!g_dev.ok()) return g_dev.status();
    float* staged = static_cast<float*>(*g_dev);
    SIEVE_RETURN_IF_ERROR(FromHost(g, n, staged));
    return MomentumAccumulate(m, r, staged, n, mu, lr);
  }

  Status ComputeMoments(const float* x, size_t n, Moments* out) override {
    return MomentsPass<false>(x, n, out, nullptr);
  }

  Status KeyHistogram(const float* x, size_t n, std::vector<uint64_t>* hist,
                      Moments* out) override {
    return MomentsPass<true>(x, n, out, hist);
  }

  Status CountCollect(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                      std::vector<uint32_t>* idx, uint64_t* count, uint64_t* nonfinite,
                      double* sumsq) override {
    cap = std::min<uint64_t>(cap, n);
    // Radix sort of the collected indices: only the low bit_width(n) bits can differ.
    const int end_bit = std::max(1, static_cast<int>(std::bit_width(n)));
    size_t sort_bytes = 0;
    SIEVE_CUDA_TRY(
        cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                       static_cast<uint32_t*>(nullptr), cap, 0, end_bit, stream_));
    // Results first (counters, Σx²: one small copy to pinned memory), then the index buffers.
    Layout lay;
    const size_t res_off = lay.Add(2 * sizeof(unsigned long long) + sizeof(double));
    const size_t out_off = lay.Add(cap * sizeof(uint32_t));
    const size_t sorted_off = lay.Add(cap * sizeof(uint32_t));
    const size_t temp_off = lay.Add(sort_bytes);
    StatusOr<void*> base = Reserve(lay.bytes());
    if (!base.ok()) return base.status();
    char* const b = static_cast<char*>(*base);
    auto* counters = reinterpret_cast<unsigned long long*>(b + res_off);
    auto* ss = reinterpret_cast<double*>(counters + 2);
    auto* out = reinterpret_cast<uint32_t*>(b + out_off);
    auto* sorted = reinterpret_cast<uint32_t*>(b + sorted_off);
    const size_t res_bytes = 2 * sizeof(unsigned long long) + sizeof(double);
    SIEVE_CUDA_TRY(cudaMemsetAsync(counters, 0, res_bytes, stream_));
    if (n != 0) {
      CountCollectKernel<<<Blocks(n, 4096), kThreads, 0, stream_>>>(x, n, key_thr, cap, out,
                                                                    counters, ss);
      SIEVE_CUDA_TRY(cudaGetLastError());
    }
    StatusOr<const char*> res = ReadBack(counters, res_bytes, "count-collect");
    if (!res.ok()) return res.status();
    unsigned long long c[2];
    double total_ss = 0.0;
    std::memcpy(c, *res, sizeof(c));
    std::memcpy(&total_ss, *res + sizeof(c), sizeof(double));
    if (sumsq != nullptr) *sumsq = total_ss;
    *count = c[0];
    *nonfinite = c[1];
    if (c[0] <= cap && c[1] == 0) {
      idx->resize(c[0]);
      if (c[0] != 0) {
        size_t temp_bytes = sort_bytes;
        SIEVE_CUDA_TRY(cub::DeviceRadixSort::SortKeys(b + temp_off, temp_bytes, out, sorted, c[0],
                                                      0, end_bit, stream_));
        SIEVE_CUDA_TRY(cudaMemcpyAsync(idx->data(), sorted, c[0] * sizeof(uint32_t),
                                       cudaMemcpyDeviceToHost, stream_));
      }
      return Wait("count-collect indices");
    }
    return Status::Ok();
  }

  Status StridedSampleAbs(const float* x, size_t n, size_t start, size_t stride,
                          std::vector<float>* out) override {
    const size_t m = start < n ? (n - start + stride - 1) / stride : 0;
    out->resize(m);
    if (m == 0) return Status::Ok();
    StatusOr<void*> tmp = Reserve(m * sizeof(float));
    if (!tmp.ok()) return tmp.status();
    float* const dst = static_cast<float*>(*tmp);
    TransformKernel<<<Blocks(m, 4096), kThreads, 0, stream_>>>(m, SampleFn{x, start, stride}, dst);
    SIEVE_CUDA_TRY(cudaGetLastError());
    return ToHost(dst, m, out->data());
  }

  Status GatherMask(const float* x, const uint32_t* idx, size_t count, float* vals, float* mask_a,
                    float* mask_b, ValuePrecision keep) override {
    if (count == 0) return Status::Ok();
    Layout lay;
    const size_t idx_off = lay.Add(count * sizeof(uint32_t));
    const size_t vals_off = lay.Add(count * sizeof(float));
    StatusOr<void*> base = Reserve(lay.bytes());
    if (!base.ok()) return base.status();
    char* const b = static_cast<char*>(*base);
    auto* didx = reinterpret_cast<uint32_t*>(b + idx_off);
    auto* dvals = reinterpret_cast<float*>(b + vals_off);
    SIEVE_CUDA_TRY(
        cudaMemcpyAsync(didx, idx, count * sizeof(uint32_t), cudaMemcpyHostToDevice, stream_));
    ForEachKernel<<<Blocks(count, 4096), kThreads, 0, stream_>>>(
        count, GatherMaskFn{x, didx, dvals, mask_a, mask_b, keep});
    SIEVE_CUDA_TRY(cudaGetLastError());
    return ToHost(dvals, count, vals);
  }

  Status KeepRoundingError(float* x, size_t n, ValuePrecision p) override {
    if (p == ValuePrecision::kFp32) return Zero(x, n);
    if (n == 0) return Status::Ok();
    ForEachKernel<<<Blocks(n, 4096), kThreads, 0, stream_>>>(n, RoundingErrorFn{x, p});
    return CudaStatus(cudaGetLastError(), "rounding error");
  }

  Status SigmaHistogram(const float* x, size_t n, double mean, double sigma, double width, int bins,
                        std::vector<uint64_t>* counts) override {
    const double inv_w = 1.0 / (sigma * width);
    counts->assign(bins, 0);
    const size_t bytes = bins * sizeof(unsigned long long);
    StatusOr<void*> base = Reserve(bytes);
    if (!base.ok()) return base.status();
    auto* dc = static_cast<unsigned long long*>(*base);
    SIEVE_CUDA_TRY(cudaMemsetAsync(dc, 0, bytes, stream_));
    if (n != 0) {
      SigmaHistKernel<<<Blocks(n, 1024), kThreads, bins * sizeof(unsigned), stream_>>>(
          x, n, mean, inv_w, bins, dc);
      SIEVE_CUDA_TRY(cudaGetLastError());
    }
    StatusOr<const char*> res = ReadBack(dc, bytes, "sigma histogram");
    if (!res.ok()) return res.status();
    std::memcpy(counts->data(), *res, bytes);
    return Status::Ok();
  }

 private:
  CudaContext() = default;

  // Waits for the stream; a launch error not yet reported surfaces here too.
  Status Wait(const char* what) {
    SIEVE_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), what));
    return CudaStatus(cudaStreamSynchronize(stream_), what);
  }

  // At least `bytes` of device scratch; its content is unspecified.
  StatusOr<void*> Reserve(size_t bytes) {
    if (bytes > arena_bytes_) {
      const size_t grow = std::max(bytes, arena_bytes_ + arena_bytes_ / 2);
      if (arena_ != nullptr) SIEVE_CUDA_TRY(cudaFree(arena_));
      arena_ = nullptr;
      arena_bytes_ = 0;
      SIEVE_CUDA_TRY(cudaMalloc(&arena_, grow));
      arena_bytes_ = grow;
    }
    return arena_;
  }

  // Copies `bytes` of device memory to the pinned staging buffer and waits; the result is valid
  // until the next ReadBack.
  StatusOr<const char*> ReadBack(const void* src_dev, size_t bytes, const char* what) {
    if (bytes > pinned_bytes_) {
      if (pinned_ != nullptr) SIEVE_CUDA_TRY(cudaFreeHost(pinned_));
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      SIEVE_CUDA_TRY(cudaMallocHost(&pinned_, bytes));
      pinned_bytes_ = bytes;
    }
    SIEVE_CUDA_TRY(cudaMemcpyAsync(pinned_, src_dev, bytes, cudaMemcpyDeviceToHost, stream_));
    SIEVE_RETURN_IF_ERROR(Wait(what));
    return static_cast<const char*>(pinned_);
  }

  template <bool kHist>
  Status MomentsPass(const float* x, size_t n, Moments* out, std::vector<uint64_t>* hist) {
    // {sum, sumsq} doubles, the non-finite count, then the histogram: one block, one read-back.
    const size_t bytes = 2 * sizeof(double) + sizeof(unsigned long long) +
                         (kHist ? kKeyHistBins * sizeof(unsigned long long) : 0);
    StatusOr<void*> base = Reserve(bytes);
    if (!base.ok()) return base.status();
    auto* acc = static_cast<double*>(*base);
    auto* nf = reinterpret_cast<unsigned long long*>(acc + 2);
    SIEVE_CUDA_TRY(cudaMemsetAsync(acc, 0, bytes, stream_));
    if (n != 0) {
      MomentsKernel<kHist>
          <<<Blocks(n, kHist ? 1024 : 4096), kThreads, 0, stream_>>>(x, n, acc, nf, nf + 1);
      SIEVE_CUDA_TRY(cudaGetLastError());
    }
    StatusOr<const char*> res = ReadBack(acc, bytes, "moments");
    if (!res.ok()) return res.status();
    double a[2];
    unsigned long long bad = 0;
    std::memcpy(a, *res, sizeof(a));
    std::memcpy(&bad, *res + sizeof(a), sizeof(bad));
    *out = Moments{a[0], a[1], bad};
    if (kHist) {
      hist->resize(kKeyHistBins);
      std::memcpy(hist->data(), *res + sizeof(a) + sizeof(bad),
                  kKeyHistBins * sizeof(unsigned long long));
    }
    return Status::Ok();
  }

  cudaStream_t stream_ = nullptr;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
};

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::kCuda; }
  StatusOr<std::unique_ptr<BackendContext>> NewContext() const override {
    return CudaContext::Create();
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
