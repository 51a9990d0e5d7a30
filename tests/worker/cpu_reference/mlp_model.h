// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// MlpModel: a multilayer perceptron with ReLU between dense layers and softmax cross-entropy on
// top. Softmax regression is the MLP without hidden layers ("softmax", 784 -> 10) and FNN-3 is
// 784 -> 200 -> 200 -> 10 ("fnn3"). Parameters follow the layout's "fc*.weight" [out][in] and
// "fc*.bias" [out] segments in order. Contract and thread-safety: see model.h.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_MLP_MODEL_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_MLP_MODEL_H_

#include <cstdint>
#include <vector>

#include "kernels/model/model_layout.h"
#include "tests/worker/cpu_reference/model.h"

namespace sieve::cpu_reference {

class MlpModel : public Model {
 public:
  // `layout` must consist of (weight [out][in], bias [out]) pairs whose sizes chain from
  // input_size() to num_classes() (CHECKed; the built-in layouts do).
  explicit MlpModel(ModelLayout layout);

  const ModelLayout& layout() const override { return layout_; }

 protected:
  float Run(const float* params, const float* x, const uint8_t* labels, int batch, float* grad,
            int64_t* correct) override;

 private:
  using Layer = DenseLayerSpec;

  ModelLayout layout_;
  std::vector<Layer> layers_;
  // Scratch, grown to the largest batch: activations[l] is the output of layer l (post-ReLU for
  // hidden layers, logits for the last); deltas are dL/d(pre-activation) ping-pong buffers.
  std::vector<std::vector<float>> activations_;
  std::vector<float> delta_a_;
  std::vector<float> delta_b_;
};

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_MLP_MODEL_H_
