// The element-wise ops of NnOps (kernels/nn/nn_ops.h), written once: each functor handles one
// output index i and is run by nn_cpu.cc (g++, Thrust OMP for_each) and by nn_cuda.cu (nvcc,
// grid-stride kernels). Internal to kernels/nn/.
// The arithmetic mirrors worker/model/ step by step (one rounding per float multiply and add,
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

// y[i] = bias[i mod cols].
struct BiasFillFn {
  const float* bias;
  int64_t cols;
  float* y;
  SIEVE_HD void operator()(size_t i) const { y[i] = bias[static_cast<int64_t>(i) % cols]; }
};

// y[i] += bias[i mod cols].
struct BiasAddFn {
  const float* bias;
  int64_t cols;
  float* y;
  SIEVE_HD void operator()(size_t i) const {
    y[i] = AddRn(y[i], bias[static_cast<int64_t>(i) % cols]);
  }
};

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
  SIEVE_HD void operator()(size_t i) const {
    if (y[i] <= 0.0f) dv[i] = 0.0f;
  }
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

// patches[i], i over (batch·oh·ow) x (k·k·c), from NHWC x.
struct Im2ColFn {
  const float* x;
  int64_t h, w, c, k, oh, ow;
  float* patches;
  SIEVE_HD void operator()(size_t i) const {
    const int64_t row = k * k * c;
    const int64_t r = static_cast<int64_t>(i) / row;
    const int64_t q = static_cast<int64_t>(i) % row;
    const int64_t ky = q / (k * c);
    const int64_t kx = (q % (k * c)) / c;
    const int64_t ch = q % c;
    const int64_t ox = r % ow;
    const int64_t oy = (r / ow) % oh;
    const int64_t b = r / (ow * oh);
    patches[i] = x[((b * h + oy + ky) * w + ox + kx) * c + ch];
  }
};

// dx[i] for NHWC position i: the sum of every patch entry copied from it, added in the order
// worker/model/im2col.cc's Col2Im adds them (output rows ascending, i.e. ky then kx descending).
struct Col2ImFn {
  const float* dpatches;
  int64_t h, w, c, k, oh, ow;
  float* dx;
  SIEVE_HD void operator()(size_t i) const {
    const int64_t ch = static_cast<int64_t>(i) % c;
    const int64_t t = static_cast<int64_t>(i) / c;
    const int64_t xx = t % w;
    const int64_t yy = (t / w) % h;
    const int64_t b = t / (w * h);
    const int64_t row = k * k * c;
    float s = 0.0f;
    for (int64_t ky = k - 1; ky >= 0; --ky) {
      const int64_t oy = yy - ky;
      if (oy < 0 || oy >= oh) continue;
      for (int64_t kx = k - 1; kx >= 0; --kx) {
        const int64_t ox = xx - kx;
        if (ox < 0 || ox >= ow) continue;
        s = AddRn(s, dpatches[((b * oh + oy) * ow + ox) * row + (ky * k + kx) * c + ch]);
      }
    }
    dx[i] = s;
  }
};

// y[j], argmax[j] for output position j of the 2x2/2 pool.
struct MaxPoolForwardFn {
  const float* x;
  int64_t h, w, c;
  float* y;
  int32_t* argmax;
  SIEVE_HD void operator()(size_t j) const {
    const int64_t oh = h / 2, ow = w / 2;
    const int64_t ch = static_cast<int64_t>(j) % c;
    const int64_t t = static_cast<int64_t>(j) / c;
    const int64_t ox = t % ow;
    const int64_t oy = (t / ow) % oh;
    const int64_t b = t / (ow * oh);
    int64_t best = ((b * h + 2 * oy) * w + 2 * ox) * c + ch;
    for (int64_t dy = 0; dy < 2; ++dy) {
      for (int64_t dx = 0; dx < 2; ++dx) {
        const int64_t i = ((b * h + 2 * oy + dy) * w + 2 * ox + dx) * c + ch;
        if (x[i] > x[best]) best = i;
      }
    }
    y[j] = x[best];
    argmax[j] = static_cast<int32_t>(best);
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

// dst[i] = src[rows[i / row_size]·row_size + i mod row_size].
struct GatherRowsFn {
  const float* src;
  const int64_t* rows;
  int64_t row_size;
  float* dst;
  SIEVE_HD void operator()(size_t i) const {
    const int64_t j = static_cast<int64_t>(i) / row_size;
    dst[i] = src[rows[j] * row_size + static_cast<int64_t>(i) % row_size];
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
