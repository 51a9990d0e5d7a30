#include "worker/model/mlp_model.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "worker/model/dense_layer.h"

namespace sieve {

MlpModel::MlpModel(ModelLayout layout, std::unique_ptr<NnOps> ops)
    : Model(std::move(ops)), layout_(std::move(layout)), delta_a_(context()), delta_b_(context()) {
  auto layers = MlpLayersOf(layout_, input_size(), num_classes());
  CHECK(layers.ok()) << layers.status().ToString();
  layers_ = std::move(layers).value();
  for (const Layer& l : layers_) {
    widest_ = std::max(widest_, l.out);
    activations_.emplace_back(context());
  }
}

Status MlpModel::Run(const float* params, const float* x, const uint8_t* labels, int batch,
                     float* grad, XentResult* out) {
  NnOps& nn = this->nn();
  const int num_layers = static_cast<int>(layers_.size());
  for (int l = 0; l < num_layers; ++l) {
    const Layer& layer = layers_[l];
    const int64_t n = int64_t{batch} * layer.out;
    SIEVE_RETURN_IF_ERROR(activations_[l].Reserve(static_cast<size_t>(n)));
    const float* in = l == 0 ? x : activations_[l - 1].data();
    SIEVE_RETURN_IF_ERROR(DenseForward(nn, in, batch, layer.in, params + layer.weight_offset,
                                       params + layer.bias_offset, layer.out,
                                       activations_[l].data()));
    if (l + 1 < num_layers) SIEVE_RETURN_IF_ERROR(nn.ReluForward(activations_[l].data(), n));
  }
  const size_t widest = static_cast<size_t>(batch) * widest_;
  SIEVE_RETURN_IF_ERROR(delta_a_.Reserve(widest));
  SIEVE_RETURN_IF_ERROR(delta_b_.Reserve(widest));
  float* delta = grad != nullptr ? delta_a_.data() : nullptr;
  SIEVE_RETURN_IF_ERROR(
      nn.SoftmaxCrossEntropy(activations_.back().data(), labels, batch, num_classes(), delta, out));
  if (grad == nullptr) return Status::Ok();

  float* prev_delta = delta_b_.data();
  for (int l = num_layers - 1; l >= 0; --l) {
    const Layer& layer = layers_[l];
    const float* in = l == 0 ? x : activations_[l - 1].data();
    SIEVE_RETURN_IF_ERROR(DenseBackward(nn, in, batch, layer.in, params + layer.weight_offset,
                                        layer.out, delta, grad + layer.weight_offset,
                                        grad + layer.bias_offset, l == 0 ? nullptr : prev_delta));
    if (l > 0) {
      SIEVE_RETURN_IF_ERROR(
          nn.ReluBackward(activations_[l - 1].data(), int64_t{batch} * layer.in, prev_delta));
      std::swap(delta, prev_delta);
    }
  }
  return Status::Ok();
}

}  // namespace sieve
