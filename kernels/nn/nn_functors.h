// The element-wise ops of NnOps (kernels/nn/nn_ops.h), written once: each functor handles one
// output index i and is run by nn_cpu.cc (g++, Thrust OMP for_each) and by nn_cuda.cu (nvcc,
// grid-stride kernels). Internal to kernels/nn/.
// The arithmetic mirrors the CPU reference model (tests/worker/cpu_reference/: the worker's model
// code before it moved onto kernels/nn) step by step (one rounding per float multiply and add,
// never an FMA; the same summation orders), so the CPU build is bitwise equal to it.
// Definitions sit in the compiler-named inline namespace of backend_functors.h (see there).
// Thread-safety: pure functors over caller-owned memory; distinct i touch distinct outputs.
#ifndef SIEVE_KERNELS_NN_NN_FUNCTORS_H_
#define SIEVE_KERNELS_NN_NN_FUNCTORS_H_

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/backend_functors.h"

namespace sieve::nn_internal {
inline namespace SIEVE_FUNCTORS_ABI {

using backend_internal::AddRn;
using backend_internal::MulRn;

// Row-wise ops handle a row in chunks of kRowChunk columns: one item per (row, chunk), so that an
// item's index arithmetic is paid once per chunk and its inner loop is contiguous (the CPU runs
// items on few threads; the GPU still gets many items).
inline constexpr int64_t kRowChunk = 64;
SIEVE_HD inline int64_t RowChunks(int64_t cols) { return (cols + kRowChunk - 1) / kRowChunk; }

// Item i of a rows x cols matrix: row r, columns [j0, j1).
struct RowChunk {
  int64_t r, j0, j1;
};
SIEVE_HD inline RowChunk RowChunkOf(size_t i, int64_t cols) {
  const int64_t chunks = RowChunks(cols);
  const int64_t j0 = static_cast<int64_t>(i) % chunks * kRowChunk;
  return {static_cast<int64_t>(i) / chunks, j0, j0 + kRowChunk < cols ? j0 + kRowChunk : cols};
}

// y[r][j] = bias[j] (y is rows x cols; kAdd false: BiasFillFn), or y[r][j] += bias[j] (kAdd
// true: BiasAddFn).
template <bool kAdd>
struct BiasRowsFn {
  const float* bias;
  int64_t rows, cols;
  float* y;
  size_t items() const { return static_cast<size_t>(rows * RowChunks(cols)); }
  SIEVE_HD void operator()(size_t i) const {
    const RowChunk c = RowChunkOf(i, cols);
    float* yr = y + c.r * cols;
    for (int64_t j = c.j0; j < c.j1; ++j) yr[j] = kAdd ? AddRn(yr[j], bias[j]) : bias[j];
  }
};
using BiasFillFn = BiasRowsFn<false>;
using BiasAddFn = BiasRowsFn<true>;

// dbias[j] = Σ_r dy[r][j], in row order.
struct BiasGradFn {
  const float* dy;
  int64_t rows;
  int64_t cols;
  float* dbias;
  SIEVE_HD void operator()(size_t j) const {
    float s = 0.0f;
    for (int64_t r = 0; r < rows; ++r) s = AddRn(s, dy[r * cols + static_cast<int64_t>(j)]);
    dbias[j] = s;
  }
};

struct ReluForwardFn {
  float* v;
  SIEVE_HD void operator()(size_t i) const { v[i] = v[i] > 0.0f ? v[i] : 0.0f; }
};

struct ReluBackwardFn {
  const float* y;
  float* dv;
  // A select, not a branch: ReLU outputs are zero about half the time (unpredictable).
  SIEVE_HD void operator()(size_t i) const { dv[i] = y[i] <= 0.0f ? 0.0f : dv[i]; }
};

// The arg-max of one row (lowest index on ties; NaN never wins a comparison).
SIEVE_HD inline int RowArgMax(const float* z, int classes) {
  int best = 0;
  for (int k = 1; k < classes; ++k) {
    if (z[k] > z[best]) best = k;
  }
  return best;
}

// One row b of the softmax cross-entropy (labels validated by the caller): row_loss[b] =
// log Σ exp(z − zmax) − (z[label] − zmax) in double, row_hit[b] = (arg-max == label), and when
// dlogits is non-null its row = float(softmax)·inv_batch − inv_batch·onehot.
struct SoftmaxXentRowFn {
  const float* logits;
  const uint8_t* labels;
  int classes;
  float inv_batch;
  float* dlogits;
  double* row_loss;
  int32_t* row_hit;
  SIEVE_HD void operator()(size_t b) const {
    const float* z = logits + static_cast<int64_t>(b) * classes;
    const int label = labels[b];
    const int best = RowArgMax(z, classes);
    row_hit[b] = best == label ? 1 : 0;
    const float zmax = z[best];
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += exp(static_cast<double>(AddRn(z[k], -zmax)));
    row_loss[b] = log(sum) - static_cast<double>(AddRn(z[label], -zmax));
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<int64_t>(b) * classes;
      for (int k = 0; k < classes; ++k) {
        const double p = exp(static_cast<double>(AddRn(z[k], -zmax))) / sum;
        d[k] = MulRn(static_cast<float>(p), inv_batch);
      }
      d[label] = AddRn(d[label], -inv_batch);
    }
  }
};

struct ArgMaxHitFn {
  const float* logits;
  const uint8_t* labels;
  int classes;
  int32_t* row_hit;
  SIEVE_HD void operator()(size_t b) const {
    row_hit[b] = RowArgMax(logits + static_cast<int64_t>(b) * classes, classes) == labels[b];
  }
};

// Item i of a batch of height x width images, pixels in row-major order: pixel (y, x) of image b.
struct Pixel {
  int64_t b, y, x;
};
SIEVE_HD inline Pixel PixelOf(size_t i, int64_t height, int64_t width) {
  const int64_t n = static_cast<int64_t>(i);
  return {n / (width * height), (n / width) % height, n % width};
}

// Patch row r (an output pixel): for each kernel row ky, the k·c floats x[b][oy + ky][ox .. ox +
// k)[:] are contiguous in NHWC and land contiguously in patches[r][ky·k·c ..]. Items: batch·oh·ow.
struct Im2ColFn {
  const float* x;
  int64_t batch, h, w, c, k, oh, ow;
  float* patches;
  size_t items() const { return static_cast<size_t>(batch * oh * ow); }
  SIEVE_HD void operator()(size_t r) const {
    const Pixel o = PixelOf(r, oh, ow);
    const int64_t run = k * c;
    float* dst = patches + static_cast<int64_t>(r) * k * run;
    for (int64_t ky = 0; ky < k; ++ky) {
      const float* src = x + ((o.b * h + o.y + ky) * w + o.x) * c;
      for (int64_t q = 0; q < run; ++q) dst[ky * run + q] = src[q];
    }
  }
};

// The c channels of NHWC pixel p of dx: the sum of every patch entry copied from them, added in
// the order the CPU reference model's Col2Im adds them (output rows ascending, i.e. ky then kx
// descending). Items: batch·h·w pixels.
struct Col2ImFn {
  const float* dpatches;
  int64_t batch, h, w, c, k, oh, ow;
  float* dx;
  size_t items() const { return static_cast<size_t>(batch * h * w); }
  SIEVE_HD void operator()(size_t p) const {
    const Pixel px = PixelOf(p, h, w);
    const int64_t row = k * k * c;
    float* d = dx + static_cast<int64_t>(p) * c;
    for (int64_t ch = 0; ch < c; ++ch) d[ch] = 0.0f;
    for (int64_t ky = k - 1; ky >= 0; --ky) {
      const int64_t oy = px.y - ky;
      if (oy < 0 || oy >= oh) continue;
      for (int64_t kx = k - 1; kx >= 0; --kx) {
        const int64_t ox = px.x - kx;
        if (ox < 0 || ox >= ow) continue;
        const float* src = dpatches + ((px.b * oh + oy) * ow + ox) * row + (ky * k + kx) * c;
        for (int64_t ch = 0; ch < c; ++ch) d[ch] = AddRn(d[ch], src[ch]);
      }
    }
  }
};

// The c channels of output pixel p of the 2x2/2 pool: y and argmax (first maximum in (dy, dx)
// order). Items: batch·(h/2)·(w/2) pixels.
struct MaxPoolForwardFn {
  const float* x;
  int64_t batch, h, w, c;
  float* y;
  int32_t* argmax;
  size_t items() const { return static_cast<size_t>(batch * (h / 2) * (w / 2)); }
  SIEVE_HD void operator()(size_t p) const {
    const int64_t oh = h / 2, ow = w / 2;
    const int64_t ox = static_cast<int64_t>(p) % ow;
    const int64_t oy = (static_cast<int64_t>(p) / ow) % oh;
    const int64_t b = static_cast<int64_t>(p) / (ow * oh);
    const int64_t corner = ((b * h + 2 * oy) * w + 2 * ox) * c;
    for (int64_t ch = 0; ch < c; ++ch) {
      int64_t best = corner + ch;
      for (int64_t dy = 0; dy < 2; ++dy) {
        for (int64_t dx = 0; dx < 2; ++dx) {
          const int64_t i = corner + (dy * w + dx) * c + ch;
          if (x[i] > x[best]) best = i;
        }
      }
      y[static_cast<int64_t>(p) * c + ch] = x[best];
      argmax[static_cast<int64_t>(p) * c + ch] = static_cast<int32_t>(best);
    }
  }
};

// dx[argmax[j]] = dy[j] (windows do not overlap: no two j share a target).
struct MaxPoolBackwardFn {
  const float* dy;
  const int32_t* argmax;
  float* dx;
  SIEVE_HD void operator()(size_t j) const { dx[argmax[j]] = dy[j]; }
};

struct WeightDecayFn {
  const float* w;
  float wd;
  float* g;
  SIEVE_HD void operator()(size_t i) const { g[i] = AddRn(g[i], MulRn(wd, w[i])); }
};

// Row j of dst = row rows[j] of src (row_size floats), in chunks of kRowChunk.
struct GatherRowsFn {
  const float* src;
  const int64_t* rows;
  int64_t count, row_size;
  float* dst;
  size_t items() const { return static_cast<size_t>(count * RowChunks(row_size)); }
  SIEVE_HD void operator()(size_t i) const {
    const RowChunk c = RowChunkOf(i, row_size);
    const float* s = src + rows[c.r] * row_size;
    float* d = dst + c.r * row_size;
    for (int64_t q = c.j0; q < c.j1; ++q) d[q] = s[q];
  }
};

// grad over chunks of 64 (a block holds whole chunks): the pool window of the chunk's block,
// scaled, plus pull·w (see NnOps::PoolNoiseGradient).
struct PoolNoiseFn {
  const float* pool;
  uint64_t pool_mask;    // pool_size − 1
  uint64_t block_shift;  // log2(block)
  const uint64_t* offsets;
  float scale, pull;
  const float* w;  // null: no pull term
  uint64_t d;
  float* grad;
  size_t items() const { return static_cast<size_t>((d + 63) / 64); }
  SIEVE_HD void operator()(size_t j) const {
    const uint64_t lo = static_cast<uint64_t>(j) * 64;
    const uint64_t hi = lo + 64 < d ? lo + 64 : d;
    const uint64_t base = offsets[lo >> block_shift] + (lo & ((uint64_t{1} << block_shift) - 1));
    for (uint64_t i = lo; i < hi; ++i) {
      const float x = MulRn(scale, pool[(base + (i - lo)) & pool_mask]);
      grad[i] = w == nullptr ? x : AddRn(x, MulRn(pull, w[i]));
    }
  }
};

struct ScatterSetFn {
  const uint32_t* idx;
  const float* vals;
  float* w;
  SIEVE_HD void operator()(size_t j) const { w[idx[j]] = vals[j]; }
};

}  // namespace SIEVE_FUNCTORS_ABI
}  // namespace sieve::nn_internal

#endif  // SIEVE_KERNELS_NN_NN_FUNCTORS_H_
