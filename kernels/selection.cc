#include "kernels/selection.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unordered_set>

#include "kernels/backend.h"
#include "kernels/backend_functors.h"
#include "kernels/normal_quantile.h"

namespace sieve {
namespace {

namespace cc = compressor_constants;

constexpr uint64_t kMaxDim = std::numeric_limits<uint32_t>::max();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Status CheckDims(size_t d, uint64_t k) {
  if (d == 0) return InvalidArgumentError("selection over an empty vector (d = 0)");
  if (d > kMaxDim) {
    return InvalidArgumentError("d = " + std::to_string(d) + " exceeds 2^32-1 (uint32 indices)");
  }
  if (k > d) {
    return InvalidArgumentError("k = " + std::to_string(k) + " exceeds d = " + std::to_string(d));
  }
  return Status::Ok();
}

Status CheckMomentum(float momentum, float lr) {
  if (!std::isfinite(momentum) || !std::isfinite(lr)) {
    return InvalidArgumentError("momentum and learning rate must be finite");
  }
  return Status::Ok();
}

Status NonFiniteResidual(uint64_t count) {
  return NonFiniteError("residual holds " + std::to_string(count) +
                        " NaN/Inf entries; nothing selected");
}

// The key threshold selecting |x| > thr: -1 (every entry) for thr < 0.
int64_t KeyThreshold(float thr) {
  if (!(thr >= 0.0f)) return -1;
  return static_cast<int64_t>(std::bit_cast<uint32_t>(thr) & 0x7fffffffu);
}

// ErrorFeedback's buffers, masked at the selection (null in the stateless Select): r is the x
// selected from; m is null when the momentum is kept (SelectOptions::mask_momentum false).
struct MaskTarget {
  float* r;
  float* m;
  ValuePrecision keep;
};

// The candidates of the last counting pass, with their values. When `chosen`, they are the
// selection; when c.masked, r (not yet m) is masked at c.idx (a backend that masks in the pass).
// The rest is scratch, kept with its capacity where the Picked outlives a call (ErrorFeedback's):
// buffers of ~k entries allocated afresh each round cost page faults on first touch (at d = 1e7,
// rho = 0.01, about half a millisecond of a ~7 ms topk call).
struct Picked {
  Collected c;
  bool chosen = false;
  std::vector<uint32_t> keys, order, pos, rest;
  std::vector<float> sample;
};

// Undoes the masking of p->c, if any (a pass whose candidates are not taken).
Status Unmask(BackendContext* be, const MaskTarget* mt, Picked* p) {
  if (!p->c.masked) return Status::Ok();
  SIEVE_RETURN_IF_ERROR(be->RestoreMasked(mt->r, p->c, nullptr));
  p->c.masked = false;
  return Status::Ok();
}

// Keeps the candidates at positions `pos` (ascending) of p->c as the selection: the others are
// restored when masked.
Status Take(BackendContext* be, const MaskTarget* mt, const std::vector<uint32_t>& pos, Picked* p) {
  Collected& c = p->c;
  const size_t n = c.idx.size();
  if (c.masked && pos.size() < n) {
    std::vector<uint32_t>& rest = p->rest;
    rest.clear();
    rest.reserve(n - pos.size());
    size_t q = 0;
    for (size_t j = 0; j < n; ++j) {
      if (q < pos.size() && pos[q] == j) {
        ++q;
      } else {
        rest.push_back(static_cast<uint32_t>(j));
      }
    }
    SIEVE_RETURN_IF_ERROR(be->RestoreMasked(mt->r, c, &rest));
  }
  for (size_t q = 0; q < pos.size(); ++q) {
    c.idx[q] = c.idx[pos[q]];
    c.vals[q] = c.vals[pos[q]];
  }
  c.idx.resize(pos.size());
  c.vals.resize(pos.size());
  p->chosen = true;
  return Status::Ok();
}

// One fused counting pass of the entries with key > key_thr into p->c (with values; masked when
// mt is given and the backend masks in the pass); fails on non-finite input (nothing masked
// then). The sum of squares (pass->sumsq) is computed only when asked for: the pass is cheaper
// without it. A previous pass's masking must have been undone (Unmask) or taken.
struct Pass {
  uint64_t count = 0;
  double sumsq = 0.0;
};
enum class SumSq { kSkip, kWant };
Status CountPassKey(BackendContext* be, const MaskTarget* mt, const float* x, size_t d,
                    int64_t key_thr, uint64_t cap, Picked* p, SumSq want, Pass* pass) {
  uint64_t nonfinite = 0;
  pass->sumsq = 0.0;
  double* const ss = want == SumSq::kWant ? &pass->sumsq : nullptr;
  p->chosen = false;
  if (mt != nullptr) {
    SIEVE_RETURN_IF_ERROR(be->CountCollectMask(mt->r, d, key_thr, cap, mt->keep, &p->c,
                                               &pass->count, &nonfinite, ss));
  } else {
    p->c.masked = false;
    SIEVE_RETURN_IF_ERROR(be->CountCollectValues(x, d, key_thr, cap, &p->c.idx, &p->c.vals,
                                                 &pass->count, &nonfinite, ss));
  }
  if (nonfinite != 0) return NonFiniteResidual(nonfinite);
  return Status::Ok();
}
Status CountPass(BackendContext* be, const MaskTarget* mt, const float* x, size_t d, float thr,
                 uint64_t cap, Picked* p, SumSq want, Pass* pass) {
  return CountPassKey(be, mt, x, d, KeyThreshold(thr), cap, p, want, pass);
}

// p->keys = the keys of p->c.vals.
const std::vector<uint32_t>& Keys(Picked* p) {
  const std::vector<float>& vals = p->c.vals;
  p->keys.resize(vals.size());
  for (size_t j = 0; j < vals.size(); ++j) {
    p->keys[j] = std::bit_cast<uint32_t>(vals[j]) & 0x7fffffffu;
  }
  return p->keys;
}

// The (rank+1)-th largest of keys (rank < keys.size()): nth_element over a copy in *order.
uint32_t KeyAtRank(const std::vector<uint32_t>& keys, size_t rank, std::vector<uint32_t>* order) {
  order->assign(keys.begin(), keys.end());
  std::nth_element(order->begin(), order->begin() + rank, order->end(), std::greater<uint32_t>());
  return (*order)[rank];
}

// p->c.vals gathered from x where the pass did not take them.
Status EnsureValues(BackendContext* be, const float* x, Picked* p) {
  Collected& c = p->c;
  if (c.vals.size() == c.idx.size()) return Status::Ok();
  c.vals.resize(c.idx.size());
  return be->GatherMask(x, c.idx.data(), c.idx.size(), c.vals.data(), nullptr, nullptr,
                        ValuePrecision::kFp32);
}

// Exact top-k (ties toward the lower index) among the candidates p->c (ascending), taken as the
// selection: the k-th largest key among them, then, in index order, every candidate above it and
// the first ones equal to it until k.
Status TopkAmong(BackendContext* be, const MaskTarget* mt, const float* x, uint64_t k, Picked* p) {
  SIEVE_RETURN_IF_ERROR(EnsureValues(be, x, p));
  const size_t n = p->c.idx.size();
  std::vector<uint32_t>& pos = p->pos;
  pos.clear();
  if (n <= k) {
    pos.resize(n);
    for (size_t j = 0; j < n; ++j) pos[j] = static_cast<uint32_t>(j);
    return Take(be, mt, pos, p);
  }
  if (k == 0) return Take(be, mt, pos, p);
  const std::vector<uint32_t>& keys = Keys(p);
  const uint32_t kth = KeyAtRank(keys, k - 1, &p->order);
  uint64_t above = 0;
  for (uint32_t key : keys) above += key > kth;
  uint64_t ties = k - above;  // entries equal to kth to take, lowest indices first
  pos.reserve(k);
  for (size_t j = 0; j < n; ++j) {
    if (keys[j] > kth) {
      pos.push_back(static_cast<uint32_t>(j));
    } else if (keys[j] == kth && ties > 0) {
      pos.push_back(static_cast<uint32_t>(j));
      --ties;
    }
  }
  return Take(be, mt, pos, p);
}

void AllIndices(size_t d, std::vector<uint32_t>* idx) {
  idx->resize(d);
  for (size_t i = 0; i < d; ++i) (*idx)[i] = static_cast<uint32_t>(i);
}

// Every entry as a candidate (unmasked).
Status AllCandidates(BackendContext* be, const float* x, size_t d, Picked* p) {
  p->chosen = false;
  p->c.masked = false;
  AllIndices(d, &p->c.idx);
  p->c.vals.resize(d);
  return be->ToHost(x, d, p->c.vals.data());
}

// Exact top-k: one histogram pass over the top 12 magnitude bits, one pass collecting the
// entries at or above the boundary bin, then an exact selection among those candidates.
Status RunTopkHistogram(BackendContext* be, const MaskTarget* mt, const float* x, size_t d,
                        uint64_t k, Selection* out, Picked* p) {
  std::vector<uint64_t> hist;
  Moments mom;
  SIEVE_RETURN_IF_ERROR(be->KeyHistogram(x, d, &hist, &mom));
  if (mom.nonfinite != 0) return NonFiniteResidual(mom.nonfinite);
  out->sumsq_total = mom.sumsq;
  uint64_t above = 0;
  size_t bin = kKeyHistBins;
  while (bin > 0) {
    --bin;
    if (above + hist[bin] >= k) break;
    above += hist[bin];
  }
  const uint64_t candidates = above + hist[bin];
  const int64_t key_thr = static_cast<int64_t>(bin << kKeyHistShift) - 1;
  Pass pass;
  SIEVE_RETURN_IF_ERROR(CountPassKey(be, mt, x, d, key_thr, candidates, p, SumSq::kSkip, &pass));
  if (pass.count != candidates || p->c.idx.size() != candidates) {
    SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));
    return InternalError("topk: candidate count mismatch");
  }
  return TopkAmong(be, mt, x, k, p);
}

