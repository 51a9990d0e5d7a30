// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// CnnModel: the small convolutional network of the "cnn" layout (kernels/model/model_layout.h):
//   x 28x28x1 -> conv1 5x5 (8) -> ReLU -> maxpool 2x2 -> conv2 5x5 (16) -> ReLU -> maxpool 2x2
//   -> flatten (y, x, c) 256 -> fc1 64 -> ReLU -> fc2 10 -> softmax cross-entropy.
// Activations are NHWC; each convolution is Im2Col + one sgemm. About 0.35 MFLOP forward per
// example; measured ~4-7 ms per ForwardBackward of batch 32 on 2 CPU cores (one 60k epoch in
// ~8-14 s). Contract and thread-safety: see model.h.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_CNN_MODEL_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_CNN_MODEL_H_

#include <cstdint>
#include <vector>

#include "kernels/model/model_layout.h"
#include "tests/worker/cpu_reference/model.h"

namespace sieve::cpu_reference {

class CnnModel : public Model {
 public:
  // `layout` must be MakeModelLayout("cnn") (CHECKed).
  explicit CnnModel(ModelLayout layout);

  const ModelLayout& layout() const override { return layout_; }

 protected:
  float Run(const float* params, const float* x, const uint8_t* labels, int batch, float* grad,
            int64_t* correct) override;

 private:
  // Offsets of the weight and bias segments of one layer.
  struct Offsets {
    uint64_t w = 0;
    uint64_t b = 0;
  };

  ModelLayout layout_;
  Offsets conv1_, conv2_, fc1_, fc2_;
  // Scratch, grown to the largest batch seen (see Run for the shapes).
  std::vector<float> patches1_, act1_, pool1_, patches2_, act2_, pool2_, hidden_, logits_;
  std::vector<int32_t> argmax1_, argmax2_;
  std::vector<float> d_logits_, d_hidden_, d_pool2_, d_act2_, d_patches2_, d_pool1_, d_act1_;
};

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_CNN_MODEL_H_
