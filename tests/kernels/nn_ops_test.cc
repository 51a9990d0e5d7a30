// NnOps (kernels/nn/nn_ops.h) against independent references: the CPU reference model
// (tests/worker/cpu_reference/) (bitwise on the CPU, where the same arithmetic is done; on CUDA
// bitwise for copies and selections, else within a relative tolerance), brute-force loops in this
// file, and finite differences for the backward ops. Every case runs on the CPU and on CUDA; the
// CUDA ones skip when no GPU is visible. Deterministic: fixed seeds, no timing.
#include "kernels/nn/nn_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device.h"
#include "tests/worker/cpu_reference/cross_entropy.h"
#include "tests/worker/cpu_reference/dense.h"
#include "tests/worker/cpu_reference/im2col.h"
#include "tests/worker/cpu_reference/max_pool.h"
#include "tests/worker/cpu_reference/relu.h"

namespace sieve {
namespace {

using cpu_reference::Col2Im;
using cpu_reference::DenseBackward;
using cpu_reference::DenseForward;
using cpu_reference::Im2Col;
using cpu_reference::MaxPool2x2Backward;
using cpu_reference::MaxPool2x2Forward;
using cpu_reference::ReluBackward;
using cpu_reference::ReluForward;
using cpu_reference::SoftmaxCrossEntropy;

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Values on a coarse grid, so that ties (equal maxima) occur.
std::vector<float> Quantized(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 7) - 3) * 0.5f;
  return v;
}

std::vector<uint8_t> Labels(int n, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> l(n);
  for (uint8_t& x : l) x = static_cast<uint8_t>(rng() % classes);
  return l;
}

// Σ a[i]·b[i] in double.
double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

// Checks grad[i] against the central difference (loss(x + h·e_i) − loss(x − h·e_i)) / 2h for
// every i; loss reads x (which this perturbs and restores).
template <typename Loss>
void ExpectCentralDifferences(std::vector<float>& x, const std::vector<float>& grad, Loss loss,
                              float h, double tol, const char* what) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    EXPECT_NEAR(grad[i], (lp - lm) / (2.0 * h), tol) << what << "[" << i << "]";
  }
}

class KernelsNn : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam() == Device::kCuda && !CudaDeviceAvailable()) GTEST_SKIP() << "no GPU";
    StatusOr<Backend*> be = GetBackend(GetParam());
    ASSERT_TRUE(be.ok()) << be.status().message();
    StatusOr<std::unique_ptr<BackendContext>> ctx = (*be)->NewContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    ctx_ = std::move(*ctx);
    StatusOr<std::unique_ptr<NnOps>> ops = NnOps::Create(ctx_.get());
    ASSERT_TRUE(ops.ok()) << ops.status().message();
    ops_ = std::move(*ops);
    ASSERT_EQ(ops_->device(), GetParam());
  }
  void TearDown() override {
    for (float* p : bufs_) ctx_->Free(p);
    for (int32_t* p : ibufs_) ops_->FreeInt32(p);
  }

  bool cpu() const { return GetParam() == Device::kCpu; }

  // A backend buffer holding v (freed at TearDown).
  float* Up(const std::vector<float>& v) {
    StatusOr<float*> p = ctx_->Alloc(v.size());
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) return nullptr;
    bufs_.push_back(*p);
    if (!v.empty()) {
      EXPECT_TRUE(ctx_->FromHost(v.data(), v.size(), *p).ok());
    }
    return *p;
  }
  float* Zeros(size_t n) { return Up(std::vector<float>(n, 0.0f)); }
  int32_t* IntZeros(size_t n) {
    StatusOr<int32_t*> p = ops_->AllocInt32(n);
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) return nullptr;
    ibufs_.push_back(*p);
    return *p;
  }
  std::vector<float> Down(const float* p, size_t n) {
    std::vector<float> v(n);
    const Status st = ctx_->ToHost(p, n, v.data());
    EXPECT_TRUE(st.ok()) << st.message();
    return v;
  }
  std::vector<int32_t> DownInt(const int32_t* p, size_t n) {
    std::vector<int32_t> v(n);
    const Status st = ops_->ToHostInt32(p, n, v.data());
    EXPECT_TRUE(st.ok()) << st.message();
    return v;
  }

  // Bitwise equality (ops that only copy, select or round the same way on both backends).
  static void ExpectBitwise(const std::vector<float>& got, const std::vector<float>& want,
                            const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << what << " [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
  // Bitwise on the CPU (same arithmetic as the reference); on CUDA within rel·max(1, |want|).
  void ExpectCpuBitwise(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what, double rel = 1e-5) const {
    if (cpu()) return ExpectBitwise(got, want, what);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(double{want[i]})))
          << what << " [" << i << "]";
    }
  }

  std::unique_ptr<BackendContext> ctx_;
  std::unique_ptr<NnOps> ops_;
  std::vector<float*> bufs_;
  std::vector<int32_t*> ibufs_;
};

