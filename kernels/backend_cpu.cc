// The CPU Backend (see kernels/backend.h for the contract): Thrust's OMP system for the plain
// element-wise passes and hand-written OpenMP loops for the fused ones (count+collect, key
// histogram, moments, σ-histogram). Host memory throughout; "device" pointers are host pointers.
// Only explicit execution policies on raw pointers are used, never thrust::device or
// device_vector, so this object coexists with the CUDA backend in one binary.
#include <omp.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>
#include <thrust/transform.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/huge_page_allocator.h"
#include "kernels/backend.h"
#include "kernels/backend_functors.h"
#include "kernels/block_scan.h"

namespace sieve {
namespace backend_internal {
namespace {

constexpr size_t kBlock = 512;
// Count+collect keeps its per-thread scratch between calls while it holds at most this fraction of
// the vector's length (ρ ≤ 0.01 with topk's and gaussiank's caps of 4·k); a larger one (an exact
// fallback's candidates) is released after the call.
constexpr double kScratchKeepFraction = 1.0 / 16;

// The float sums Σx and Σx² of x[0, n) (vectorized). A non-finite entry, or a float overflow, makes
// one of them non-finite. A function of its own, not a loop inside the ForThreadRanges lambdas: GCC
// 12 left that loop scalar there (mulss/addss, despite its omp simd), which made every moments pass
// ~2.5x slower than a streaming read.
inline void BlockSums(const float* x, size_t n, float* sum, float* sumsq) {
  float s = 0.0f, ss = 0.0f;
#pragma omp simd reduction(+ : s, ss)
  for (size_t i = 0; i < n; ++i) {
    s += x[i];
    ss += x[i] * x[i];
  }
  *sum = s;
  *sumsq = ss;
}

// Runs fn(t, lo, hi) on nt OpenMP threads t = 0 … nt−1 over contiguous ranges [lo, hi) of
// [0, n): outputs concatenated in thread order stay in index order without a sort.
template <typename Fn>
void ForThreadRanges(size_t n, int nt, Fn fn) {
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const size_t per = n / nt, rem = n % nt;
    const size_t lo = t * per + std::min<size_t>(t, rem);
    fn(t, lo, lo + per + (static_cast<size_t>(t) < rem ? 1 : 0));
  }
}

template <bool kHist>
void MomentsCpu(const float* x, size_t n, Moments* out, std::vector<uint64_t>* hist) {
  const int nt = omp_get_max_threads();
  std::vector<Moments> part(nt);
  std::vector<std::vector<uint64_t>> hparts(kHist ? nt : 0);
  ForThreadRanges(n, nt, [&](int t, size_t lo, size_t hi) {
    double s = 0.0, ss = 0.0;
    uint64_t nf = 0;
    std::vector<uint32_t> h(kHist ? kKeyHistBins : 0, 0);
    for (size_t b = lo; b < hi; b += kBlock) {
      const size_t e = std::min(hi, b + kBlock);
      // Plain float sums vectorize; a non-finite entry (or a float overflow) makes one of them
      // non-finite, which sends the block to the exact double scan that also counts the bad ones.
      float fs, fss;
      if (e - b == kBlock) {
        BlockSums(x + b, kBlock, &fs, &fss);
      } else {
        BlockSums(x + b, e - b, &fs, &fss);
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
  });
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

// Host memory throughout and every call completes before returning: the only state is the
// count pass's scratch, kept for its capacity.
class CpuContext final : public BackendContext {
 public:
  Device device() const override { return Device::kCpu; }
  Status Synchronize() override { return Status::Ok(); }

  // Zeroed; a buffer of 2 MiB or more is 2 MiB-aligned and advised onto transparent huge pages
  // (the error feedback's masking and the replica's UPDATE scatter touch them at scattered
  // indices: base/huge_page_allocator.h says why that pays).
  StatusOr<float*> Alloc(size_t n) override {
    const size_t bytes = std::max<size_t>(1, n) * sizeof(float);
    const size_t align = bytes >= kHugePageBytes ? kHugePageBytes : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr) {
      return InternalError("out of host memory for " + std::to_string(n) + " floats");
    }
    if (align == kHugePageBytes) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint
    std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  }
  void Free(float* p) override { std::free(p); }
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

  Status MomentumAccumulate(float* m, float* r, const float* g, size_t n, float mu,
                            float lr) override {
    thrust::for_each(thrust::omp::par, thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(n), MomentumFn{m, r, g, mu, lr});
    return Status::Ok();
  }
  Status MomentumAccumulateFromHost(float* m, float* r, const float* g, size_t n, float mu,
                                    float lr) override {
    return MomentumAccumulate(m, r, g, n, mu, lr);
  }

  Status ComputeMoments(const float* x, size_t n, Moments* out) override {
    MomentsCpu<false>(x, n, out, nullptr);
    return Status::Ok();
  }

  Status KeyHistogram(const float* x, size_t n, std::vector<uint64_t>* hist,
                      Moments* out) override {
    MomentsCpu<true>(x, n, out, hist);
    return Status::Ok();
  }

  // CountCollect(Values, Mask): vals (when non-null) gets x at the collected indices; with mask_r
  // = x (then vals non-null) each collected entry is masked as it is taken: x[i] =
  // KeptResidual(x[i], keep), after its value and, with sumsq, its square were read. When the pass
  // fills nothing (*count > cap or a non-finite entry) the masked entries are restored and
  // *masked is false.
  Status CountCollectImpl(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                          std::vector<uint32_t>* idx, std::vector<float>* vals, uint64_t* count,
                          uint64_t* nonfinite, double* sumsq, float* mask_r = nullptr,
                          ValuePrecision keep = ValuePrecision::kFp32, bool* masked = nullptr) {
    cap = std::min<uint64_t>(cap, n);
    const int nt = omp_get_max_threads();
    // Per-thread scratch of min(cap, its range) entries, written by position (no push_back), kept
    // across calls (no growth, no fresh pages) unless it grew past kScratchKeepFraction of n.
    local_idx_.resize(nt);
    local_vals_.resize(nt);
    std::vector<uint64_t> cnt(nt, 0), bad(nt, 0), held(nt, 0);
    std::vector<double> sq(nt, 0.0);
    ForThreadRanges(n, nt, [&](int t, size_t lo, size_t hi) {
      ScanOut so;
      so.need = std::min<uint64_t>(cap, hi - lo);
      so.idx = local_idx_[t].Get(so.need);
      so.vals = vals != nullptr ? local_vals_[t].Get(so.need) : nullptr;
      so.mask_r = mask_r;
      so.keep = keep;
      ScanAbove(simd_, x, lo, hi, key_thr, sumsq != nullptr, &so);
      cnt[t] = so.count;
      held[t] = std::min<uint64_t>(so.count, so.need);  // its first entries, written by the scan
      bad[t] = so.nonfinite;
      sq[t] = so.sumsq;
    });
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
    const bool filled = total <= cap && nf == 0;
    if (masked != nullptr) *masked = filled;
    if (!filled && mask_r != nullptr) {  // nothing filled: undo every entry masked
      for (int t = 0; t < nt; ++t) {
        const uint32_t* ip = local_idx_[t].data();
        const float* vp = local_vals_[t].data();
        for (size_t j = 0; j < held[t]; ++j) mask_r[ip[j]] = vp[j];
      }
    }
    if (filled) {
      auto concat = [&](const auto& parts, auto* dst) {
        dst->clear();
        dst->reserve(total);
        for (int t = 0; t < nt; ++t) {
          dst->insert(dst->end(), parts[t].data(), parts[t].data() + held[t]);
        }
      };
      concat(local_idx_, idx);
      if (vals != nullptr) concat(local_vals_, vals);
    }
    for (int t = 0; t < nt; ++t) {
      if (local_idx_[t].size() > n * kScratchKeepFraction) {
        local_idx_[t] = {};
        local_vals_[t] = {};
      }
    }
    return Status::Ok();
  }

  Status CountCollect(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                      std::vector<uint32_t>* idx, uint64_t* count, uint64_t* nonfinite,
                      double* sumsq) override {
    return CountCollectImpl(x, n, key_thr, cap, idx, nullptr, count, nonfinite, sumsq);
  }
  Status CountCollectValues(const float* x, size_t n, int64_t key_thr, uint64_t cap,
                            std::vector<uint32_t>* idx, std::vector<float>* vals, uint64_t* count,
                            uint64_t* nonfinite, double* sumsq) override {
    return CountCollectImpl(x, n, key_thr, cap, idx, vals, count, nonfinite, sumsq);
  }
  Status CountCollectMask(float* r, size_t n, int64_t key_thr, uint64_t cap, ValuePrecision keep,
                          Collected* out, uint64_t* count, uint64_t* nonfinite,
                          double* sumsq) override {
    return CountCollectImpl(r, n, key_thr, cap, &out->idx, &out->vals, count, nonfinite, sumsq, r,
                            keep, &out->masked);
  }
  Status RestoreMasked(float* r, const Collected& c,
                       const std::vector<uint32_t>* positions) override {
    if (!c.masked) return Status::Ok();
    if (positions == nullptr) {
      for (size_t j = 0; j < c.idx.size(); ++j) r[c.idx[j]] = c.vals[j];
    } else {
      for (uint32_t j : *positions) r[c.idx[j]] = c.vals[j];
    }
    return Status::Ok();
  }
  // The stores miss (scattered lines): prefetched for writing kZeroAhead entries ahead, so that
  // many are in flight.
  Status ZeroAt(float* p, const uint32_t* idx, size_t count) override {
    constexpr size_t kZeroAhead = 32;
    for (size_t j = 0; j < count; ++j) {
      if (j + kZeroAhead < count) __builtin_prefetch(p + idx[j + kZeroAhead], 1, 1);
      p[idx[j]] = 0.0f;
    }
    return Status::Ok();
  }

  Status AddAt(float* p, size_t, const uint32_t* idx, const float* vals, size_t count) override {
    for (size_t j = 0; j < count; ++j) p[idx[j]] += vals[j];
    return Status::Ok();
  }

  Status StridedSampleAbs(const float* x, size_t n, size_t start, size_t stride,
                          std::vector<float>* out) override {
    const size_t m = start < n ? (n - start + stride - 1) / stride : 0;
    out->resize(m);
    thrust::transform(thrust::omp::par, thrust::counting_iterator<size_t>(0),
                      thrust::counting_iterator<size_t>(m), out->data(),
                      SampleFn{x, start, stride});
    return Status::Ok();
  }

  Status GatherMask(const float* x, const uint32_t* idx, size_t count, float* vals, float* mask_a,
                    float* mask_b, ValuePrecision keep) override {
    if (count == 0) return Status::Ok();
    thrust::for_each(thrust::omp::par, thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(count),
                     GatherMaskFn{x, idx, vals, mask_a, mask_b, keep});
    return Status::Ok();
  }

  Status KeepRoundingError(float* x, size_t n, ValuePrecision p) override {
    if (p == ValuePrecision::kFp32) return Zero(x, n);
    thrust::for_each(thrust::omp::par, thrust::counting_iterator<size_t>(0),
                     thrust::counting_iterator<size_t>(n), RoundingErrorFn{x, p});
    return Status::Ok();
  }

  Status SigmaHistogram(const float* x, size_t n, double mean, double sigma, double width, int bins,
                        std::vector<uint64_t>* counts) override {
    const double inv_w = 1.0 / (sigma * width);
    counts->assign(bins, 0);
    const int nt = omp_get_max_threads();
    std::vector<std::vector<uint64_t>> parts(nt, std::vector<uint64_t>(bins, 0));
    ForThreadRanges(n, nt, [&](int t, size_t lo, size_t hi) {
      std::vector<uint64_t>& h = parts[t];
      for (size_t i = lo; i < hi; ++i) {
        if (AbsKey(x[i]) >= kNonFiniteKey) continue;
        ++h[SigmaBin(x[i], mean, inv_w, bins)];
      }
    });
    for (const auto& h : parts) {
      for (int b = 0; b < bins; ++b) (*counts)[b] += h[b];
    }
    return Status::Ok();
  }

 private:
  // A grow-only array left uninitialized (new T[n]): its pages are touched only where written.
  template <typename T>
  class Scratch {
   public:
    T* Get(size_t n) {
      if (size_ < n) {
        data_.reset(new T[n]);
        size_ = n;
      }
      return data_.get();
    }
    T* data() const { return data_.get(); }
    size_t size() const { return size_; }

   private:
    std::unique_ptr<T[]> data_;
    size_t size_ = 0;
  };

  // The counting scan's vector width: the widest this CPU runs (kernels/block_scan.h).
  const SimdLevel simd_ = BestSimdLevel();
  // CountCollectImpl's per-thread scratch (one context is used by one thread at a time).
  std::vector<Scratch<uint32_t>> local_idx_;
  std::vector<Scratch<float>> local_vals_;
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  StatusOr<std::unique_ptr<BackendContext>> NewContext() const override {
    return std::unique_ptr<BackendContext>(std::make_unique<CpuContext>());
  }
};

}  // namespace
}  // namespace backend_internal

namespace cpu {
Backend* Instance() {
  static backend_internal::CpuBackend* const instance = new backend_internal::CpuBackend();
  return instance;
}
}  // namespace cpu
}  // namespace sieve
