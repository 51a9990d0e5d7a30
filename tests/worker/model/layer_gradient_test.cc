// Per-layer checks: each float layer against the double reference (forward) and against central
// differences of the double reference (backward), on small random inputs.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/worker/cpu_reference/cross_entropy.h"
#include "tests/worker/cpu_reference/dense.h"
#include "tests/worker/cpu_reference/im2col.h"
#include "tests/worker/cpu_reference/max_pool.h"
#include "tests/worker/cpu_reference/relu.h"
#include "tests/worker/model/reference_model.h"

namespace sieve {
namespace {

using reference::AllIndices;
using reference::CentralDifferences;
using reference::ExpectGradientClose;
using reference::ToDouble;
using reference::Vec;

constexpr double kEps = 1e-6;
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

std::vector<float> RandomVector(size_t n, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& e : v) e = normal(*rng);
  return v;
}

double Dot(const Vec& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void ExpectForwardClose(const std::vector<float>& got, const Vec& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i])));
}

// Checks every coordinate of `analytic` against central differences of f at `at`.
void ExpectFullGradient(const std::vector<float>& analytic,
                        const std::function<double(const Vec&)>& f, const Vec& at,
                        const std::string& what) {
  const std::vector<size_t> all = AllIndices(at.size());
  ExpectGradientClose(analytic, CentralDifferences(f, at, all, kEps), all, kRtol, kAtol, what);
}

// For a layer y = f(x; w, b) and L = loss(x, w, b): checks dL/dw, dL/db and dL/dx.
void ExpectAffineGradients(const std::function<double(const Vec&, const Vec&, const Vec&)>& loss,
                           const Vec& x, const Vec& w, const Vec& b, const std::vector<float>& dx,
                           const std::vector<float>& dw, const std::vector<float>& db) {
  ExpectFullGradient(
      dw, [&](const Vec& v) { return loss(x, v, b); }, w, "dw");
  ExpectFullGradient(
      db, [&](const Vec& v) { return loss(x, w, v); }, b, "db");
  ExpectFullGradient(
      dx, [&](const Vec& v) { return loss(v, w, b); }, x, "dx");
}

TEST(WorkerModelLayerGradient, Dense) {
  std::mt19937 rng(1);
  const int batch = 3, in = 5, out = 4;
  const std::vector<float> x = RandomVector(batch * in, &rng), w = RandomVector(out * in, &rng),
                           b = RandomVector(out, &rng), r = RandomVector(batch * out, &rng);
  std::vector<float> y(batch * out), dw(out * in), db(out), dx(batch * in);
  cpu_reference::DenseForward(x.data(), batch, in, w.data(), b.data(), out, y.data());
  const Vec xd = ToDouble(x), wd = ToDouble(w), bd = ToDouble(b);
  ExpectForwardClose(y, reference::RefDense(xd, batch, in, wd.data(), bd.data(), out));
  // L = sum(r * y), so dL/dy = r.
  cpu_reference::DenseBackward(x.data(), batch, in, w.data(), out, r.data(), dw.data(), db.data(),
                               dx.data());
  auto loss = [&](const Vec& xv, const Vec& wv, const Vec& bv) {
    return Dot(reference::RefDense(xv, batch, in, wv.data(), bv.data(), out), r);
  };
  ExpectAffineGradients(loss, xd, wd, bd, dx, dw, db);
}