// --- GEMM ---

TEST_P(KernelsNn, GemmMatchesBruteForceForEveryTranspose) {
  struct Shape {
    int m, n, k;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{33, 17, 65}, Shape{4, 9, 0}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" +
                   std::to_string(s.k) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
      const std::vector<float> a = Random(size_t(s.m) * s.k, 1 + t);
      const std::vector<float> b = Random(size_t(s.k) * s.n, 11 + t);
      const std::vector<float> c0 = Random(size_t(s.m) * s.n, 21 + t);
      const float alpha = 0.75f, beta = -0.5f;
      float* c = Up(c0);
      ASSERT_TRUE(ops_->Gemm(ta, tb, s.m, s.n, s.k, alpha, Up(a), Up(b), beta, c).ok());
      const std::vector<float> got = Down(c, c0.size());
      for (int i = 0; i < s.m; ++i) {
        for (int j = 0; j < s.n; ++j) {
          double ref = 0.0, mag = 0.0;
          for (int p = 0; p < s.k; ++p) {
            const double av = ta ? a[size_t(p) * s.m + i] : a[size_t(i) * s.k + p];
            const double bv = tb ? b[size_t(j) * s.k + p] : b[size_t(p) * s.n + j];
            ref += av * bv;
            mag += std::fabs(av * bv);
          }
          const double cij = c0[size_t(i) * s.n + j];
          ref = alpha * ref + beta * cij;
          mag = alpha * mag + std::fabs(beta * cij);
          // Float accumulation of k products: |error| ≤ (k + 2)·ε·Σ|terms|.
          EXPECT_NEAR(got[size_t(i) * s.n + j], ref, (s.k + 2) * 1.2e-7 * mag + 1e-30)
              << i << "," << j;
        }
      }
    }
  }
}

