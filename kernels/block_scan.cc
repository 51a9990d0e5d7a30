#include "kernels/block_scan.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/enum_names.h"
#include "kernels/backend.h"
#include "kernels/backend_functors.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SIEVE_SCAN_X86 1
#define SIEVE_TARGET_AVX2 __attribute__((target("avx2"), flatten))
#define SIEVE_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512bw"), flatten))
#endif

namespace sieve {
namespace backend_internal {
namespace {

constexpr size_t kScanBlock = 64;  // keys compared into one 64-bit hit mask
// Software prefetch distance (entries ahead of the block compared). One core's hardware
// prefetchers alone leave the scan latency-bound: at d = 1e7, 1 thread, Σx², AVX-512, the pass
// took 2.70 ms from L3 and 4.72 ms from DRAM without, 1.50 and 3.92 with 1 KiB ahead (2 KiB and
// 4 KiB into L2 were no better).
constexpr size_t kPrefetchAhead = 256;

// Each level's Mask<kSumSq>(x, t, ss) over one full block x[0, 64): bit j = AbsKey(x[j]) > t (a
// signed compare: keys are < 2^31, and a NaN/±Inf key is above every t < kNonFiniteKey); with
// kSumSq the block's float Σx² into *ss, as 16 partial sums s[e mod 16] added in index order,
// reduced as
// ((s[0..3] + s[4..7]) + (s[8..11] + s[12..15])) lane-wise, then (l0 + l1) + (l2 + l3).

// Visits the set bits of `mask` (block at x + b): counts, collects and masks the hits.
inline void TakeHits(const float* x, size_t b, uint64_t mask, int64_t key_thr, ScanOut* out,
                     uint64_t* c, uint64_t* nf) {
  for (; mask != 0; mask &= mask - 1) {
    const size_t i = b + static_cast<size_t>(std::countr_zero(mask));
    const float xi = x[i];
    const uint32_t key = AbsKey(xi);
    if (key >= kNonFiniteKey) {
      ++*nf;
    } else if (static_cast<int64_t>(key) > key_thr) {
      if (*c < out->need) {
        out->idx[*c] = static_cast<uint32_t>(i);
        if (out->vals != nullptr) out->vals[*c] = xi;
        if (out->mask_r != nullptr) out->mask_r[i] = KeptResidual(xi, out->keep);
      }
      ++*c;
    }
  }
}

struct ScalarLevel {
  template <bool kSumSq>
  static uint64_t Mask(const float* x, int32_t t, float* ss) {
    uint64_t mask = 0;
    float part[16] = {};
    for (size_t i = 0; i < kScanBlock; ++i) {
      mask |= static_cast<uint64_t>(static_cast<int32_t>(AbsKey(x[i])) > t) << i;
      if constexpr (kSumSq) part[i % 16] += x[i] * x[i];
    }
    if constexpr (kSumSq) {
      float lane[4];
      for (int l = 0; l < 4; ++l) lane[l] = (part[l] + part[4 + l]) + (part[8 + l] + part[12 + l]);
      *ss = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    }
    return mask;
  }
};

#if defined(SIEVE_SCAN_X86)
// The four 4-lane partial sums (s[0..3], …, s[12..15]) reduced as the contract above says.
inline float ReduceQuarters(__m128 a0, __m128 a1, __m128 a2, __m128 a3) {
  alignas(16) float lane[4];
  _mm_store_ps(lane, _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

struct Sse2Level {
  template <bool kSumSq>
  static uint64_t Mask(const float* x, int32_t t, float* ss) {
    const __m128i abs_bits = _mm_set1_epi32(0x7fffffff);
    const __m128i tv = _mm_set1_epi32(t);
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    uint64_t mask = 0;
    for (int j = 0; j < 16; ++j) {
      const __m128 v = _mm_loadu_ps(x + 4 * j);
      const __m128i gt = _mm_cmpgt_epi32(_mm_and_si128(_mm_castps_si128(v), abs_bits), tv);
      mask |= static_cast<uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(gt))) << (4 * j);
      if constexpr (kSumSq) acc[j & 3] = _mm_add_ps(acc[j & 3], _mm_mul_ps(v, v));
    }
    if constexpr (kSumSq) *ss = ReduceQuarters(acc[0], acc[1], acc[2], acc[3]);
    return mask;
  }
};

struct Avx2Level {
  template <bool kSumSq>
  SIEVE_TARGET_AVX2 static uint64_t Mask(const float* x, int32_t t, float* ss) {
    const __m256i abs_bits = _mm256_set1_epi32(0x7fffffff);
    const __m256i tv = _mm256_set1_epi32(t);
    // acc[0] holds s[0..7], acc[1] s[8..15].
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    uint64_t mask = 0;
    for (int j = 0; j < 8; ++j) {
      const __m256 v = _mm256_loadu_ps(x + 8 * j);
      const __m256i gt = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(v), abs_bits), tv);
      mask |=
          static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(gt))))
          << (8 * j);
      if constexpr (kSumSq) acc[j & 1] = _mm256_add_ps(acc[j & 1], _mm256_mul_ps(v, v));
    }
    if constexpr (kSumSq) {
      *ss = ReduceQuarters(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1),
                           _mm256_castps256_ps128(acc[1]), _mm256_extractf128_ps(acc[1], 1));
    }
    return mask;
  }
};

