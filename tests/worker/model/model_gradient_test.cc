// Whole-model checks, for every model: the float forward pass against the double reference, the
// analytic gradient against central differences of the double reference (all layers, a sample of
// every segment) and against float central differences of the model itself, and the contract of
// ForwardBackward / Evaluate. On the CPU backend, where the model's buffers are host memory; the
// models against the CPU reference model and across backends are in model_backend_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "kernels/model/param_init.h"
#include "tests/worker/model/reference_model.h"
#include "worker/model/model.h"

namespace sieve {
namespace {

using reference::Vec;

// The loss (and, when grad is not null, the gradient) of a batch; fails the test on an error.
float LossOf(Model& m, const std::vector<float>& params, const float* x, const uint8_t* labels,
             int batch, float* grad = nullptr, int64_t* correct = nullptr) {
  float loss = std::numeric_limits<float>::quiet_NaN();
  const Status st = grad != nullptr
                        ? m.ForwardBackward(params.data(), x, labels, batch, grad, &loss)
                        : m.Loss(params.data(), x, labels, batch, &loss, correct);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return loss;
}

EvalResult EvaluateOf(Model& m, const std::vector<float>& params, const std::vector<float>& x,
                      const std::vector<uint8_t>& labels, int64_t n, int max_batch = 500) {
  EvalResult r;
  const Status st = m.Evaluate(params.data(), x.data(), labels.data(), n, &r, max_batch);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

struct Problem {
  std::unique_ptr<Model> model;
  std::vector<float> params;
  std::vector<float> x;
  std::vector<uint8_t> labels;
  int batch = 0;
};

Problem MakeProblem(const std::string& name, int batch, uint32_t seed) {
  Problem p;
  StatusOr<std::unique_ptr<Model>> m = MakeModel(name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  p.model = std::move(*m);
  p.params = InitParams(p.model->layout(), seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.05f), pixel(0.0f, 1.0f);
  for (float& v : p.params) v += noise(rng);  // non-zero softmax weights and biases too
  p.batch = batch;
  p.x.resize(static_cast<size_t>(batch) * 784);
  for (float& v : p.x) v = pixel(rng);
  for (int b = 0; b < batch; ++b) p.labels.push_back(static_cast<uint8_t>(rng() % 10));
  return p;
}

// Up to `per_segment` random coordinates of every segment.
std::vector<size_t> SampleCoordinates(const ModelLayout& layout, int per_segment, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<size_t> which;
  for (const Segment& s : layout.segments) {
    for (int j = 0; j < per_segment && static_cast<uint64_t>(j) < s.length; ++j) {
      which.push_back(s.offset +
                      (s.length <= static_cast<uint64_t>(per_segment) ? j : rng() % s.length));
    }
  }
  return which;
}

class WorkerModelGradient : public ::testing::TestWithParam<const char*> {};

TEST_P(WorkerModelGradient, ForwardMatchesDoubleReference) {
  Problem p = MakeProblem(GetParam(), 5, 11);
  const double want = reference::RefModelLoss(p.model->layout(), reference::ToDouble(p.params),
                                              reference::ToDouble(p.x), p.labels.data(), p.batch);
  const float got = LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch);
  EXPECT_NEAR(got, want, 1e-4 * (1 + std::fabs(want)));
}

TEST_P(WorkerModelGradient, MatchesDoublePrecisionCentralDifferences) {
  Problem p = MakeProblem(GetParam(), 4, 12);
  std::vector<float> grad(p.model->num_params());
  LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch, grad.data());
  const std::vector<size_t> which = SampleCoordinates(p.model->layout(), 16, 3);
  const Vec x = reference::ToDouble(p.x);
  const Vec numeric = reference::CentralDifferences(
      [&](const Vec& params) {
        return reference::RefModelLoss(p.model->layout(), params, x, p.labels.data(), p.batch);
      },
      reference::ToDouble(p.params), which, 1e-6);
  reference::ExpectGradientClose(grad, numeric, which, 1e-2, 1e-5, GetParam());
}

// Float differences of the model itself: too noisy for cnn_large's 1024- and 2048-wide sums (the
// double-precision check above covers it).
class WorkerModelFloatDifferences : public ::testing::TestWithParam<const char*> {};

TEST_P(WorkerModelFloatDifferences, MatchesFloatCentralDifferences) {
  Problem p = MakeProblem(GetParam(), 8, 13);
  std::vector<float> grad(p.model->num_params());
  LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch, grad.data());
  const std::vector<size_t> which = SampleCoordinates(p.model->layout(), 12, 4);
  constexpr float kEps = 1e-3f;
  int good = 0;
  for (size_t i : which) {
    const float keep = p.params[i];
    p.params[i] = keep + kEps;
    const float up = LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch);
    p.params[i] = keep - kEps;
    const float down = LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch);
    p.params[i] = keep;
    const double numeric = (double{up} - down) / (2.0 * kEps);
    // Float loss rounding (~1e-7 of ~2.3) over 2e-3 gives ~1e-4 of noise; allow for it.
    good += std::fabs(grad[i] - numeric) <= 1e-2 * std::fabs(numeric) + 5e-4;
  }
  // ReLU and max-pool kinks can sit within eps of a sampled point; allow a few.
  EXPECT_GE(good, static_cast<int>(which.size() * 0.95)) << "of " << which.size();
}