TEST_P(KernelsNn, GemmRejectsNegativeSizes) {
  EXPECT_EQ(ops_->Gemm(false, false, -1, 2, 2, 1.0f, nullptr, nullptr, 0.0f, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ops_->Gemm(false, false, 0, 2, 2, 1.0f, nullptr, nullptr, 0.0f, nullptr).ok());
}

// A dense layer through the ops, the way worker/model/dense_layer.cc computes it.
TEST_P(KernelsNn, DenseForwardBackwardMatchWorkerModel) {
  const int batch = 13, in = 37, out = 11;
  const std::vector<float> x = Random(size_t(batch) * in, 1);
  const std::vector<float> w = Random(size_t(out) * in, 2);
  const std::vector<float> bias = Random(out, 3);
  const std::vector<float> dy = Random(size_t(batch) * out, 4);

  std::vector<float> y_ref(size_t(batch) * out), dw_ref(w.size()), db_ref(out), dx_ref(x.size());
  DenseForward(x.data(), batch, in, w.data(), bias.data(), out, y_ref.data());
  DenseBackward(x.data(), batch, in, w.data(), out, dy.data(), dw_ref.data(), db_ref.data(),
                dx_ref.data());

  float *dx_ = Up(x), *dw_ = Up(w), *db_ = Up(bias), *ddy = Up(dy);
  float* y = Zeros(y_ref.size());
  ASSERT_TRUE(ops_->BiasFill(db_, batch, out, y).ok());
  ASSERT_TRUE(ops_->Gemm(false, true, batch, out, in, 1.0f, dx_, dw_, 1.0f, y).ok());
  ExpectCpuBitwise(Down(y, y_ref.size()), y_ref, "y");

  float *gw = Zeros(w.size()), *gb = Zeros(out), *gx = Zeros(x.size());
  ASSERT_TRUE(ops_->Gemm(true, false, out, in, batch, 1.0f, ddy, dx_, 0.0f, gw).ok());
  ASSERT_TRUE(ops_->BiasGrad(ddy, batch, out, gb).ok());
  ASSERT_TRUE(ops_->Gemm(false, false, batch, in, out, 1.0f, ddy, dw_, 0.0f, gx).ok());
  ExpectCpuBitwise(Down(gw, w.size()), dw_ref, "dw");
  ExpectCpuBitwise(Down(gb, out), db_ref, "dbias");
  ExpectCpuBitwise(Down(gx, x.size()), dx_ref, "dx");
}

// L = Σ dy·y with y = x·wᵀ + b: the backward ops against central differences of the forward ops.
TEST_P(KernelsNn, DenseBackwardMatchesFiniteDifferences) {
  const int batch = 5, in = 7, out = 4;
  std::vector<float> x = Random(size_t(batch) * in, 5);
  std::vector<float> w = Random(size_t(out) * in, 6);
  std::vector<float> bias = Random(out, 7);
  const std::vector<float> dy = Random(size_t(batch) * out, 8);
  auto loss = [&]() {
    float* y = Zeros(size_t(batch) * out);
    EXPECT_TRUE(ops_->BiasFill(Up(bias), batch, out, y).ok());
    EXPECT_TRUE(ops_->Gemm(false, true, batch, out, in, 1.0f, Up(x), Up(w), 1.0f, y).ok());
    return Dot(dy, Down(y, size_t(batch) * out));
  };
  float *ddy = Up(dy), *gw = Zeros(w.size()), *gb = Zeros(out), *gx = Zeros(x.size());
  ASSERT_TRUE(ops_->Gemm(true, false, out, in, batch, 1.0f, ddy, Up(x), 0.0f, gw).ok());
  ASSERT_TRUE(ops_->BiasGrad(ddy, batch, out, gb).ok());
  ASSERT_TRUE(ops_->Gemm(false, false, batch, in, out, 1.0f, ddy, Up(w), 0.0f, gx).ok());
  const std::vector<float> dw = Down(gw, w.size()), db = Down(gb, out), dx = Down(gx, x.size());
  ExpectCentralDifferences(w, dw, loss, 1e-2f, 2e-4, "dw");
  ExpectCentralDifferences(bias, db, loss, 1e-2f, 2e-4, "dbias");
  ExpectCentralDifferences(x, dx, loss, 1e-2f, 2e-4, "dx");
}

TEST_P(KernelsNn, BiasAddMatchesBruteForce) {
  const int rows = 9, cols = 6;
  const std::vector<float> y0 = Random(size_t(rows) * cols, 9), bias = Random(cols, 10);
  float* y = Up(y0);
  ASSERT_TRUE(ops_->BiasAdd(Up(bias), rows, cols, y).ok());
  std::vector<float> want = y0;
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) want[size_t(r) * cols + j] += bias[j];
  }
  ExpectBitwise(Down(y, want.size()), want, "y");
}

// --- ReLU ---

TEST_P(KernelsNn, ReluMatchesWorkerModel) {
  std::vector<float> v = Random(1000, 12);
  v[0] = 0.0f;
  v[1] = -0.0f;
  v[2] = std::nanf("");
  v[3] = -std::numeric_limits<float>::infinity();
  v[4] = std::numeric_limits<float>::infinity();
  std::vector<float> y_ref = v;
  ReluForward(y_ref.data(), int64_t(y_ref.size()));
  float* y = Up(v);
  ASSERT_TRUE(ops_->ReluForward(y, int64_t(v.size())).ok());
  ExpectBitwise(Down(y, v.size()), y_ref, "relu forward");

  const std::vector<float> dv0 = Random(v.size(), 13);
  std::vector<float> dv_ref = dv0;
  ReluBackward(y_ref.data(), int64_t(v.size()), dv_ref.data());
  float* dv = Up(dv0);
  ASSERT_TRUE(ops_->ReluBackward(y, int64_t(v.size()), dv).ok());
  ExpectBitwise(Down(dv, v.size()), dv_ref, "relu backward");
}

