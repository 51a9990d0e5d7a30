// Backend: the internal primitive layer of kernels/ (not for use outside kernels/). Two
// implementations share the element-wise functors of backend_functors.h: backend_cpu.cc (namespace
// sieve::cpu; g++, Thrust OMP system + OpenMP loops for the fused passes) and backend_cuda.cu
// (sieve::cuda; nvcc, custom kernels over the same functors and CUB's radix sort, no Thrust);
// each exposes an instance of this interface.
// A Backend is a stateless, process-wide factory (a function-local static per implementation); the
// primitives run on a BackendContext it creates, which holds every mutable piece: on CUDA one
// stream and a grow-only device scratch arena (+ pinned host staging), on the CPU nothing.
// Pointers named `*_dev` are in the backend's memory (host RAM for cpu, GPU global memory for
// cuda); pointers and vectors named `*_host` are host memory. Lengths are element counts.
// Keys: key(x) = the IEEE-754 bits of |x| as uint32; for finite x, |a| > |b| ⟺ key(a) > key(b);
// NaN and ±Inf have key ≥ 0x7f800000.
// Ordering: the calls on one context run in call order (on CUDA: its stream). A call that fills
// host memory (ToHost, the *_host outputs, Moments, counts) returns with them complete; a call
// that only changes backend memory (MomentumAccumulate*, Zero) may return with that work still
// running on the context — its failure is then reported by the next call that waits, or by
// Synchronize(). FromHost and Alloc return complete.
// Errors: every CUDA API or kernel failure is a Status carrying cudaGetErrorString's message;
// nothing aborts.
// Thread-safety: a Backend is immutable and safe to share. One context per thread / object: a
// context must not be used from two threads at once; distinct contexts are independent (on CUDA,
// work on another context's buffers needs that context's Synchronize() first).
#ifndef SIEVE_KERNELS_BACKEND_H_
#define SIEVE_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "kernels/device.h"
#include "kernels/value_precision.h"

namespace sieve {

inline constexpr uint32_t kNonFiniteKey = 0x7f800000u;
inline constexpr int kKeyHistBits = 12;  // top 12 of the 31 magnitude bits → 4096 bins
inline constexpr int kKeyHistShift = 31 - kKeyHistBits;
inline constexpr size_t kKeyHistBins = size_t{1} << kKeyHistBits;

// Sums over a vector: sum, sum of squares (double accumulation) and the count of NaN/±Inf.
struct Moments {
  double sum = 0.0;
  double sumsq = 0.0;
  uint64_t nonfinite = 0;
};

// The entries a counting pass collected (CountCollectMask): idx ascending and (when filled: always
// when masked) vals[j] = x[idx[j]] as it was before any masking; when masked, x is masked at idx
// (RestoreMasked undoes it).
struct Collected {
  std::vector<uint32_t> idx;
  std::vector<float> vals;
  bool masked = false;
};

// The primitives, bound to one stream (CUDA) and its scratch. Created by Backend::NewContext;
// owned by whoever runs kernels (e.g. an ErrorFeedback, or one stateless Select call). Buffers
// from Alloc may be used with any context of the same backend once Synchronize()d.
class BackendContext {
 public:
  virtual ~BackendContext() = default;
  virtual Device device() const = 0;

  // The CUDA stream (a cudaStream_t) this context runs on; nullptr on the CPU. For the libraries
  // layered on a context inside kernels/ (kernels/nn), which enqueue their own work on it so that
  // it stays ordered with this context's calls. The context keeps ownership.
  virtual void* native_stream() const { return nullptr; }

  // Waits for every call made on this context; reports a failure of work still running.
  virtual Status Synchronize() = 0;

  // Memory of `n` floats in backend memory (zero-initialized, complete on return); Free accepts
  // nullptr and waits for work on the buffer to finish.
  virtual StatusOr<float*> Alloc(size_t n) = 0;
  virtual void Free(float* p_dev) = 0;
  virtual Status ToHost(const float* src_dev, size_t n, float* dst_host) = 0;
  // Returns once src_host may be reused (the copy is complete).
  virtual Status FromHost(const float* src_host, size_t n, float* dst_dev) = 0;
  virtual Status Zero(float* p_dev, size_t n) = 0;

