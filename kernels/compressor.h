// Compressor: the selection operators of kernels/ (Shi et al., "Understanding Top-k
// Sparsification in Distributed Deep Learning", and its baselines), their names on the command
// line, and every tuning constant of the threshold-based operators, documented in one place.
// Thread-safety: constants and pure functions only.
#ifndef SIEVE_KERNELS_COMPRESSOR_H_
#define SIEVE_KERNELS_COMPRESSOR_H_

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace sieve {

enum class Compressor {
  kNone,            // dense: every entry is sent; no index array is ever materialized
  kTopk,            // exact k largest |r|, ties broken toward the lower index
  kGaussiank,       // Gaussian first guess, then bracket + bisect into the count band (default)
  kGaussiankPaper,  // the paper code's rule: first guess + at most 3 ×0.5/×1.5 adjustments
  kDgc,             // Deep Gradient Compression: threshold from a ~1% strided random sample
  kRandomk,         // k distinct uniform indices from a seeded generator
};

// Accepts exactly: none, topk, gaussiank, gaussiank_paper, dgc, randomk.
StatusOr<Compressor> ParseCompressor(std::string_view name);
std::string_view CompressorName(Compressor c);

// Tuning constants. "count" below is the number of entries with |r| > threshold; k is the target.
namespace compressor_constants {
// gaussiank_paper and gaussiank: the accepted band is [kBandLow·k, kBandHigh·k].
inline constexpr double kGaussBandLow = 2.0 / 3.0;
inline constexpr double kGaussBandHigh = 4.0 / 3.0;
// Threshold factors of the paper rule (count too low → ×0.5, too high → ×1.5).
inline constexpr double kGaussShrink = 0.5;
inline constexpr double kGaussGrow = 1.5;
// The paper rule counts at most this many times (the last count is accepted as is).
inline constexpr int kGaussPaperMaxCounts = 3;
// gaussiank: at most this many counting passes after the first guess (bracket expansion by the
// paper factors, then bisection); beyond that, an exact top-k over the candidates decides.
inline constexpr int kGaussMaxAdjustments = 30;
// gaussiank: every counting pass collects the indices above its threshold while the count is at
// most kGaussCollectFactor·k; a count above the band but within that cap is resolved by
// choosing the threshold among the collected values (no further pass). After a count below the
// band the next guess aims at kGaussUndershootAim·k, inside that window.
inline constexpr double kGaussCollectFactor = 4.0;
inline constexpr double kGaussUndershootAim = 2.0;
// gaussiank / dgc warm start: a drift prev/older of the last two thresholds within
// [kDriftMin, kDriftMax] is extrapolated into the first guess (SelectOptions::older_threshold).
inline constexpr double kDriftMin = 0.8;
inline constexpr double kDriftMax = 1.25;
// gaussiank extrapolates a growing drift q > 1 as q^kDriftGrowthPower (dgc: q): while the residual
// fills up after the start its growth slows down, and a full q, once accepted, reproduces itself
// round after round (the accepted guess becomes the next prev) and overshoots until a count falls
// below the band (bench ef_gaussiank, d = 1e7, rounds 15–44: 1.4 → 1.0 passes per round at ρ =
// 0.001). A decay (q < 1, the tail draining after a learning-rate step) is extrapolated in full.
// The slightly low guess this gives costs gaussiank nothing (a count above the band within
// kGaussCollectFactor·k is resolved among the collected entries); dgc, which collects nothing,
// keeps q.
inline constexpr double kDriftGrowthPower = 0.75;
// dgc: sample every kDgcSampleStride-th entry (≈1%) starting at a seeded random offset.
inline constexpr unsigned kDgcSampleStride = 100;
// dgc: accepted band [kDgcBandLow·k, kDgcBandHigh·k]; count too high → thr×kDgcGrow, too low →
// thr×kDgcShrink, at most kDgcMaxAdjustments times; still above the band → exact top-k over the
// candidates; still below → accepted. A warm start (SelectOptions::prev_threshold) whose first
// count misses the band re-estimates from the sample before these steps.
inline constexpr double kDgcBandLow = 0.8;
inline constexpr double kDgcBandHigh = 1.3;
inline constexpr double kDgcGrow = 1.3;
inline constexpr double kDgcShrink = 0.8;
inline constexpr int kDgcMaxAdjustments = 10;
// topk on the CPU backend with k ≥ kTopkSampleMinK: a strided sample of about
// kTopkSampleAbove/ρ entries (every k/kTopkSampleAbove-th, so at least every 64th) sets a cutoff
// with kTopkSampleAbove + kTopkSampleSigmas·√kTopkSampleAbove sample entries above it (≈1.4·k
// entries of r expected); one fused pass collects the entries above it (with Σr²) and the exact
// top-k is taken among them. Fewer than k or more than kTopkSampleCapFactor·k → the histogram
// path (histogram of the top 12 key bits, then a collect at the boundary bin).
inline constexpr uint64_t kTopkSampleMinK = 4096;
// ... and the sample holds at least this many entries where d allows (every d/this-th entry), so
// that at larger ρ the cutoff sits closer to the k-th largest (≈1.12·k entries above it at ρ =
// 0.01, d = 1e7) for a sample still touching at most ~10 % of r's cache lines.
// kTopkSampleSigmas: the sample count above the cutoff is about Poisson; 3σ leaves fewer than k
// entries above it (the histogram path, two more passes) about once in 700 calls, and takes ~7 %
// fewer candidates at ρ = 0.01 than 5σ did (the selection among them and the restore of those left
// out: ef_topk 2.68, 2.90 → 2.40, 2.76 reads, 1 thread, alternated, load 6.7–7.9).
inline constexpr size_t kTopkSampleMinSize = 65536;
inline constexpr double kTopkSampleAbove = 64.0;
inline constexpr double kTopkSampleSigmas = 3.0;
inline constexpr double kTopkSampleCapFactor = 4.0;
}  // namespace compressor_constants

}  // namespace sieve

#endif  // SIEVE_KERNELS_COMPRESSOR_H_