// Exact top-k. On the CPU with k ≥ kTopkSampleMinK: a cutoff from a strided sample, one fused
// count + collect + Σr² pass above it, the exact selection among those candidates (every entry
// of the top-k lies above the cutoff once at least k do). Otherwise, or when the cutoff leaves
// fewer than k or more than the cap, the histogram path.
Status RunTopk(BackendContext* be, const MaskTarget* mt, const float* x, size_t d, uint64_t k,
               Selection* out, Picked* p) {
  if (be->device() != Device::kCpu || k < cc::kTopkSampleMinK) {
    return RunTopkHistogram(be, mt, x, d, k, out, p);
  }
  // About kTopkSampleAbove/ρ entries, and at least kTopkSampleMinSize where d allows.
  const size_t stride = std::max<size_t>(
      1, std::min(static_cast<size_t>(static_cast<double>(k) / cc::kTopkSampleAbove),
                  d / cc::kTopkSampleMinSize));
  std::vector<float>& sample = p->sample;
  SIEVE_RETURN_IF_ERROR(be->StridedSampleAbs(x, d, stride / 2, stride, &sample));
  const double expect = static_cast<double>(k) * static_cast<double>(sample.size()) /
                        static_cast<double>(d);  // sample entries expected in the top-k
  const size_t rank = static_cast<size_t>(
      std::ceil(expect + cc::kTopkSampleSigmas * std::sqrt(std::max(expect, 1.0))));
  if (rank >= sample.size()) return RunTopkHistogram(be, mt, x, d, k, out, p);
  std::vector<uint32_t>& keys = p->keys;
  keys.resize(sample.size());
  for (size_t j = 0; j < sample.size(); ++j) keys[j] = std::bit_cast<uint32_t>(sample[j]);
  std::nth_element(keys.begin(), keys.begin() + rank, keys.end(), std::greater<uint32_t>());
  const uint64_t cap = static_cast<uint64_t>(cc::kTopkSampleCapFactor * static_cast<double>(k));
  Pass pass;
  SIEVE_RETURN_IF_ERROR(CountPassKey(be, mt, x, d, keys[rank], cap, p, SumSq::kWant, &pass));
  if (pass.count < k || pass.count > cap) {
    SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));
    return RunTopkHistogram(be, mt, x, d, k, out, p);
  }
  out->sumsq_total = pass.sumsq;
  return TopkAmong(be, mt, x, k, p);
}