  // m = mu·m + g; r += lr·m, elementwise, in one pass. g_dev is in backend memory (read
  // asynchronously on CUDA: keep it unchanged until the next waiting call).
  virtual Status MomentumAccumulate(float* m_dev, float* r_dev, const float* g_dev, size_t n,
                                    float mu, float lr) = 0;
  // The same with g in host memory (staged through the context's scratch on CUDA); g_host may be
  // reused on return.
  virtual Status MomentumAccumulateFromHost(float* m_dev, float* r_dev, const float* g_host,
                                            size_t n, float mu, float lr) = 0;

  // One pass: sum, sum of squares, non-finite count.
  virtual Status ComputeMoments(const float* x_dev, size_t n, Moments* out) = 0;

  // One pass: Moments plus a histogram of key(x) >> kKeyHistShift into hist_host
  // (kKeyHistBins entries, overwritten). Non-finite entries are counted in moments only.
  virtual Status KeyHistogram(const float* x_dev, size_t n, std::vector<uint64_t>* hist_host,
                              Moments* out) = 0;

  // One fused pass: *count = #{i : key(x[i]) > key_thr} over finite entries (key_thr = -1 means
  // every finite entry), *nonfinite = #NaN/Inf, *sumsq = Σ x² (meaningful when all finite; sumsq
  // may be null, and the pass is cheaper then). When *count ≤ cap (and no entry is non-finite),
  // idx_host receives exactly those indices in ascending order; otherwise its content is
  // unspecified. Requires n ≤ 2^32.
  virtual Status CountCollect(const float* x_dev, size_t n, int64_t key_thr, uint64_t cap,
                              std::vector<uint32_t>* idx_host, uint64_t* count, uint64_t* nonfinite,
                              double* sumsq) = 0;

  // CountCollect that also fills vals_host[j] = x[idx_host[j]] whenever it fills idx_host. The
  // default gathers them after the pass; the CPU takes them within it (the entries are at hand).
  virtual Status CountCollectValues(const float* x_dev, size_t n, int64_t key_thr, uint64_t cap,
                                    std::vector<uint32_t>* idx_host, std::vector<float>* vals_host,
                                    uint64_t* count, uint64_t* nonfinite, double* sumsq) {
    SIEVE_RETURN_IF_ERROR(CountCollect(x_dev, n, key_thr, cap, idx_host, count, nonfinite, sumsq));
    if (*count > cap || *nonfinite != 0) return Status::Ok();
    vals_host->resize(idx_host->size());
    return GatherMask(x_dev, idx_host->data(), idx_host->size(), vals_host->data(), nullptr,
                      nullptr, ValuePrecision::kFp32);
  }

  // ErrorFeedback's counting pass over its residual r: CountCollect over r into out->idx that may
  // also take out->vals and mask r at each entry it collects as GatherMask(r, idx, ·, r, ·, keep)
  // would (r[i] = KeptResidual(r[i], keep) of backend_functors.h), and then sets out->masked. It
  // masks only when it fills out (*count ≤ cap, no non-finite entry); otherwise r is left bitwise
  // as it was. The default is CountCollect (no values, nothing masked: the caller gathers what it
  // needs and masks its final choice with GatherMask, as before); the CPU takes the values and
  // masks within the pass, where the entries are at hand (no second visit of their cache lines).
  // The momentum is not touched: ZeroAt, once the choice is made.
  virtual Status CountCollectMask(float* r_dev, size_t n, int64_t key_thr, uint64_t cap,
                                  ValuePrecision keep, Collected* out, uint64_t* count,
                                  uint64_t* nonfinite, double* sumsq) {
    (void)keep;
    out->masked = false;
    out->vals.clear();
    return CountCollect(r_dev, n, key_thr, cap, &out->idx, count, nonfinite, sumsq);
  }