TEST_P(WorkerModelGradient, OverwritesGradAndIsDeterministic) {
  Problem p = MakeProblem(GetParam(), 6, 14);
  const size_t d = p.model->num_params();
  std::vector<float> first(d, std::numeric_limits<float>::quiet_NaN());
  const float loss1 =
      LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch, first.data());
  for (size_t i = 0; i < d; ++i) ASSERT_TRUE(std::isfinite(first[i])) << i;
  // A bigger batch grows the scratch buffers; the small batch must still give the same answer.
  Problem big = MakeProblem(GetParam(), 32, 15);
  std::vector<float> scratch(d);
  LossOf(*p.model, p.params, big.x.data(), big.labels.data(), big.batch, scratch.data());
  std::vector<float> second(d, 7.0f);
  const float loss2 =
      LossOf(*p.model, p.params, p.x.data(), p.labels.data(), p.batch, second.data());
  EXPECT_EQ(loss1, loss2);
  for (size_t i = 0; i < d; ++i)
    ASSERT_NEAR(first[i], second[i], 1e-6f * (1 + std::fabs(first[i])));
}

TEST_P(WorkerModelGradient, EvaluateAgreesWithOneBigBatch) {
  Problem p = MakeProblem(GetParam(), 10, 16);
  int64_t correct = 0;
  const float loss = LossOf(*p.model, p.params, p.x.data(), p.labels.data(), 10, nullptr, &correct);
  const EvalResult r = EvaluateOf(*p.model, p.params, p.x, p.labels, 10, 3);
  EXPECT_NEAR(r.loss, loss, 1e-5 * (1 + std::fabs(loss)));
  EXPECT_EQ(r.correct, correct);
  EXPECT_EQ(r.count, 10);
  EXPECT_DOUBLE_EQ(r.accuracy, correct / 10.0);
  const EvalResult empty = EvaluateOf(*p.model, p.params, p.x, p.labels, 0);
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.loss, 0.0);
}

INSTANTIATE_TEST_SUITE_P(AllModels, WorkerModelGradient,
                         ::testing::Values("softmax", "fnn3", "cnn", "cnn_large"));
INSTANTIATE_TEST_SUITE_P(SmallModels, WorkerModelFloatDifferences,
                         ::testing::Values("softmax", "fnn3", "cnn"));

TEST(WorkerModelFactory, SizesAndErrors) {
  for (const auto& [name, d] : {std::pair<const char*, uint64_t>{"softmax", 7850},
                                {"fnn3", 199210},
                                {"cnn", 20522},
                                {"cnn_large", 2171786}}) {
    StatusOr<std::unique_ptr<Model>> m = MakeModel(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ((*m)->num_params(), d) << name;
    EXPECT_EQ((*m)->layout().name, name);
    EXPECT_EQ((*m)->input_size(), 784);
    EXPECT_EQ((*m)->num_classes(), 10);
  }
  EXPECT_EQ(MakeModel("synthetic").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeModel("vgg").status().code(), StatusCode::kNotFound);
}

TEST(WorkerModelErrors, BadBatchAndLabelsAreStatusesAndWriteNothing) {
  Problem p = MakeProblem("fnn3", 4, 17);
  std::vector<float> grad(p.model->num_params(), 5.0f);
  float loss = 9.0f;
  EXPECT_EQ(
      p.model->ForwardBackward(p.params.data(), p.x.data(), p.labels.data(), 0, grad.data(), &loss)
          .code(),
      StatusCode::kInvalidArgument);
  std::vector<uint8_t> bad = p.labels;
  bad[2] = 10;
  EXPECT_EQ(
      p.model->ForwardBackward(p.params.data(), p.x.data(), bad.data(), p.batch, grad.data(), &loss)
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(loss, 9.0f);
  for (float g : grad) ASSERT_EQ(g, 5.0f);
  EvalResult r;
  EXPECT_EQ(p.model->Evaluate(p.params.data(), p.x.data(), p.labels.data(), -1, &r).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sieve