TEST_P(KernelsNn, ReluBackwardMatchesFiniteDifferences) {
  // Inputs at least 0.1 away from the kink; L = Σ g·relu(v).
  std::vector<float> v = Random(64, 14, 0.1f, 1.0f);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
  const std::vector<float> g = Random(v.size(), 15);
  auto loss = [&]() {
    float* y = Up(v);
    EXPECT_TRUE(ops_->ReluForward(y, int64_t(v.size())).ok());
    return Dot(g, Down(y, v.size()));
  };
  float* y = Up(v);
  ASSERT_TRUE(ops_->ReluForward(y, int64_t(v.size())).ok());
  float* dv = Up(g);
  ASSERT_TRUE(ops_->ReluBackward(y, int64_t(v.size()), dv).ok());
  const std::vector<float> grad = Down(dv, v.size());
  ExpectCentralDifferences(v, grad, loss, 1e-2f, 1e-4, "dv");
}

// --- Softmax cross-entropy and accuracy ---

TEST_P(KernelsNn, SoftmaxCrossEntropyMatchesWorkerModel) {
  struct Shape {
    int batch, classes;
  };
  for (Shape s : {Shape{1, 1}, Shape{3, 10}, Shape{64, 10}, Shape{17, 100}}) {
    SCOPED_TRACE("batch=" + std::to_string(s.batch) + " classes=" + std::to_string(s.classes));
    std::vector<float> z = Random(size_t(s.batch) * s.classes, 16, -8.0f, 8.0f);
    // Some rows with ties (lowest index wins the arg-max).
    const std::vector<float> q = Quantized(z.size(), 17);
    for (size_t i = 0; i < z.size() / 2; ++i) z[i] = q[i];
    const std::vector<uint8_t> labels = Labels(s.batch, s.classes, 18);
    std::vector<float> d_ref(z.size());
    int64_t correct_ref = -1;
    const float loss_ref = SoftmaxCrossEntropy(z.data(), labels.data(), s.batch, s.classes,
                                               d_ref.data(), &correct_ref);

    float* dz = Up(z);
    float* d = Zeros(z.size());
    XentResult r;
    ASSERT_TRUE(ops_->SoftmaxCrossEntropy(dz, labels.data(), s.batch, s.classes, d, &r).ok());
    EXPECT_EQ(r.correct, correct_ref);
    if (cpu()) {
      EXPECT_EQ(std::bit_cast<uint32_t>(r.loss), std::bit_cast<uint32_t>(loss_ref))
          << r.loss << " vs " << loss_ref;
    } else {
      EXPECT_NEAR(r.loss, loss_ref, 1e-6 * std::max(1.0f, std::fabs(loss_ref)));
    }
    ExpectCpuBitwise(Down(d, z.size()), d_ref, "dlogits", 1e-6);

    XentResult no_grad;
    ASSERT_TRUE(
        ops_->SoftmaxCrossEntropy(dz, labels.data(), s.batch, s.classes, nullptr, &no_grad).ok());
    EXPECT_EQ(std::bit_cast<uint32_t>(no_grad.loss), std::bit_cast<uint32_t>(r.loss));
    int64_t correct = -1;
    ASSERT_TRUE(ops_->CountCorrect(dz, labels.data(), s.batch, s.classes, &correct).ok());
    EXPECT_EQ(correct, correct_ref);
  }
}

TEST_P(KernelsNn, SoftmaxCrossEntropyBackwardMatchesFiniteDifferences) {
  const int batch = 4, classes = 5;
  std::vector<float> z = Random(size_t(batch) * classes, 19, -2.0f, 2.0f);
  const std::vector<uint8_t> labels = Labels(batch, classes, 20);
  float* d = Zeros(z.size());
  XentResult r;
  ASSERT_TRUE(ops_->SoftmaxCrossEntropy(Up(z), labels.data(), batch, classes, d, &r).ok());
  const std::vector<float> grad = Down(d, z.size());
  auto loss = [&]() {
    XentResult out;
    EXPECT_TRUE(
        ops_->SoftmaxCrossEntropy(Up(z), labels.data(), batch, classes, nullptr, &out).ok());
    return double{out.loss};
  };
  ExpectCentralDifferences(z, grad, loss, 1e-2f, 5e-4, "dlogits");
}

