#include "tests/worker/cpu_reference/mlp_model.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "tests/worker/cpu_reference/cross_entropy.h"
#include "tests/worker/cpu_reference/dense.h"
#include "tests/worker/cpu_reference/relu.h"

namespace sieve::cpu_reference {

MlpModel::MlpModel(ModelLayout layout) : layout_(std::move(layout)) {
  // The layout is read as the worker's model reads it; the arithmetic below is this reference's.
  auto layers = MlpLayersOf(layout_, input_size(), num_classes());
  CHECK(layers.ok()) << layers.status().ToString();
  layers_ = std::move(layers).value();
  activations_.resize(layers_.size());
}

float MlpModel::Run(const float* params, const float* x, const uint8_t* labels, int batch,
                    float* grad, int64_t* correct) {
  const int num_layers = static_cast<int>(layers_.size());
  int widest = 0;
  for (int l = 0; l < num_layers; ++l) {
    const Layer& layer = layers_[l];
    activations_[l].resize(static_cast<size_t>(batch) * layer.out);
    widest = std::max(widest, layer.out);
    const float* in = l == 0 ? x : activations_[l - 1].data();
    DenseForward(in, batch, layer.in, params + layer.weight_offset, params + layer.bias_offset,
                 layer.out, activations_[l].data());
    if (l + 1 < num_layers) ReluForward(activations_[l].data(), int64_t{batch} * layer.out);
  }
  delta_a_.resize(static_cast<size_t>(batch) * widest);
  delta_b_.resize(static_cast<size_t>(batch) * widest);
  float* delta = grad != nullptr ? delta_a_.data() : nullptr;
  const float loss =
      SoftmaxCrossEntropy(activations_.back().data(), labels, batch, num_classes(), delta, correct);
  if (grad == nullptr) return loss;

  float* prev_delta = delta_b_.data();
  for (int l = num_layers - 1; l >= 0; --l) {
    const Layer& layer = layers_[l];
    const float* in = l == 0 ? x : activations_[l - 1].data();
    DenseBackward(in, batch, layer.in, params + layer.weight_offset, layer.out, delta,
                  grad + layer.weight_offset, grad + layer.bias_offset,
                  l == 0 ? nullptr : prev_delta);
    if (l > 0) {
      ReluBackward(activations_[l - 1].data(), int64_t{batch} * layer.in, prev_delta);
      std::swap(delta, prev_delta);
    }
  }
  return loss;
}

}  // namespace sieve::cpu_reference