struct Band {
  uint64_t lo, hi;
  bool Contains(uint64_t c) const { return c >= lo && c <= hi; }
};

Band MakeBand(uint64_t k, double lo, double hi) {
  Band b{static_cast<uint64_t>(std::ceil(lo * static_cast<double>(k))),
         static_cast<uint64_t>(std::floor(hi * static_cast<double>(k)))};
  b.lo = std::max<uint64_t>(b.lo, 1);
  b.hi = std::max(b.hi, b.lo);
  return b;
}

// mean + Φ⁻¹(1 − ρ/2)·std (unbiased std), the paper's first guess. Fills sumsq_total.
Status GaussianGuess(BackendContext* be, const float* x, size_t d, uint64_t k, Selection* out,
                     float* thr) {
  Moments mom;
  SIEVE_RETURN_IF_ERROR(be->ComputeMoments(x, d, &mom));
  if (mom.nonfinite != 0) return NonFiniteResidual(mom.nonfinite);
  out->sumsq_total = mom.sumsq;
  const double n = static_cast<double>(d);
  const double mean = mom.sum / n;
  const double var = d > 1 ? std::max(0.0, (mom.sumsq - n * mean * mean) / (n - 1.0)) : 0.0;
  const double rho = static_cast<double>(k) / n;
  *thr = static_cast<float>(mean + NormalQuantile(1.0 - rho / 2.0) * std::sqrt(var));
  return Status::Ok();
}

Status RunGaussianPaper(BackendContext* be, const MaskTarget* mt, const float* x, size_t d,
                        uint64_t k, Selection* out, Picked* p) {
  float thr;
  SIEVE_RETURN_IF_ERROR(GaussianGuess(be, x, d, k, out, &thr));
  const Band band = MakeBand(k, cc::kGaussBandLow, cc::kGaussBandHigh);
  for (int pass_no = 0;; ++pass_no) {
    const bool last = pass_no + 1 == cc::kGaussPaperMaxCounts;
    Pass pass;
    SIEVE_RETURN_IF_ERROR(CountPass(be, mt, x, d, thr, last ? d : band.hi, p, SumSq::kSkip, &pass));
    if (band.Contains(pass.count) || last) {
      out->threshold = thr;
      out->iterations = pass_no;
      p->chosen = true;
      return Status::Ok();
    }
    SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));
    thr = static_cast<float>(thr * (pass.count < band.lo ? cc::kGaussShrink : cc::kGaussGrow));
  }
}

bool Usable(float t) { return t > 0.0f && std::isfinite(t); }