TEST_P(KernelsNn, SoftmaxCrossEntropyRejectsBadLabels) {
  const std::vector<float> z = Random(20, 21);
  const std::vector<uint8_t> labels = {0, 1, 4, 9};  // 9 >= 5 classes
  float* dz = Up(z);
  float* d = Zeros(z.size());
  XentResult r;
  EXPECT_EQ(ops_->SoftmaxCrossEntropy(dz, labels.data(), 4, 5, d, &r).code(),
            StatusCode::kInvalidArgument);
  int64_t correct = 0;
  EXPECT_EQ(ops_->CountCorrect(dz, labels.data(), 4, 5, &correct).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ops_->SoftmaxCrossEntropy(dz, labels.data(), 0, 5, d, &r).code(),
            StatusCode::kInvalidArgument);
  ExpectBitwise(Down(d, z.size()), std::vector<float>(z.size(), 0.0f), "untouched");
}

// --- im2col / col2im ---

struct ConvShape {
  int batch, h, w, c, k;
};
const ConvShape kConvShapes[] = {
    {2, 28, 28, 1, 5}, {2, 12, 12, 8, 5}, {3, 7, 5, 3, 3}, {1, 4, 4, 2, 4}, {2, 3, 3, 1, 1}};

TEST_P(KernelsNn, Im2ColCol2ImMatchWorkerModel) {
  for (const ConvShape& s : kConvShapes) {
    SCOPED_TRACE(std::to_string(s.batch) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                 "x" + std::to_string(s.c) + " k=" + std::to_string(s.k));
    const int oh = s.h - s.k + 1, ow = s.w - s.k + 1;
    const size_t nx = size_t(s.batch) * s.h * s.w * s.c;
    const size_t np = size_t(s.batch) * oh * ow * s.k * s.k * s.c;
    const std::vector<float> x = Random(nx, 22);
    std::vector<float> p_ref(np);
    Im2Col(x.data(), s.batch, s.h, s.w, s.c, s.k, p_ref.data());
    float* p = Zeros(np);
    ASSERT_TRUE(ops_->Im2Col(Up(x), s.batch, s.h, s.w, s.c, s.k, p).ok());
    ExpectBitwise(Down(p, np), p_ref, "patches");

    const std::vector<float> dp = Random(np, 23);
    std::vector<float> dx_ref(nx);
    Col2Im(dp.data(), s.batch, s.h, s.w, s.c, s.k, dx_ref.data());
    float* dx = Up(Random(nx, 24));  // overwritten
    ASSERT_TRUE(ops_->Col2Im(Up(dp), s.batch, s.h, s.w, s.c, s.k, dx).ok());
    // The same additions in the same order on both backends.
    ExpectBitwise(Down(dx, nx), dx_ref, "dx");

    // Col2Im is the adjoint of Im2Col: <Im2Col(x), dp> = <x, Col2Im(dp)>.
    double lhs = 0.0, rhs = 0.0;
    for (size_t i = 0; i < np; ++i) lhs += double{p_ref[i]} * dp[i];
    for (size_t i = 0; i < nx; ++i) rhs += double{x[i]} * dx_ref[i];
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::max(1.0, std::fabs(lhs)));
  }
}

