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

#if defined(__CUDACC__)
#define SIEVE_HD __host__ __device__
#define SIEVE_FUNCTORS_ABI nvcc
#else
#define SIEVE_HD
#define SIEVE_FUNCTORS_ABI host_cc
#endif

namespace sieve::backend_internal {
inline namespace SIEVE_FUNCTORS_ABI {

// key(x): the IEEE-754 bits of |x| (see kernels/backend.h).
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

// vals[j] = x[idx[j]]; then mask_a[idx[j]] = mask_b[idx[j]] = 0 where the masks are non-null.
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