TEST(WorkerModelLayerGradient, ConvolutionAsIm2ColGemm) {
  std::mt19937 rng(2);
  const int batch = 2, h = 6, w = 5, c = 3, k = 3, oc = 4, oh = h - k + 1, ow = w - k + 1;
  const int rows = batch * oh * ow, patch = k * k * c;
  const std::vector<float> x = RandomVector(batch * h * w * c, &rng),
                           wt = RandomVector(oc * patch, &rng), b = RandomVector(oc, &rng),
                           r = RandomVector(rows * oc, &rng);
  std::vector<float> patches(rows * patch), y(rows * oc);
  cpu_reference::Im2Col(x.data(), batch, h, w, c, k, patches.data());
  cpu_reference::DenseForward(patches.data(), rows, patch, wt.data(), b.data(), oc, y.data());
  const Vec xd = ToDouble(x), wd = ToDouble(wt), bd = ToDouble(b);
  ExpectForwardClose(y, reference::RefConv(xd, batch, h, w, c, wd.data(), bd.data(), oc, k));

  std::vector<float> dw(oc * patch), db(oc), dpatches(rows * patch), dx(x.size(), 123.0f);
  cpu_reference::DenseBackward(patches.data(), rows, patch, wt.data(), oc, r.data(), dw.data(),
                               db.data(), dpatches.data());
  cpu_reference::Col2Im(dpatches.data(), batch, h, w, c, k, dx.data());
  auto loss = [&](const Vec& xv, const Vec& wv, const Vec& bv) {
    return Dot(reference::RefConv(xv, batch, h, w, c, wv.data(), bv.data(), oc, k), r);
  };
  ExpectAffineGradients(loss, xd, wd, bd, dx, dw, db);
}

TEST(WorkerModelLayerGradient, MaxPool) {
  std::mt19937 rng(3);
  const int batch = 2, h = 4, w = 6, c = 3;
  const std::vector<float> x = RandomVector(batch * h * w * c, &rng),
                           r = RandomVector(batch * (h / 2) * (w / 2) * c, &rng);
  std::vector<float> y(r.size()), dx(x.size(), 5.0f);
  std::vector<int32_t> argmax(r.size());
  cpu_reference::MaxPool2x2Forward(x.data(), batch, h, w, c, y.data(), argmax.data());
  const Vec xd = ToDouble(x);
  ExpectForwardClose(y, reference::RefMaxPool(xd, batch, h, w, c));
  cpu_reference::MaxPool2x2Backward(r.data(), argmax.data(), batch, h, w, c, dx.data());
  ExpectFullGradient(
      dx, [&](const Vec& v) { return Dot(reference::RefMaxPool(v, batch, h, w, c), r); }, xd, "dx");
}

TEST(WorkerModelLayerGradient, Relu) {
  std::mt19937 rng(4);
  std::vector<float> x = RandomVector(50, &rng);
  for (float& v : x) v += v > 0 ? 0.1f : -0.1f;  // keep clear of the kink
  const std::vector<float> r = RandomVector(50, &rng);
  std::vector<float> y = x;
  cpu_reference::ReluForward(y.data(), 50);
  const Vec xd = ToDouble(x);
  ExpectForwardClose(y, reference::RefRelu(xd));
  std::vector<float> dx = r;
  cpu_reference::ReluBackward(y.data(), 50, dx.data());
  ExpectFullGradient(
      dx, [&](const Vec& v) { return Dot(reference::RefRelu(v), r); }, xd, "dx");
}

TEST(WorkerModelLayerGradient, SoftmaxCrossEntropy) {
  std::mt19937 rng(5);
  const int batch = 4, classes = 10;
  std::vector<float> logits = RandomVector(batch * classes, &rng);
  logits[3] += 1000.0f;  // stays finite: the maximum is subtracted
  const std::vector<uint8_t> labels = {3, 9, 0, 4};
  std::vector<float> dlogits(logits.size());
  int64_t correct = -1;
  const float loss = cpu_reference::SoftmaxCrossEntropy(logits.data(), labels.data(), batch,
                                                        classes, dlogits.data(), &correct);
  const Vec ld = ToDouble(logits);
  const double want = reference::RefCrossEntropy(ld, labels.data(), batch, classes);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, want, 1e-5 * std::fabs(want));
  int64_t expected_correct = 0;
  for (int b = 0; b < batch; ++b) {
    int best = 0;
    for (int k = 1; k < classes; ++k)
      best = logits[b * classes + k] > logits[b * classes + best] ? k : best;
    expected_correct += best == labels[b];
  }
  EXPECT_EQ(correct, expected_correct);
  EXPECT_GE(correct, 1);  // row 0 is dominated by its label's logit
  ExpectFullGradient(
      dlogits,
      [&](const Vec& v) { return reference::RefCrossEntropy(v, labels.data(), batch, classes); },
      ld, "dlogits");
}

}  // namespace
}  // namespace sieve