TEST_P(KernelsNn, Im2ColRejectsBadGeometry) {
  EXPECT_EQ(ops_->Im2Col(nullptr, 1, 3, 3, 1, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ops_->Col2Im(nullptr, 1, 3, 3, 1, 0, nullptr).code(), StatusCode::kInvalidArgument);
}

// --- max-pool ---

TEST_P(KernelsNn, MaxPoolMatchesWorkerModel) {
  struct Shape {
    int batch, h, w, c;
  };
  for (Shape s : {Shape{2, 24, 24, 8}, Shape{3, 8, 8, 16}, Shape{1, 2, 6, 3}}) {
    SCOPED_TRACE(std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c));
    const size_t nx = size_t(s.batch) * s.h * s.w * s.c, ny = nx / 4;
    const std::vector<float> x = Quantized(nx, 25);  // many ties: the first maximum wins
    std::vector<float> y_ref(ny);
    std::vector<int32_t> am_ref(ny);
    MaxPool2x2Forward(x.data(), s.batch, s.h, s.w, s.c, y_ref.data(), am_ref.data());
    float* y = Zeros(ny);
    int32_t* am = IntZeros(ny);
    ASSERT_TRUE(ops_->MaxPool2x2Forward(Up(x), s.batch, s.h, s.w, s.c, y, am).ok());
    ExpectBitwise(Down(y, ny), y_ref, "y");
    EXPECT_EQ(DownInt(am, ny), am_ref);

    const std::vector<float> dy = Random(ny, 26);
    std::vector<float> dx_ref(nx);
    MaxPool2x2Backward(dy.data(), am_ref.data(), s.batch, s.h, s.w, s.c, dx_ref.data());
    float* dx = Up(Random(nx, 27));  // overwritten
    ASSERT_TRUE(ops_->MaxPool2x2Backward(Up(dy), am, s.batch, s.h, s.w, s.c, dx).ok());
    ExpectBitwise(Down(dx, nx), dx_ref, "dx");
  }
}