// The warm first guess: prev_threshold, times the drift q = prev/older when that is moderate (a
// growth q > 1 damped to q^growth_power).
float WarmGuess(const SelectOptions& opt, double growth_power) {
  const float prev = opt.prev_threshold;
  if (!Usable(opt.older_threshold)) return prev;
  const double q = static_cast<double>(prev) / opt.older_threshold;
  if (q < cc::kDriftMin || q > cc::kDriftMax || q == 1.0) return prev;
  const float guess = static_cast<float>(prev * (q > 1.0 ? std::pow(q, growth_power) : q));
  return Usable(guess) ? guess : prev;
}

// Φ⁻¹(1 − p/2): the |z| above which a fraction p of a centred Gaussian lies (p in (0, 1)).
double TailZ(double p) { return NormalQuantile(1.0 - p / 2.0); }

// The threshold at which `count` entries out of d lie above, modelling |r| as a centred Gaussian
// of the scale that puts `count_at` entries above `at`: at·z(aim)/z(count_at). When count_at is 0
// or d (no scale to read off), z(aim)·rms. Returns 0 when neither is usable.
double ModelGuess(double at, uint64_t count_at, double aim, size_t d, double rms) {
  const double n = static_cast<double>(d);
  const double p_aim = std::clamp(aim / n, 0.5 / n, 1.0 - 0.5 / n);
  if (count_at > 0 && count_at < d && at > 0.0) {
    return at * TailZ(p_aim) / TailZ(static_cast<double>(count_at) / n);
  }
  return rms > 0.0 ? TailZ(p_aim) * rms : 0.0;
}

// From the candidates p->c (ascending; every index with |x| above some lower threshold, more
// than band.hi of them): the threshold selecting ≤ k of them with |x| > it — the (k+1)-th largest
// |x| — into out->threshold and the selection, or (when ties leave fewer than band.lo above it)
// the exact top-k with exact_fallback set.
Status ThresholdAmong(BackendContext* be, const MaskTarget* mt, const float* x, uint64_t k,
                      const Band& band, Selection* out, Picked* p) {
  SIEVE_RETURN_IF_ERROR(EnsureValues(be, x, p));
  const std::vector<uint32_t>& keys = Keys(p);
  const uint32_t kth = KeyAtRank(keys, k, &p->order);
  uint64_t above = 0;
  for (uint32_t key : keys) above += key > kth;
  if (above < band.lo) {
    out->exact_fallback = true;
    return TopkAmong(be, mt, x, k, p);
  }
  std::vector<uint32_t>& pos = p->pos;
  pos.clear();
  pos.reserve(above);
  for (size_t j = 0; j < keys.size(); ++j) {
    if (keys[j] > kth) pos.push_back(static_cast<uint32_t>(j));
  }
  out->threshold = std::bit_cast<float>(kth);
  return Take(be, mt, pos, p);
}