struct Avx512Level {
  template <bool kSumSq>
  SIEVE_TARGET_AVX512 static uint64_t Mask(const float* x, int32_t t, float* ss) {
    const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff);
    const __m512i tv = _mm512_set1_epi32(t);
    __m512 acc = _mm512_setzero_ps();  // s[0..15]
    uint64_t mask = 0;
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + 16 * j);
      const __mmask16 gt =
          _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), abs_bits), tv);
      mask |= static_cast<uint64_t>(gt) << (16 * j);
      if constexpr (kSumSq) acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
    }
    if constexpr (kSumSq) {
      *ss = ReduceQuarters(
          _mm512_maskz_extractf32x4_ps(0xf, acc, 0), _mm512_maskz_extractf32x4_ps(0xf, acc, 1),
          _mm512_maskz_extractf32x4_ps(0xf, acc, 2), _mm512_maskz_extractf32x4_ps(0xf, acc, 3));
    }
    return mask;
  }
};
#endif  // SIEVE_SCAN_X86

// Σx² of the finite entries of x[b, e), in double (a block whose float sum overflowed).
double ExactSumSq(const float* x, size_t b, size_t e) {
  double s = 0.0;
  for (size_t i = b; i < e; ++i) {
    if (AbsKey(x[i]) < kNonFiniteKey) s += static_cast<double>(x[i]) * x[i];
  }
  return s;
}

// The scan of x[lo, hi) with full blocks at Level; a last partial block scalar (the same at every
// level).
template <typename Level, bool kSumSq>
void ScanLoop(const float* x, size_t lo, size_t hi, int64_t key_thr, ScanOut* out) {
  const int32_t t_block = static_cast<int32_t>(std::min<int64_t>(key_thr, kNonFiniteKey - 1));
  uint64_t c = 0, nf = 0;
  double s2 = 0.0;
  size_t b = lo;
  for (; b + kScanBlock <= hi; b += kScanBlock) {
    for (size_t line = 0; line < kScanBlock; line += 16) {  // 64-byte lines; never faults
      __builtin_prefetch(x + b + kPrefetchAhead + line, 0, 3);
    }
    float fss = 0.0f;
    const uint64_t mask = Level::template Mask<kSumSq>(x + b, t_block, &fss);
    if constexpr (kSumSq) s2 += std::isfinite(fss) ? fss : ExactSumSq(x, b, b + kScanBlock);
    if (mask != 0) TakeHits(x, b, mask, key_thr, out, &c, &nf);
  }
  if (b < hi) {
    uint64_t mask = 0;
    float fss = 0.0f;
    for (size_t i = b; i < hi; ++i) {
      mask |= static_cast<uint64_t>(static_cast<int32_t>(AbsKey(x[i])) > t_block) << (i - b);
      if constexpr (kSumSq) fss += x[i] * x[i];
    }
    if constexpr (kSumSq) s2 += std::isfinite(fss) ? fss : ExactSumSq(x, b, hi);
    TakeHits(x, b, mask, key_thr, out, &c, &nf);
  }
  out->count = c;
  out->nonfinite = nf;
  out->sumsq = s2;
}

template <typename Level>
void ScanAt(const float* x, size_t lo, size_t hi, int64_t key_thr, bool want_sumsq, ScanOut* out) {
  if (want_sumsq) {
    ScanLoop<Level, true>(x, lo, hi, key_thr, out);
  } else {
    ScanLoop<Level, false>(x, lo, hi, key_thr, out);
  }
}

#if defined(SIEVE_SCAN_X86)
// The wider levels' loops, compiled for their ISA (flatten: the loop and its mask inlined here).
SIEVE_TARGET_AVX2 void ScanAvx2(const float* x, size_t lo, size_t hi, int64_t key_thr,
                                bool want_sumsq, ScanOut* out) {
  ScanAt<Avx2Level>(x, lo, hi, key_thr, want_sumsq, out);
}
SIEVE_TARGET_AVX512 void ScanAvx512(const float* x, size_t lo, size_t hi, int64_t key_thr,
                                    bool want_sumsq, ScanOut* out) {
  ScanAt<Avx512Level>(x, lo, hi, key_thr, want_sumsq, out);
}
#endif

}  // namespace

bool SimdLevelSupported(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return true;
#if defined(SIEVE_SCAN_X86)
    case SimdLevel::kSse2:
      return true;
    case SimdLevel::kAvx2:
      return __builtin_cpu_supports("avx2");
    case SimdLevel::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#else
    default:
      return false;
#endif
  }
  return false;
}

SimdLevel BestSimdLevel() {
  for (SimdLevel l : {SimdLevel::kAvx512, SimdLevel::kAvx2, SimdLevel::kSse2}) {
    if (SimdLevelSupported(l)) return l;
  }
  return SimdLevel::kScalar;
}

std::string_view SimdLevelName(SimdLevel level) {
  static constexpr EnumName<SimdLevel> kNames[] = {{SimdLevel::kScalar, "scalar"},
                                                   {SimdLevel::kSse2, "sse2"},
                                                   {SimdLevel::kAvx2, "avx2"},
                                                   {SimdLevel::kAvx512, "avx512"}};
  return EnumNameOf(kNames, level, "?");
}

void ScanAbove(SimdLevel level, const float* x, size_t lo, size_t hi, int64_t key_thr,
               bool want_sumsq, ScanOut* out) {
  if (!SimdLevelSupported(level)) level = BestSimdLevel();
  switch (level) {
#if defined(SIEVE_SCAN_X86)
    case SimdLevel::kAvx512:
      return ScanAvx512(x, lo, hi, key_thr, want_sumsq, out);
    case SimdLevel::kAvx2:
      return ScanAvx2(x, lo, hi, key_thr, want_sumsq, out);
    case SimdLevel::kSse2:
      return ScanAt<Sse2Level>(x, lo, hi, key_thr, want_sumsq, out);
#endif
    default:
      return ScanAt<ScalarLevel>(x, lo, hi, key_thr, want_sumsq, out);
  }
}

}  // namespace backend_internal
}  // namespace sieve