TEST_P(KernelsNn, MaxPoolBackwardMatchesFiniteDifferences) {
  const int batch = 2, h = 4, w = 6, c = 3;
  const size_t nx = size_t(batch) * h * w * c, ny = nx / 4;
  // Distinct values at least 0.05 apart, so that a ±0.01 step never changes the arg-max.
  std::vector<float> x(nx);
  std::mt19937 rng(28);
  std::vector<int> perm(nx);
  for (size_t i = 0; i < nx; ++i) perm[i] = int(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (size_t i = 0; i < nx; ++i) x[i] = 0.05f * float(perm[i]) - 1.0f;
  const std::vector<float> g = Random(ny, 29);
  int32_t* am = IntZeros(ny);
  auto loss = [&]() {
    float* y = Zeros(ny);
    EXPECT_TRUE(ops_->MaxPool2x2Forward(Up(x), batch, h, w, c, y, am).ok());
    return Dot(g, Down(y, ny));
  };
  loss();  // leaves x's arg-max in am
  float* dx = Zeros(nx);
  ASSERT_TRUE(ops_->MaxPool2x2Backward(Up(g), am, batch, h, w, c, dx).ok());
  const std::vector<float> grad = Down(dx, nx);
  ExpectCentralDifferences(x, grad, loss, 1e-2f, 1e-4, "dx");
}

TEST_P(KernelsNn, MaxPoolRejectsOddSizes) {
  EXPECT_EQ(ops_->MaxPool2x2Forward(nullptr, 1, 3, 4, 1, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ops_->MaxPool2x2Backward(nullptr, nullptr, 1, 4, 5, 1, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// --- weight decay and the UPDATE scatter ---

TEST_P(KernelsNn, WeightDecayAddMatchesTrainerLoop) {
  const std::vector<float> w = Random(777, 30), g0 = Random(777, 31);
  const float wd = 5e-4f;
  std::vector<float> want = g0;
  for (size_t i = 0; i < want.size(); ++i) want[i] += wd * w[i];  // worker/trainer/trainer.cc
  float* g = Up(g0);
  ASSERT_TRUE(ops_->WeightDecayAdd(Up(w), w.size(), wd, g).ok());
  ExpectBitwise(Down(g, want.size()), want, "g");
}

TEST_P(KernelsNn, ScatterSetMatchesBruteForceAndChecksIndices) {
  const size_t n = 1000;
  const std::vector<float> w0 = Random(n, 32);
  std::vector<uint32_t> idx;
  for (uint32_t i = 3; i < n; i += 7) idx.push_back(i);
  idx.push_back(0);
  idx.push_back(uint32_t(n - 1));
  const std::vector<float> vals = Random(idx.size(), 33);
  std::vector<float> want = w0;
  for (size_t j = 0; j < idx.size(); ++j) want[idx[j]] = vals[j];
  float* w = Up(w0);
  ASSERT_TRUE(ops_->ScatterSet(idx.data(), vals.data(), idx.size(), w, n).ok());
  ExpectBitwise(Down(w, n), want, "w");

  std::vector<uint32_t> bad = {1, uint32_t(n)};
  EXPECT_EQ(ops_->ScatterSet(bad.data(), vals.data(), bad.size(), w, n).code(),
            StatusCode::kOutOfRange);
  ExpectBitwise(Down(w, n), want, "w unchanged");
  EXPECT_TRUE(ops_->ScatterSet(nullptr, nullptr, 0, w, n).ok());
}

TEST_P(KernelsNn, GatherRowsMatchesBruteForceAndChecksRows) {
  const int64_t src_rows = 50;
  const int row_size = 13;
  const std::vector<float> src0 = Random(src_rows * row_size, 34);
  const std::vector<int64_t> rows = {7, 0, 49, 7, 21};
  std::vector<float> want;
  for (int64_t r : rows) {
    want.insert(want.end(), src0.begin() + r * row_size, src0.begin() + (r + 1) * row_size);
  }
  float* src = Up(src0);
  float* dst = Zeros(want.size());
  ASSERT_TRUE(ops_->GatherRows(src, src_rows, row_size, rows.data(), 5, dst).ok());
  ExpectBitwise(Down(dst, want.size()), want, "gathered");

  const std::vector<float> before = Down(dst, want.size());
  for (int64_t bad : {int64_t{-1}, src_rows}) {
    const std::vector<int64_t> bad_rows = {1, bad};
    EXPECT_EQ(ops_->GatherRows(src, src_rows, row_size, bad_rows.data(), 2, dst).code(),
              StatusCode::kOutOfRange);
  }
  ExpectBitwise(Down(dst, want.size()), before, "dst unchanged");
  EXPECT_TRUE(ops_->GatherRows(src, src_rows, row_size, nullptr, 0, dst).ok());
}

TEST_P(KernelsNn, EmptyInputsAreNoOps) {
  EXPECT_TRUE(ops_->ReluForward(nullptr, 0).ok());
  EXPECT_TRUE(ops_->ReluBackward(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(ops_->BiasAdd(nullptr, 0, 4, nullptr).ok());
  EXPECT_TRUE(ops_->WeightDecayAdd(nullptr, 0, 1.0f, nullptr).ok());
  EXPECT_TRUE(ops_->MaxPool2x2Forward(nullptr, 0, 4, 4, 1, nullptr, nullptr).ok());
  EXPECT_EQ(ops_->ReluForward(nullptr, -1).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, KernelsNn, ::testing::Values(Device::kCpu, Device::kCuda),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           return std::string(DeviceName(info.param));
                         });

// Create(Device) brings its own context; the ops and context() work together.
TEST_P(KernelsNn, CreateForDeviceOwnsItsContext) {
  StatusOr<std::unique_ptr<NnOps>> own = NnOps::Create(GetParam());
  ASSERT_TRUE(own.ok()) << own.status().message();
  BackendContext* ctx = (*own)->context();
  ASSERT_NE(ctx, nullptr);
  EXPECT_NE(ctx, ctx_.get());
  EXPECT_EQ(ctx->device(), GetParam());
  EXPECT_EQ(ops_->context(), ctx_.get());
  StatusOr<float*> v = ctx->Alloc(3);
  ASSERT_TRUE(v.ok());
  const std::vector<float> in = {-1.0f, 2.0f, -0.5f};
  ASSERT_TRUE(ctx->FromHost(in.data(), in.size(), *v).ok());
  ASSERT_TRUE((*own)->ReluForward(*v, 3).ok());
  std::vector<float> out(3);
  ASSERT_TRUE(ctx->ToHost(*v, 3, out.data()).ok());
  ctx->Free(*v);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 2.0f, 0.0f}));
}

TEST(KernelsNnCreate, RejectsNullContext) {
  EXPECT_EQ(NnOps::Create(nullptr).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sieve