// gaussiank: first guess (warm or Gaussian), then guesses from a Gaussian tail model fitted to
// the last count (moments when it is 0), safeguarded inside the bracket of the counts above and
// below the band once both exist (log-log secant, every third step a bisection). A count above
// the band but ≤ kGaussCollectFactor·k ends the search among the collected candidates.
Status RunGaussianRobust(BackendContext* be, const MaskTarget* mt, const float* x, size_t d,
                         uint64_t k, const SelectOptions& opt, Selection* out, Picked* p) {
  float thr;
  const bool warm = Usable(opt.prev_threshold);
  if (warm) {
    thr = WarmGuess(opt, cc::kDriftGrowthPower);
  } else {
    SIEVE_RETURN_IF_ERROR(GaussianGuess(be, x, d, k, out, &thr));
  }
  const Band band = MakeBand(k, cc::kGaussBandLow, cc::kGaussBandHigh);
  const uint64_t cap = std::max<uint64_t>(
      band.hi, static_cast<uint64_t>(cc::kGaussCollectFactor * static_cast<double>(k)));
  bool have_lo = false, have_hi = false;  // lo: count above band; hi: count below band
  float lo = 0.0f, hi = 0.0f;
  uint64_t lo_count = 0, hi_count = 0;
  int adj = 0;
  for (;;) {
    Pass pass;
    SIEVE_RETURN_IF_ERROR(CountPass(be, mt, x, d, thr, cap, p,
                                    adj == 0 && warm ? SumSq::kWant : SumSq::kSkip, &pass));
    if (adj == 0 && warm) out->sumsq_total = pass.sumsq;
    out->iterations = adj;
    if (band.Contains(pass.count)) {
      out->threshold = thr;
      p->chosen = true;
      return Status::Ok();
    }
    if (pass.count > band.hi) {
      if (pass.count <= cap) return ThresholdAmong(be, mt, x, k, band, out, p);
      have_lo = true;
      lo = thr;
      lo_count = pass.count;
    } else {
      have_hi = true;
      hi = thr;
      hi_count = pass.count;
    }
    SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));  // the candidates below the band are not taken
    if (adj == cc::kGaussMaxAdjustments) break;
    const double rms = std::sqrt(out->sumsq_total / static_cast<double>(d));
    // Below the band: aim inside the collect window; above it: at k.
    const double aim =
        static_cast<double>(k) * (pass.count < band.lo ? cc::kGaussUndershootAim : 1.0);
    double next = ModelGuess(thr, pass.count, aim, d, rms);
    if (have_lo && have_hi) {
      if (adj % 3 == 2 || hi_count == 0) {
        next = lo + 0.5 * (static_cast<double>(hi) - lo);
      } else {  // secant of log count against log threshold, towards the aim
        const double l0 = std::log(static_cast<double>(lo)), l1 = std::log(static_cast<double>(hi));
        const double c0 = std::log(static_cast<double>(lo_count));
        const double c1 = std::log(static_cast<double>(hi_count));
        next = std::exp(l0 + (std::log(aim) - c0) * (l1 - l0) / (c1 - c0));
      }
      // Keep strictly inside the bracket, away from its ends.
      const double width = static_cast<double>(hi) - lo;
      if (!(next >= lo + 0.1 * width && next <= hi - 0.1 * width)) {
        next = lo + 0.5 * width;
      }
      const float rounded = static_cast<float>(next);
      if (!(rounded > lo && rounded < hi)) break;  // the band falls between two adjacent floats
    } else if (pass.count > band.hi) {
      // Too many: the model's guess; without one the paper's growth (rms from 0). Compared as
      // the float it becomes: a guess that rounds back to thr would count the same again.
      if (!(static_cast<float>(next) > thr) || !std::isfinite(next)) {
        next = thr > 0.0f ? thr * cc::kGaussGrow : rms;
      }
      if (!(static_cast<float>(next) > thr) || !std::isfinite(next)) break;
    } else {
      if (!(thr > 0.0f)) break;  // fewer than band.lo non-zero entries
      // Too few: the model's guess when it moves the float threshold down (with a count of 0
      // after a learning-rate step it can land on the same rms-based guess again); else the
      // paper's shrink.
      if (!(next > 0.0 && static_cast<float>(next) < thr)) next = thr * cc::kGaussShrink;
    }
    thr = static_cast<float>(next);
    ++adj;
  }
  // Last resort: exact top-k over the candidates above the best lower bound (or over all).
  out->exact_fallback = true;
  SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));
  if (have_lo) {
    Pass pass;
    SIEVE_RETURN_IF_ERROR(CountPass(be, mt, x, d, lo, lo_count, p, SumSq::kSkip, &pass));
  } else {
    SIEVE_RETURN_IF_ERROR(AllCandidates(be, x, d, p));
  }
  return TopkAmong(be, mt, x, k, p);
}

// dgc's first guess: the ks-th largest |r| of a seeded strided sample (≈1 %).
Status DgcSampleGuess(BackendContext* be, const float* x, size_t d, uint64_t k, uint64_t seed,
                      float* thr) {
  std::mt19937_64 rng(seed);
  const size_t stride = std::min<size_t>(cc::kDgcSampleStride, d);
  const size_t start = static_cast<size_t>(rng() % stride);
  std::vector<float> sample;
  SIEVE_RETURN_IF_ERROR(be->StridedSampleAbs(x, d, start, stride, &sample));
  for (float v : sample) {
    if (!std::isfinite(v)) return NonFiniteResidual(1);
  }
  const double rho = static_cast<double>(k) / static_cast<double>(d);
  // ks entries of the sample should lie strictly above the threshold.
  const size_t ks =
      std::max<size_t>(1, static_cast<size_t>(std::ceil(rho * static_cast<double>(sample.size()))));
  if (ks >= sample.size()) {
    *thr = -1.0f;
  } else {
    std::nth_element(sample.begin(), sample.begin() + ks, sample.end(), std::greater<float>());
    *thr = sample[ks];
  }
  return Status::Ok();
}

Status RunDgc(BackendContext* be, const MaskTarget* mt, const float* x, size_t d, uint64_t k,
              const SelectOptions& opt, Selection* out, Picked* p) {
  float thr;
  const bool warm = Usable(opt.prev_threshold);
  if (warm) {
    thr = WarmGuess(opt, 1.0);  // dgc misses are not collected: the full drift
  } else {
    SIEVE_RETURN_IF_ERROR(DgcSampleGuess(be, x, d, k, opt.seed, &thr));
  }
  const Band band = MakeBand(k, cc::kDgcBandLow, cc::kDgcBandHigh);
  Pass pass;
  for (int adj = 0;; ++adj) {
    SIEVE_RETURN_IF_ERROR(
        CountPass(be, mt, x, d, thr, band.hi, p, adj == 0 ? SumSq::kWant : SumSq::kSkip, &pass));
    if (adj == 0) out->sumsq_total = pass.sumsq;
    out->iterations = adj;
    out->threshold = thr;
    if (band.Contains(pass.count) || adj == cc::kDgcMaxAdjustments) break;
    SIEVE_RETURN_IF_ERROR(Unmask(be, mt, p));  // before the sample below reads x
    if (adj == 0 && warm) {
      // The previous threshold missed (the residual's scale moved): re-estimate from the sample.
      float fresh;
      SIEVE_RETURN_IF_ERROR(DgcSampleGuess(be, x, d, k, opt.seed, &fresh));
      if (fresh != thr) {
        thr = fresh;
        continue;
      }
    }
    if (pass.count > band.hi) {
      const double rms = std::sqrt(out->sumsq_total / static_cast<double>(d));
      const float next =
          thr > 0.0f ? static_cast<float>(thr * cc::kDgcGrow) : static_cast<float>(rms);
      if (!(next > thr)) break;
      thr = next;
    } else {
      if (!(thr > 0.0f)) break;
      thr = static_cast<float>(thr * cc::kDgcShrink);
    }
  }
  if (pass.count > band.hi) {  // nothing collected (nor masked) above the cap
    out->exact_fallback = true;
    SIEVE_RETURN_IF_ERROR(CountPass(be, mt, x, d, thr, pass.count, p, SumSq::kSkip, &pass));
    return TopkAmong(be, mt, x, k, p);
  }
  p->chosen = true;
  return Status::Ok();  // in band, or below it after the last adjustment (accepted)
}

