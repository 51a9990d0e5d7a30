// Selection operators and per-worker error feedback (docs/architecture.md, "One round", steps
// 2–5). A flat float32 vector r of length d (1 ≤ d ≤ 2^32−1; sizes are 64-bit) lives in the
// memory of a backend (Device); the result of a selection is always copied into host vectors:
// global indices as uint32 sorted strictly ascending, and the values r[i] at those indices.
//
// Errors on caller input are Status values and leave every piece of state unchanged: k > d,
// d = 0 or d ≥ 2^32, bad sizes, an unavailable device (InvalidArgument and others); NaN/±Inf
// anywhere in r is NonFinite (nothing is selected: the caller tests the code, e.g. to report a
// diverged training). Only k = 0 … d is accepted; k = 0 selects nothing, k = d selects everything.
//
// Ownership: ErrorFeedback owns its m and r buffers (backend memory) and the backend context its
// kernels run on (CUDA: one stream and a grow-only scratch arena per object); it is not copyable.
// The free Select creates a context per call (on CUDA a stream + scratch: keep hot loops on an
// ErrorFeedback). Thread-safety: one ErrorFeedback must not be used from two threads at once (its
// const methods included); distinct objects and the free functions are safe to use concurrently.
#ifndef SIEVE_KERNELS_SELECTION_H_
#define SIEVE_KERNELS_SELECTION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/compressor.h"
#include "kernels/device.h"
#include "kernels/value_precision.h"

namespace sieve {

class BackendContext;

struct SelectOptions {
  // gaussiank / dgc: when > 0 and finite, used as the first threshold guess instead of the
  // statistics (one counting pass in steady state). Ignored by the other operators.
  float prev_threshold = 0.0f;
  // gaussiank / dgc: the threshold of the round before prev_threshold's (0 = unknown). When both
  // are > 0 and finite and q = prev_threshold / older_threshold lies in [kDriftMin, kDriftMax]
  // (compressor_constants), the first guess extrapolates that drift: prev_threshold·q (e.g. the
  // slow decay of the residual's tail after a learning-rate step). q = 1 (a steady threshold)
  // and larger jumps leave the first guess at prev_threshold.
  float older_threshold = 0.0f;
  // randomk: the generator seed (e.g. a hash of worker rank and round); dgc: the seed of the
  // random start of its strided sample. Same seed + same input → same selection.
  uint64_t seed = 0;
  // ErrorFeedback::Select only: the selected values are sent in this precision (the wire's
  // `--wire_values`). Each is rounded to it (to nearest even; a finite value beyond the
  // precision's range saturates to its largest finite value) and its rounding error v - round(v)
  // stays in r at its index instead of 0, so r + Σ pushed is what it was before the selection
  // (exactly, as v - round(v) is exact in binary32 but past fp16's 2·65504). kNone (dense): r
  // keeps every entry's rounding error. The selection's statistics (threshold, sumsq_selected)
  // are those of the unrounded values. The free Select refuses anything but kFp32
  // (InvalidArgument: the error would be lost).
  ValuePrecision round_values = ValuePrecision::kFp32;
  // ErrorFeedback::Select only: zero the momentum m at the selected entries (momentum-factor
  // masking, Deep Gradient Compression's rule: the default). false keeps m everywhere, so the
  // rule is error feedback on the momentum-SGD step (m = μm + g; r += η·m; send and zero the
  // selected entries of r only). Ignored by the free Select (it has no m). A dense selection
  // never touches m.
  bool mask_momentum = true;
};

struct Selection {
  uint64_t dim = 0;  // d of the vector selected from
  // kNone: true; `values` holds all d entries in order and `indices` stays empty.
  bool dense = false;
  std::vector<uint32_t> indices;  // ascending global indices (empty when dense)
  std::vector<float> values;      // r[indices[j]] (or r when dense)
  // Entries with |r| > threshold were selected (gaussiank*, dgc). topk: the k-th largest |r|.
  // NaN when the operator has no threshold (none, randomk, k = 0).
  float threshold = 0.0f;
  // gaussiank*, dgc: threshold adjustments (counting passes after the first); 0 otherwise.
  // gaussiank's last pass may also collect the candidates above a threshold whose count is
  // above the band but at most kGaussCollectFactor·k: the final threshold is then chosen among
  // their values without another pass.
  int iterations = 0;
  // gaussiank / dgc: true when the exact top-k over the candidates decided the final set.
  bool exact_fallback = false;
  // Σ r² over all d entries and over the selected ones (double accumulation, one pass).
  double sumsq_total = 0.0;
  double sumsq_selected = 0.0;

