#include "tests/worker/cpu_reference/cnn_model.h"

#include <glog/logging.h>

#include <utility>

#include "tests/worker/cpu_reference/cross_entropy.h"
#include "tests/worker/cpu_reference/dense.h"
#include "tests/worker/cpu_reference/im2col.h"
#include "tests/worker/cpu_reference/max_pool.h"
#include "tests/worker/cpu_reference/relu.h"

namespace sieve::cpu_reference {
namespace {

// Geometry of the "cnn" layout.
constexpr int kIn = 28, kK = 5;
constexpr int kC1 = 8, kH1 = kIn - kK + 1, kP1 = kH1 / 2;   // 24 -> 12
constexpr int kC2 = 16, kH2 = kP1 - kK + 1, kP2 = kH2 / 2;  // 8 -> 4
constexpr int kFlat = kP2 * kP2 * kC2;                      // 256
constexpr int kHidden = 64, kClasses = 10;
constexpr int kPatch1 = kK * kK * 1, kPatch2 = kK * kK * kC1;

template <typename T>
T* Grow(std::vector<T>& v, int64_t n) {
  v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

CnnModel::CnnModel(ModelLayout layout) : layout_(std::move(layout)) {
  auto offsets = [this](const char* prefix, std::vector<int64_t> shape) {
    const std::string p(prefix);
    const Segment* w = layout_.Find(p + ".weight");
    const Segment* b = layout_.Find(p + ".bias");
    CHECK(w != nullptr && b != nullptr) << layout_.name << " lacks " << p;
    CHECK(w->shape == shape) << p << ".weight has an unexpected shape";
    CHECK_EQ(b->length, static_cast<uint64_t>(shape[0])) << p;
    return Offsets{w->offset, b->offset};
  };
  conv1_ = offsets("conv1", {kC1, kK, kK, 1});
  conv2_ = offsets("conv2", {kC2, kK, kK, kC1});
  fc1_ = offsets("fc1", {kHidden, kFlat});
  fc2_ = offsets("fc2", {kClasses, kHidden});
}

float CnnModel::Run(const float* params, const float* x, const uint8_t* labels, int batch,
                    float* grad, int64_t* correct) {
  const int64_t b = batch;
  const int64_t rows1 = b * kH1 * kH1;  // output pixels of conv1
  const int64_t rows2 = b * kH2 * kH2;
  const int64_t n_act1 = rows1 * kC1;
  const int64_t n_act2 = rows2 * kC2;

  // Forward.
  float* patches1 = Grow(patches1_, rows1 * kPatch1);
  float* act1 = Grow(act1_, n_act1);
  float* pool1 = Grow(pool1_, b * kP1 * kP1 * kC1);
  float* patches2 = Grow(patches2_, rows2 * kPatch2);
  float* act2 = Grow(act2_, n_act2);
  float* pool2 = Grow(pool2_, b * kFlat);
  float* hidden = Grow(hidden_, b * kHidden);
  float* logits = Grow(logits_, b * kClasses);
  int32_t* argmax1 = Grow(argmax1_, b * kP1 * kP1 * kC1);
  int32_t* argmax2 = Grow(argmax2_, b * kFlat);

  Im2Col(x, batch, kIn, kIn, 1, kK, patches1);
  DenseForward(patches1, static_cast<int>(rows1), kPatch1, params + conv1_.w, params + conv1_.b,
               kC1, act1);
  ReluForward(act1, n_act1);
  MaxPool2x2Forward(act1, batch, kH1, kH1, kC1, pool1, argmax1);
  Im2Col(pool1, batch, kP1, kP1, kC1, kK, patches2);
  DenseForward(patches2, static_cast<int>(rows2), kPatch2, params + conv2_.w, params + conv2_.b,
               kC2, act2);
  ReluForward(act2, n_act2);
  MaxPool2x2Forward(act2, batch, kH2, kH2, kC2, pool2, argmax2);
  DenseForward(pool2, batch, kFlat, params + fc1_.w, params + fc1_.b, kHidden, hidden);
  ReluForward(hidden, b * kHidden);
  DenseForward(hidden, batch, kHidden, params + fc2_.w, params + fc2_.b, kClasses, logits);

  float* d_logits = grad != nullptr ? Grow(d_logits_, b * kClasses) : nullptr;
  const float loss = SoftmaxCrossEntropy(logits, labels, batch, kClasses, d_logits, correct);
  if (grad == nullptr) return loss;

  // Backward, layer by layer in reverse.
  float* d_hidden = Grow(d_hidden_, b * kHidden);
  float* d_pool2 = Grow(d_pool2_, b * kFlat);
  float* d_act2 = Grow(d_act2_, n_act2);
  float* d_patches2 = Grow(d_patches2_, rows2 * kPatch2);
  float* d_pool1 = Grow(d_pool1_, b * kP1 * kP1 * kC1);
  float* d_act1 = Grow(d_act1_, n_act1);

  DenseBackward(hidden, batch, kHidden, params + fc2_.w, kClasses, d_logits, grad + fc2_.w,
                grad + fc2_.b, d_hidden);
  ReluBackward(hidden, b * kHidden, d_hidden);
  DenseBackward(pool2, batch, kFlat, params + fc1_.w, kHidden, d_hidden, grad + fc1_.w,
                grad + fc1_.b, d_pool2);
  MaxPool2x2Backward(d_pool2, argmax2, batch, kH2, kH2, kC2, d_act2);
  ReluBackward(act2, n_act2, d_act2);
  DenseBackward(patches2, static_cast<int>(rows2), kPatch2, params + conv2_.w, kC2, d_act2,
                grad + conv2_.w, grad + conv2_.b, d_patches2);
  Col2Im(d_patches2, batch, kP1, kP1, kC1, kK, d_pool1);
  MaxPool2x2Backward(d_pool1, argmax1, batch, kH1, kH1, kC1, d_act1);
  ReluBackward(act1, n_act1, d_act1);
  DenseBackward(patches1, static_cast<int>(rows1), kPatch1, params + conv1_.w, kC1, d_act1,
                grad + conv1_.w, grad + conv1_.b, nullptr);
  return loss;
}

}  // namespace sieve::cpu_reference