void RandomIndices(size_t d, uint64_t k, uint64_t seed, std::vector<uint32_t>* idx) {
  std::mt19937_64 rng(seed);
  idx->clear();
  if (k <= d / 8) {
    // Floyd's sampling: k draws, each distinct.
    std::unordered_set<uint64_t> seen;
    seen.reserve(k * 2);
    for (uint64_t j = d - k; j < d; ++j) {
      const uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(rng);
      const uint64_t pick = seen.insert(t).second ? t : j;
      if (pick == j) seen.insert(j);
      idx->push_back(static_cast<uint32_t>(pick));
    }
    std::sort(idx->begin(), idx->end());
  } else {
    // Selection sampling (one sequential scan): keep i with probability need / remaining.
    idx->reserve(k);
    uint64_t need = k;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (uint64_t i = 0; i < d && need > 0; ++i) {
      if (u(rng) * static_cast<double>(d - i) < static_cast<double>(need)) {
        idx->push_back(static_cast<uint32_t>(i));
        --need;
      }
    }
  }
}

// Fills threshold, iterations, sumsq_total and the choice: dense, out->indices, or (p->chosen)
// the candidates p->c with their values, masked at them where p->c.masked. On an error p->c may
// be left masked (the caller restores it). Finish completes the selection.
Status SelectIndices(BackendContext* be, Compressor c, const MaskTarget* mt, const float* x,
                     size_t d, uint64_t k, const SelectOptions& opt, Selection* out, Picked* p) {
  SIEVE_RETURN_IF_ERROR(CheckDims(d, k));
  Selection s;
  s.dim = d;
  s.threshold = kNaN;
  const bool trivial = k == 0 || k == d || c == Compressor::kNone || c == Compressor::kRandomk;
  if (trivial) {
    Moments mom;
    SIEVE_RETURN_IF_ERROR(be->ComputeMoments(x, d, &mom));
    if (mom.nonfinite != 0) return NonFiniteResidual(mom.nonfinite);
    s.sumsq_total = mom.sumsq;
    if (c == Compressor::kNone) {
      s.dense = true;
    } else if (k == d) {
      AllIndices(d, &s.indices);
    } else if (c == Compressor::kRandomk) {
      RandomIndices(d, k, opt.seed, &s.indices);
    }
    *out = std::move(s);
    return Status::Ok();
  }
  switch (c) {
    case Compressor::kTopk:
      SIEVE_RETURN_IF_ERROR(RunTopk(be, mt, x, d, k, &s, p));
      break;
    case Compressor::kGaussiankPaper:
      SIEVE_RETURN_IF_ERROR(RunGaussianPaper(be, mt, x, d, k, &s, p));
      break;
    case Compressor::kGaussiank:
      SIEVE_RETURN_IF_ERROR(RunGaussianRobust(be, mt, x, d, k, opt, &s, p));
      break;
    case Compressor::kDgc:
      SIEVE_RETURN_IF_ERROR(RunDgc(be, mt, x, d, k, opt, &s, p));
      break;
    default:
      return InternalError("unhandled compressor");
  }
  *out = std::move(s);
  return Status::Ok();
}

// Gathers the values (masking r and m when given) and the selected sum of squares.
// values[j] = RoundToPrecision(values[j], p), the same function the backends' masks subtract.
void RoundValues(ValuePrecision p, std::vector<float>* values) {
  if (p == ValuePrecision::kFp32) return;
  for (float& v : *values) v = backend_internal::RoundToPrecision(v, p);
}

