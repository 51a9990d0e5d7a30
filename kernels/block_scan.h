// The CPU backend's fused counting scan (count + collect + mask + Σx² in one pass over x), with
// the block compare written once per x86 vector width and chosen at run time, so that one binary
// uses the widest the CPU has (AVX-512 or AVX2) and still runs on plain x86-64 (SSE2) or elsewhere
// (scalar).
//
// At SSE2 width the scan is compute-bound where the cache holds the vector (d = 1e7 in a 480 MiB
// L3, 1 thread: 3.19 ms against 1.73 at AVX-512); it prefetches 1 KiB ahead, without which one
// core keeps too few lines in flight (bench/README.md, "The worker's path on a new CPU").
//
// Every level computes the same result bit for bit: the same hits, and the same float Σx² per
// 64-entry block (the same 16 partial sums, added in the same order, mul and add rounded
// separately), so a job's selection never depends on which CPU ran it.
//
// Thread-safety: ScanAbove is a pure function of its inputs (writes only through `out`'s buffers);
// concurrent calls on disjoint outputs are safe.
#ifndef SIEVE_KERNELS_BLOCK_SCAN_H_
#define SIEVE_KERNELS_BLOCK_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/value_precision.h"

namespace sieve {
namespace backend_internal {

enum class SimdLevel { kScalar, kSse2, kAvx2, kAvx512 };

// The widest level this CPU runs and this build can emit (kAvx512 needs AVX-512F and BW).
SimdLevel BestSimdLevel();
// True when this CPU can run `level` (kScalar always; kSse2 on every x86-64).
bool SimdLevelSupported(SimdLevel level);
std::string_view SimdLevelName(SimdLevel level);

// What a scan of x[lo, hi) selects into: the entries with AbsKey(x[i]) > key_thr (key_thr < 0:
// every finite entry). The first `need` hits are written in index order to idx[0, need) and, where
// non-null, their values to vals and KeptResidual(x[i], keep) to mask_r[i] (mask_r may alias x:
// each entry is read before it is written). Non-finite entries are counted, never selected.
struct ScanOut {
  uint32_t* idx = nullptr;  // ≥ need entries
  float* vals = nullptr;    // ≥ need entries, or null
  float* mask_r = nullptr;  // x's length, or null
  ValuePrecision keep = ValuePrecision::kFp32;
  uint64_t need = 0;
  // Results (overwritten):
  uint64_t count = 0;      // hits, including those past `need`
  uint64_t nonfinite = 0;  // NaN/±Inf entries
  double sumsq = 0.0;      // Σx² over the finite entries, when asked for; else 0
};

// One pass over x[lo, hi) at `level` (one this CPU does not support runs as BestSimdLevel()). With
// want_sumsq also out->sumsq: float sums per 64-entry block (blocks counted from lo), added in
// double; a block whose float sum is not finite (an overflow, or a NaN/Inf) is summed again in
// double over its finite entries.
void ScanAbove(SimdLevel level, const float* x, size_t lo, size_t hi, int64_t key_thr,
               bool want_sumsq, ScanOut* out);

}  // namespace backend_internal
}  // namespace sieve

#endif  // SIEVE_KERNELS_BLOCK_SCAN_H_
