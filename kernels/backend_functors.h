// Element-wise helpers and functors shared by the two Backend implementations: backend_cpu.cc
// (g++, Thrust OMP system) and backend_cuda.cu (nvcc, custom kernels). Internal to kernels/.
// Under nvcc every function here is __host__ __device__ (SIEVE_HD); the arithmetic is written so
// that both compilers round identically (one rounding per multiply and per add, never an FMA),
// which keeps the two backends' error-feedback state bit-identical.
// The definitions sit in an inline namespace named after the compiler, so the linker never
// merges nvcc's host copies with g++'s (built with -ffp-contract=off) in one binary.
// Thread-safety: pure functions and functors over caller-owned memory.
#ifndef SIEVE_KERNELS_BACKEND_FUNCTORS_H_
#define SIEVE_KERNELS_BACKEND_FUNCTORS_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/value_precision.h"

#if defined(__CUDACC__)
#define SIEVE_HD __host__ __device__
#define SIEVE_FUNCTORS_ABI nvcc
#else
#define SIEVE_HD
#define SIEVE_FUNCTORS_ABI host_cc
#endif

namespace sieve::backend_internal {
inline namespace SIEVE_FUNCTORS_ABI {

// The bits of a binary32 and back.
SIEVE_HD inline uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}
SIEVE_HD inline float BitsFloat(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

// key(x): the IEEE-754 bits of |x| (see kernels/backend.h).
SIEVE_HD inline uint32_t AbsKey(float x) { return FloatBits(x) & 0x7fffffffu; }

// IEEE-754 binary16 from binary32, round to nearest even; overflow -> ±Inf, NaN -> a quiet NaN,
// subnormals both ways (kernels/sparse_ops.h FloatToHalf / HalfToFloat are these).
SIEVE_HD inline uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past the largest half
  if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
    if (ax <= 0x33000000u) return sign;          // <= 2^-25 rounds to zero (tie to even)
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(ax >> 23);
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}
SIEVE_HD inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m·2^-24, exact in binary32
    return BitsFloat(FloatBits(static_cast<float>(m) * 5.9604644775390625e-8f) | sign);
  }
  if (e == 31) return BitsFloat(sign | 0x7f800000u | (m << 13));
  return BitsFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16 from binary32, round to nearest even on the dropped 16 bits (a carry into the exponent
// is the right result: the largest finite values round to ±Inf); NaN -> a quiet NaN.
SIEVE_HD inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
SIEVE_HD inline float Bf16BitsToFloat(uint16_t b) {
  return BitsFloat(static_cast<uint32_t>(b) << 16);
}

// x rounded to precision p (to nearest even), as a binary32: what the wire carries when the value
// is packed (exactly) into p. A finite x beyond p's largest finite value saturates to it (±65504,
// ±bf16's 3.3895e38), so a finite x always gives a finite value; ±Inf and NaN stay as they are.
// The rounding error x - RoundToPrecision(x, p) is then exact in binary32 but where saturation
// takes more than x's own magnitude allows (|x| > 2·65504 for fp16).
SIEVE_HD inline float RoundToPrecision(float x, ValuePrecision p) {
  const bool finite = AbsKey(x) < 0x7f800000u;
  if (p == ValuePrecision::kFp16) {
    uint16_t h = FloatToHalfBits(x);
    if (finite && (h & 0x7fffu) == 0x7c00u) h = (h & 0x8000u) | 0x7bffu;
    return HalfBitsToFloat(h);
  }
  if (p == ValuePrecision::kBf16) {
    uint16_t b = FloatToBf16Bits(x);
    if (finite && (b & 0x7fffu) == 0x7f80u) b = (b & 0x8000u) | 0x7f7fu;
    return Bf16BitsToFloat(b);
  }
  return x;
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

// m[i] = mu·m[i] + g[i]; r[i] += lr·m[i].
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

// j ↦ |x[start + j·stride]|.
struct SampleFn {
  const float* x;
  size_t start;
  size_t stride;
  SIEVE_HD float operator()(size_t j) const { return fabsf(x[start + j * stride]); }
};

// What the residual keeps of a value v once it is sent in precision `keep`: the rounding error
// v - RoundToPrecision(v, keep), 0 for kFp32.
SIEVE_HD inline float KeptResidual(float v, ValuePrecision keep) {
  return keep == ValuePrecision::kFp32 ? 0.0f : AddRn(v, -RoundToPrecision(v, keep));
}

// vals[j] = x[idx[j]]; then, where the masks are non-null, mask_a[idx[j]] = KeptResidual of that
// value and mask_b[idx[j]] = 0. mask_a may alias x (each x[i] is read before it is written).
struct GatherMaskFn {
  const float* x;
  const uint32_t* idx;
  float* vals;
  float* mask_a;
  float* mask_b;
  ValuePrecision keep = ValuePrecision::kFp32;
  SIEVE_HD void operator()(size_t j) const {
    const uint32_t i = idx[j];
    const float v = x[i];
    vals[j] = v;
    if (mask_a != nullptr) mask_a[i] = KeptResidual(v, keep);
    if (mask_b != nullptr) mask_b[i] = 0.0f;
  }
};

// x[i] = x[i] - RoundToPrecision(x[i], p): what stays of a value once its rounding to p is sent.
struct RoundingErrorFn {
  float* x;
  ValuePrecision p;
  SIEVE_HD void operator()(size_t i) const {
    const float v = x[i];
    x[i] = AddRn(v, -RoundToPrecision(v, p));
  }
};

// The σ-histogram bin of a finite x: clamped to [0, bins).
SIEVE_HD inline int SigmaBin(float x, double mean, double inv_width_sigma, int bins) {
  const double z = (static_cast<double>(x) - mean) * inv_width_sigma + 0.5 * bins;
  if (!(z >= 0.0)) return 0;
  if (z >= bins) return bins - 1;
  return static_cast<int>(z);
}

}  // namespace SIEVE_FUNCTORS_ABI
}  // namespace sieve::backend_internal

#endif  // SIEVE_KERNELS_BACKEND_FUNCTORS_H_