// out's values from the choice of SelectIndices: p's candidates when chosen, else gathered from x
// at out->indices; with mt, r[S] = the rounding error of each value in precision mt->keep (0 for
// kFp32) and m[S] = 0 (r only when dense), unless the counting pass has masked them already. The
// statistics (sumsq_selected, threshold) are those of the unrounded values; the values are then
// rounded.
Status Finish(BackendContext* be, const MaskTarget* mt, const float* x, Picked* p, Selection* out) {
  const ValuePrecision round = mt != nullptr ? mt->keep : ValuePrecision::kFp32;
  if (out->dense) {
    out->values.resize(out->dim);
    SIEVE_RETURN_IF_ERROR(be->ToHost(x, out->dim, out->values.data()));
    if (mt != nullptr) SIEVE_RETURN_IF_ERROR(be->KeepRoundingError(mt->r, out->dim, round));
    out->sumsq_selected = out->sumsq_total;
    RoundValues(round, &out->values);
    return Status::Ok();
  }
  bool have_values = false;
  if (p->chosen) {
    out->indices = std::move(p->c.idx);
    out->values = std::move(p->c.vals);
    have_values = out->values.size() == out->indices.size();
  }
  out->values.resize(out->indices.size());
  if (p->chosen && p->c.masked) {  // r masked in the pass: m's turn (null: m kept)
    if (mt->m != nullptr) {
      SIEVE_RETURN_IF_ERROR(be->ZeroAt(mt->m, out->indices.data(), out->indices.size()));
    }
  } else if (!have_values || mt != nullptr) {
    SIEVE_RETURN_IF_ERROR(be->GatherMask(x, out->indices.data(), out->indices.size(),
                                         out->values.data(), mt != nullptr ? mt->r : nullptr,
                                         mt != nullptr ? mt->m : nullptr, round));
  }
  double ss = 0.0;
  float min_abs = std::numeric_limits<float>::infinity();
  for (float v : out->values) {
    ss += static_cast<double>(v) * v;
    min_abs = std::min(min_abs, std::fabs(v));
  }
  out->sumsq_selected = ss;
  if ((std::isnan(out->threshold) || out->exact_fallback) && !out->values.empty() &&
      out->indices.size() != out->dim) {
    out->threshold = min_abs;  // exact top-k: the k-th largest |r|
  }
  RoundValues(round, &out->values);
  return Status::Ok();
}

}  // namespace

double ContractionRatio(double sumsq_total, double sumsq_selected) {
  if (!(sumsq_total > 0.0)) return 0.0;
  return std::clamp((sumsq_total - sumsq_selected) / sumsq_total, 0.0, 1.0);
}

double Selection::ContractionRatio() const {
  return sieve::ContractionRatio(sumsq_total, sumsq_selected);
}

uint64_t KForDensity(double density, uint64_t d) {
  if (!(density > 0.0)) return 0;
  if (density >= 1.0) return d;
  const auto k = static_cast<uint64_t>(std::llround(density * static_cast<double>(d)));
  return std::clamp<uint64_t>(k, d > 0 ? 1 : 0, d);
}

Status Select(Device device, Compressor compressor, const float* x, size_t d, uint64_t k,
              const SelectOptions& options, Selection* out) {
  if (options.round_values != ValuePrecision::kFp32) {
    return InvalidArgumentError(
        "round_values needs a residual to keep the rounding error: use ErrorFeedback::Select");
  }
  SIEVE_ASSIGN_OR_RETURN(Backend * be, GetBackend(device));
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<BackendContext> ctx, be->NewContext());
  Selection s;
  Picked p;
  SIEVE_RETURN_IF_ERROR(SelectIndices(ctx.get(), compressor, nullptr, x, d, k, options, &s, &p));
  SIEVE_RETURN_IF_ERROR(Finish(ctx.get(), nullptr, x, &p, &s));
  if (compressor == Compressor::kRandomk) s.threshold = kNaN;
  *out = std::move(s);
  return Status::Ok();
}

// ------------------------------------------------------------------------------ ErrorFeedback

// Select's candidates and scratch, kept between calls.
struct ErrorFeedback::Scratch {
  Picked picked;
};

ErrorFeedback::ErrorFeedback(std::unique_ptr<BackendContext> ctx, size_t d, float* m, float* r)
    : ctx_(std::move(ctx)), d_(d), m_(m), r_(r), scratch_(std::make_unique<Scratch>()) {}

ErrorFeedback::~ErrorFeedback() {
  ctx_->Free(m_);
  ctx_->Free(r_);
}

Device ErrorFeedback::device() const { return ctx_->device(); }

StatusOr<std::unique_ptr<ErrorFeedback>> ErrorFeedback::Create(Device device, size_t d) {
  SIEVE_RETURN_IF_ERROR(CheckDims(d, 0));
  SIEVE_ASSIGN_OR_RETURN(Backend * be, GetBackend(device));
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<BackendContext> ctx, be->NewContext());
  SIEVE_ASSIGN_OR_RETURN(float* m, ctx->Alloc(d));
  StatusOr<float*> r = ctx->Alloc(d);
  if (!r.ok()) {
    ctx->Free(m);
    return r.status();
  }
  return std::unique_ptr<ErrorFeedback>(new ErrorFeedback(std::move(ctx), d, m, *r));
}