  // Undoes the masking of CountCollectMask (c.masked) at the positions j of `positions` (all of
  // c when null): r[c.idx[j]] = c.vals[j]. Leaves c unchanged.
  virtual Status RestoreMasked(float* r_dev, const Collected& c,
                               const std::vector<uint32_t>* positions) {
    (void)r_dev;
    (void)positions;
    if (c.masked) return InternalError("RestoreMasked: this backend never masks in a pass");
    return Status::Ok();
  }

  // p[idx[j]] = 0 for j < count (indices trusted, as in GatherMask). The default goes through
  // GatherMask; the CPU stores only.
  virtual Status ZeroAt(float* p_dev, const uint32_t* idx_host, size_t count) {
    std::vector<float> discard(count);
    return GatherMask(p_dev, idx_host, count, discard.data(), nullptr, p_dev,
                      ValuePrecision::kFp32);
  }

  // p[idx[j]] += vals[j] for j < count (host arrays; indices trusted and distinct). The default
  // copies the whole vector to the host and back (O(n): for rare events, e.g. pairs a server did
  // not apply); the CPU adds in place.
  virtual Status AddAt(float* p_dev, size_t n, const uint32_t* idx_host, const float* vals_host,
                       size_t count) {
    std::vector<float> host(n);
    SIEVE_RETURN_IF_ERROR(ToHost(p_dev, n, host.data()));
    for (size_t j = 0; j < count; ++j) host[idx_host[j]] += vals_host[j];
    SIEVE_RETURN_IF_ERROR(FromHost(host.data(), n, p_dev));
    return Synchronize();
  }

  // out_host = |x[start + j·stride]| for every such index < n.
  virtual Status StridedSampleAbs(const float* x_dev, size_t n, size_t start, size_t stride,
                                  std::vector<float>* out_host) = 0;

  // vals_host[j] = x[idx_host[j]] for j < count; then, when non-null, mask_a_dev[idx] = x[idx] -
  // round_keep(x[idx]) (the rounding error of the value sent in precision `keep`,
  // RoundToPrecision of backend_functors.h; 0 for kFp32) and mask_b_dev[idx] = 0 for every
  // selected idx (mask_a_dev may alias x_dev). Indices are trusted (< n of the buffers, produced
  // by this layer).
  virtual Status GatherMask(const float* x_dev, const uint32_t* idx_host, size_t count,
                            float* vals_host, float* mask_a_dev, float* mask_b_dev,
                            ValuePrecision keep) = 0;

  // x[i] = x[i] - round_p(x[i]) for every i < n: the rounding errors of a whole vector sent in
  // precision p (kFp32: zeroes it). May return with the work still running (as Zero).
  virtual Status KeepRoundingError(float* x_dev, size_t n, ValuePrecision p) = 0;

  // Histogram of (x − mean)/sigma into bins of width `width` covering [−bins/2·width,
  // bins/2·width); values outside go to the first / last bin. counts_host gets `bins` entries.
  // Non-finite entries are skipped.
  virtual Status SigmaHistogram(const float* x_dev, size_t n, double mean, double sigma,
                                double width, int bins, std::vector<uint64_t>* counts_host) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // A fresh context (CUDA: a new stream on the current device, an empty arena). Cheap on the CPU.
  virtual StatusOr<std::unique_ptr<BackendContext>> NewContext() const = 0;
};

// The backend for a device; kCuda requires CudaBackendCompiled() (callers check via ParseDevice
// or CudaDeviceAvailable, an unavailable device yields FailedPrecondition).
StatusOr<Backend*> GetBackend(Device device);

namespace cpu {
Backend* Instance();
}  // namespace cpu
namespace cuda {
Backend* Instance();
int VisibleDeviceCount();
}  // namespace cuda

}  // namespace sieve

#endif  // SIEVE_KERNELS_BACKEND_H_