  size_t size() const { return values.size(); }
  // ‖r − sel(r)‖² / ‖r‖² (0 when r = 0): ContractionRatio(sumsq_total, sumsq_selected).
  double ContractionRatio() const;
};

// The contraction ratio ‖r − sel(r)‖² / ‖r‖² from the sums of squares over all of r and over the
// selected entries (e.g. summed over several selections' parts of r): (total − selected) / total
// clamped to [0, 1] (rounding may push it out); 0 when total is not > 0.
double ContractionRatio(double sumsq_total, double sumsq_selected);

// Selects from x (length d, in the memory of `device`) without modifying it. k ≤ d.
Status Select(Device device, Compressor compressor, const float* x, size_t d, uint64_t k,
              const SelectOptions& options, Selection* out);

// Host-memory convenience (the server's shard and its two-way compression): CPU backend.
inline Status SelectHost(Compressor compressor, std::span<const float> x, uint64_t k,
                         const SelectOptions& options, Selection* out) {
  return Select(Device::kCpu, compressor, x.data(), x.size(), k, options, out);
}

// k for a density ρ ∈ [0, 1]: round(ρ·d) clamped to [min(1, d)·(ρ > 0), d].
uint64_t KForDensity(double density, uint64_t d);

// Per-worker error-feedback state: momentum m and residual r of length d in backend memory.
class ErrorFeedback {
 public:
  // Both buffers start at zero.
  static StatusOr<std::unique_ptr<ErrorFeedback>> Create(Device device, size_t d);
  ~ErrorFeedback();
  ErrorFeedback(const ErrorFeedback&) = delete;
  ErrorFeedback& operator=(const ErrorFeedback&) = delete;

  Device device() const;
  size_t dim() const { return d_; }

  // m = momentum·m + g; r += lr·m (DGC momentum correction with the learning rate inside the
  // memory). grad_host has length d and may be reused on return. One pass; single rounding per
  // operation (no FMA). On CUDA the pass may still run on the object's stream on return (the next
  // method that returns host data, or Synchronize(), waits for it and reports its failure).
  Status Accumulate(std::span<const float> grad_host, float momentum, float lr);
  // The same with the gradient already in this backend's memory (length d), read on this object's
  // stream: it must be ready before the call and stay unchanged until Synchronize() (or the next
  // method that returns host data).
  Status AccumulateDevice(const float* grad_dev, float momentum, float lr);

  // Waits for the work this object has enqueued (only Accumulate* leave any); needed before its
  // buffers (residual_data()) are read through another context, e.g. the free Select.
  Status Synchronize();

  // S = select(r); out gets (S, r[S]); then r[S] = 0 and m[S] = 0 (momentum-factor masking;
  // with options.mask_momentum false m is untouched). kNone: out is dense (all of r), r = 0, m
  // untouched. With options.round_values fp16 / bf16,
  // out's values are r[S] rounded to it and r[S] keeps the rounding errors instead of 0
  // (SelectOptions). On error nothing changes.
  Status Select(Compressor compressor, uint64_t k, const SelectOptions& options, Selection* out);

  // Histogram of r in σ bins: `bins` bins of width `width_sigma`·σ centred on the mean of r;
  // out-of-range values land in the first / last bin. bins in [2, 4096], width_sigma > 0.
  Status SigmaHistogram(double width_sigma, int bins, std::vector<uint64_t>* counts) const;

  // r[indices[j]] += values[j]: pairs pushed but never applied (PsClient's RoundStats::missed_*,
  // BSP backup workers) return to the residual, so a later selection can push them again; the
  // momentum stays masked. indices: distinct, < d (any order). Errors: InvalidArgument (sizes
  // differ, an index >= d, a repeated index), nothing changed. On CUDA it copies r to the host
  // and back (rare: only rounds that closed without this worker).
  Status ReturnUnapplied(std::span<const uint32_t> indices, std::span<const float> values);

  // Host copies of the state (tests, checkpoints) and a way to restore it (lengths d); both
  // complete before returning.
  Status ReadState(std::vector<float>* m, std::vector<float>* r) const;
  Status WriteState(std::span<const float> m, std::span<const float> r);

  // Backend-memory pointers (valid for the object's lifetime), e.g. for Select(device, ...) after
  // Synchronize().
  const float* residual_data() const { return r_; }
  const float* momentum_data() const { return m_; }

 private:
  ErrorFeedback(std::unique_ptr<BackendContext> ctx, size_t d, float* m, float* r);

  struct Scratch;  // Select's candidates and scratch buffers, reused call after call

  std::unique_ptr<BackendContext> ctx_;  // runs every pass; frees m and r in ~ErrorFeedback
  size_t d_;
  float* m_;
  float* r_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace sieve

#endif  // SIEVE_KERNELS_SELECTION_H_