Status ErrorFeedback::Accumulate(std::span<const float> grad_host, float momentum, float lr) {
  if (grad_host.size() != d_) {
    return InvalidArgumentError("gradient has " + std::to_string(grad_host.size()) +
                                " entries, expected " + std::to_string(d_));
  }
  SIEVE_RETURN_IF_ERROR(CheckMomentum(momentum, lr));
  return ctx_->MomentumAccumulateFromHost(m_, r_, grad_host.data(), d_, momentum, lr);
}

Status ErrorFeedback::AccumulateDevice(const float* grad_dev, float momentum, float lr) {
  if (grad_dev == nullptr) return InvalidArgumentError("null gradient");
  SIEVE_RETURN_IF_ERROR(CheckMomentum(momentum, lr));
  return ctx_->MomentumAccumulate(m_, r_, grad_dev, d_, momentum, lr);
}

Status ErrorFeedback::Select(Compressor compressor, uint64_t k, const SelectOptions& options,
                             Selection* out) {
  Selection s;
  Picked& p = scratch_->picked;
  p.chosen = false;
  p.c.masked = false;
  p.c.idx.clear();
  p.c.vals.clear();
  const MaskTarget mt{r_, options.mask_momentum ? m_ : nullptr, options.round_values};
  // The counting pass may mask r and m at its candidates (CPU); on an error they are restored.
  if (Status st = SelectIndices(ctx_.get(), compressor, &mt, r_, d_, k, options, &s, &p);
      !st.ok()) {
    if (p.c.masked) static_cast<void>(ctx_->RestoreMasked(r_, p.c, nullptr));
    return st;
  }
  SIEVE_RETURN_IF_ERROR(Finish(ctx_.get(), &mt, r_, &p, &s));
  if (compressor == Compressor::kRandomk) s.threshold = kNaN;
  // The caller's previous result buffers become the next call's candidate buffers: a caller
  // that reuses its Selection round after round touches no fresh pages.
  std::vector<uint32_t> old_idx = std::move(out->indices);
  std::vector<float> old_vals = std::move(out->values);
  *out = std::move(s);
  if (p.c.idx.capacity() < old_idx.capacity()) p.c.idx = std::move(old_idx);
  if (p.c.vals.capacity() < old_vals.capacity()) p.c.vals = std::move(old_vals);
  return Status::Ok();
}

Status ErrorFeedback::SigmaHistogram(double width_sigma, int bins,
                                     std::vector<uint64_t>* counts) const {
  if (bins < 2 || bins > 4096) return InvalidArgumentError("bins must be in [2, 4096]");
  if (!(width_sigma > 0.0) || !std::isfinite(width_sigma)) {
    return InvalidArgumentError("width_sigma must be positive and finite");
  }
  Moments mom;
  SIEVE_RETURN_IF_ERROR(ctx_->ComputeMoments(r_, d_, &mom));
  if (mom.nonfinite != 0) return NonFiniteResidual(mom.nonfinite);
  const double n = static_cast<double>(d_);
  const double mean = mom.sum / n;
  double sigma = std::sqrt(std::max(0.0, mom.sumsq / n - mean * mean));
  if (!(sigma > 0.0)) sigma = 1.0;  // constant r: everything lands in the centre bin(s)
  return ctx_->SigmaHistogram(r_, d_, mean, sigma, width_sigma, bins, counts);
}

Status ErrorFeedback::Synchronize() { return ctx_->Synchronize(); }

Status ErrorFeedback::ReturnUnapplied(std::span<const uint32_t> indices,
                                      std::span<const float> values) {
  if (indices.size() != values.size()) {
    return InvalidArgumentError("ReturnUnapplied: " + std::to_string(indices.size()) +
                                " indices, " + std::to_string(values.size()) + " values");
  }
  std::vector<bool> seen(indices.empty() ? 0 : d_, false);
  for (uint32_t i : indices) {
    if (i >= d_) {
      return InvalidArgumentError("ReturnUnapplied: index " + std::to_string(i) +
                                  " >= d = " + std::to_string(d_));
    }
    if (seen[i])
      return InvalidArgumentError("ReturnUnapplied: index " + std::to_string(i) + " repeated");
    seen[i] = true;
  }
  if (indices.empty()) return Status::Ok();
  return ctx_->AddAt(r_, d_, indices.data(), values.data(), indices.size());
}

Status ErrorFeedback::ReadState(std::vector<float>* m, std::vector<float>* r) const {
  if (m != nullptr) {
    m->resize(d_);
    SIEVE_RETURN_IF_ERROR(ctx_->ToHost(m_, d_, m->data()));
  }
  if (r != nullptr) {
    r->resize(d_);
    SIEVE_RETURN_IF_ERROR(ctx_->ToHost(r_, d_, r->data()));
  }
  return Status::Ok();
}

Status ErrorFeedback::WriteState(std::span<const float> m, std::span<const float> r) {
  if (m.size() != d_ || r.size() != d_) {
    return InvalidArgumentError("state must have " + std::to_string(d_) + " entries");
  }
  SIEVE_RETURN_IF_ERROR(ctx_->FromHost(m.data(), d_, m_));
  return ctx_->FromHost(r.data(), d_, r_);
}

}  // namespace sieve
