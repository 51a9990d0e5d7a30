// MlpModel: a multilayer perceptron with ReLU between dense layers and softmax cross-entropy on
// top. Softmax regression is the MLP without hidden layers ("softmax", 784 -> 10) and FNN-3 is
// 784 -> 200 -> 200 -> 10 ("fnn3"). Parameters follow the layout's "fc*.weight" [out][in] and
// "fc*.bias" [out] segments in order. Contract, memory and thread-safety: see model.h.
#ifndef SIEVE_WORKER_MODEL_MLP_MODEL_H_
#define SIEVE_WORKER_MODEL_MLP_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/model/model_layout.h"
#include "kernels/nn/device_buffer.h"
#include "worker/model/model.h"

namespace sieve {

class MlpModel : public Model {
 public:
  // `layout` must consist of (weight [out][in], bias [out]) pairs whose sizes chain from
  // input_size() to num_classes() (CHECKed; the built-in layouts do).
  MlpModel(ModelLayout layout, std::unique_ptr<NnOps> ops);
  const ModelLayout& layout() const override { return layout_; }

 protected:
  Status Run(const float* params, const float* x, const uint8_t* labels, int batch, float* grad,
             XentResult* out) override;

 private:
  using Layer = DenseLayerSpec;
  ModelLayout layout_;
  std::vector<Layer> layers_;
  int widest_ = 0;
  // Device scratch, grown to the largest batch: activations_[l] is the output of layer l
  // (post-ReLU for hidden layers, logits for the last); the deltas are dL/d(pre-activation)
  // ping-pong buffers.
  std::vector<DeviceBuffer> activations_;
  DeviceBuffer delta_a_;
  DeviceBuffer delta_b_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_MLP_MODEL_H_
