// Test-only ground truth: plain double-precision forward passes of the layers and models of
// worker/model/, written as direct loops with no shared code, plus finite-difference helpers.
#ifndef SIEVE_TESTS_WORKER_MODEL_REFERENCE_MODEL_H_
#define SIEVE_TESTS_WORKER_MODEL_REFERENCE_MODEL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/model/model_layout.h"

namespace sieve::reference {

using Vec = std::vector<double>;

inline Vec RefDense(const Vec& x, int batch, int in, const double* w, const double* bias, int out) {
  Vec y(static_cast<size_t>(batch) * out);
  for (int b = 0; b < batch; ++b) {
    for (int o = 0; o < out; ++o) {
      double s = bias[o];
      for (int i = 0; i < in; ++i) s += x[b * in + i] * w[o * in + i];
      y[b * out + o] = s;
    }
  }
  return y;
}

// NHWC input, weights [oc][k][k][c], valid, stride 1.
inline Vec RefConv(const Vec& x, int batch, int h, int w, int c, const double* weight,
                   const double* bias, int oc, int k) {
  const int oh = h - k + 1, ow = w - k + 1;
  Vec y(static_cast<size_t>(batch) * oh * ow * oc);
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int o = 0; o < oc; ++o) {
          double s = bias[o];
          for (int ky = 0; ky < k; ++ky)
            for (int kx = 0; kx < k; ++kx)
              for (int ch = 0; ch < c; ++ch)
                s += x[((b * h + oy + ky) * w + ox + kx) * c + ch] *
                     weight[((o * k + ky) * k + kx) * c + ch];
          y[((b * oh + oy) * ow + ox) * oc + o] = s;
        }
  return y;
}

inline Vec RefMaxPool(const Vec& x, int batch, int h, int w, int c) {
  Vec y(static_cast<size_t>(batch) * (h / 2) * (w / 2) * c);
  for (int b = 0; b < batch; ++b)
    for (int oy = 0; oy < h / 2; ++oy)
      for (int ox = 0; ox < w / 2; ++ox)
        for (int ch = 0; ch < c; ++ch) {
          double m = -INFINITY;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx)
              m = std::max(m, x[((b * h + 2 * oy + dy) * w + 2 * ox + dx) * c + ch]);
          y[((b * (h / 2) + oy) * (w / 2) + ox) * c + ch] = m;
        }
  return y;
}

inline Vec RefRelu(Vec v) {
  for (double& e : v) e = e > 0 ? e : 0;
  return v;
}

inline double RefCrossEntropy(const Vec& logits, const uint8_t* labels, int batch, int classes) {
  double total = 0;
  for (int b = 0; b < batch; ++b) {
    double m = -INFINITY;
    for (int k = 0; k < classes; ++k) m = std::max(m, logits[b * classes + k]);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(logits[b * classes + k] - m);
    total += std::log(sum) + m - logits[b * classes + labels[b]];
  }
  return total / batch;
}

// Mean loss of the model of `layout` ("softmax", "fnn3", "cnn" or "cnn_large") on 28x28 inputs.
inline double RefModelLoss(const ModelLayout& layout, const Vec& p, const Vec& x,
                           const uint8_t* labels, int batch) {
  auto at = [&](const std::string& name) { return p.data() + layout.Find(name)->offset; };
  Vec a = x;
  int width = 784;
  std::vector<std::string> dense;
  if (const Segment* conv1 = layout.Find("conv1.weight"); conv1 != nullptr) {
    const int c1 = static_cast<int>(conv1->shape[0]), k = static_cast<int>(conv1->shape[1]);
    const int c2 = static_cast<int>(layout.Find("conv2.weight")->shape[0]);
    const int h1 = 28 - k + 1, p1 = h1 / 2, h2 = p1 - k + 1, p2 = h2 / 2;
    a = RefMaxPool(
        RefRelu(RefConv(a, batch, 28, 28, 1, at("conv1.weight"), at("conv1.bias"), c1, k)), batch,
        h1, h1, c1);
    a = RefMaxPool(
        RefRelu(RefConv(a, batch, p1, p1, c1, at("conv2.weight"), at("conv2.bias"), c2, k)), batch,
        h2, h2, c2);
    width = p2 * p2 * c2;
    dense = {"fc1", "fc2"};
  } else if (layout.name == "fnn3") {
    dense = {"fc1", "fc2", "fc3"};
  } else {
    dense = {"fc"};
  }
  for (size_t l = 0; l < dense.size(); ++l) {
    const Segment* w = layout.Find(dense[l] + ".weight");
    const int out = static_cast<int>(w->shape[0]);
    a = RefDense(a, batch, width, at(dense[l] + ".weight"), at(dense[l] + ".bias"), out);
    if (l + 1 < dense.size()) a = RefRelu(a);
    width = out;
  }
  return RefCrossEntropy(a, labels, batch, width);
}

// Central differences of f at `at` for the coordinates in `which`.
inline Vec CentralDifferences(const std::function<double(const Vec&)>& f, Vec at,
                              const std::vector<size_t>& which, double eps) {
  Vec g;
  for (size_t i : which) {
    const double keep = at[i];
    at[i] = keep + eps;
    const double up = f(at);
    at[i] = keep - eps;
    const double down = f(at);
    at[i] = keep;
    g.push_back((up - down) / (2 * eps));
  }
  return g;
}

inline std::vector<size_t> AllIndices(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// |analytic - numeric| <= rtol * |numeric| + atol for every checked coordinate.
inline void ExpectGradientClose(const std::vector<float>& analytic, const Vec& numeric,
                                const std::vector<size_t>& which, double rtol, double atol,
                                const std::string& what) {
  ASSERT_EQ(numeric.size(), which.size());
  for (size_t j = 0; j < which.size(); ++j) {
    const double a = analytic[which[j]];
    EXPECT_NEAR(a, numeric[j], rtol * std::fabs(numeric[j]) + atol)
        << what << " coordinate " << which[j];
  }
}

inline Vec ToDouble(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

}  // namespace sieve::reference

#endif  // SIEVE_TESTS_WORKER_MODEL_REFERENCE_MODEL_H_
