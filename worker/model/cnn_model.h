// CnnModel: the two-convolution networks of the "cnn" and "cnn_large" layouts
// (kernels/model/model_layout.h):
//   x 28x28x1 -> conv1 kxk (c1) -> ReLU -> maxpool 2x2 -> conv2 kxk (c2) -> ReLU -> maxpool 2x2
//   -> flatten (y, x, c) -> fc1 (hidden) -> ReLU -> fc2 10 -> softmax cross-entropy,
// every convolution "valid" with stride 1. The geometry (k, c1, c2, hidden) is read from the
// layout's segment shapes. Activations are NHWC; each convolution is Im2Col + one GEMM.
//   cnn        k 5, c1 8,  c2 16, hidden 64:   ~0.35 MFLOP forward per example
//   cnn_large  k 5, c1 32, c2 64, hidden 2048: ~12 MFLOP forward per example
// Contract, memory and thread-safety: see model.h.
#ifndef SIEVE_WORKER_MODEL_CNN_MODEL_H_
#define SIEVE_WORKER_MODEL_CNN_MODEL_H_

#include <cstdint>
#include <memory>

#include "kernels/model/model_layout.h"
#include "kernels/nn/device_buffer.h"
#include "worker/model/model.h"

namespace sieve {

class CnnModel : public Model {
 public:
  // `layout` must hold conv1, conv2, fc1 and fc2 (weight, bias) segments of the shapes above that
  // chain from 28x28x1 to 10 classes (CHECKed; the built-in layouts do).
  CnnModel(ModelLayout layout, std::unique_ptr<NnOps> ops);
  const ModelLayout& layout() const override { return layout_; }

 protected:
  Status Run(const float* params, const float* x, const uint8_t* labels, int batch, float* grad,
             XentResult* out) override;

 private:
  // Offsets of the weight and bias segments of one layer.
  struct Offsets {
    uint64_t w = 0;
    uint64_t b = 0;
  };
  // Sizes per example, derived from the layout.
  struct Geometry {
    int k = 0, c1 = 0, c2 = 0, hidden = 0;
    int h1 = 0, p1 = 0, h2 = 0, p2 = 0;  // conv1 out, pool1 out, conv2 out, pool2 out (square)
    int flat = 0;                        // p2·p2·c2
    int patch1 = 0, patch2 = 0;          // k·k·1, k·k·c1
  };
  ModelLayout layout_;
  Geometry g_;
  Offsets conv1_, conv2_, fc1_, fc2_;
  // Device scratch, grown to the largest batch seen (see Run for the shapes).
  DeviceBuffer patches1_, act1_, pool1_, patches2_, act2_, pool2_, hidden_, logits_;
  DeviceInt32Buffer argmax1_, argmax2_;
  DeviceBuffer d_logits_, d_hidden_, d_pool2_, d_act2_, d_patches2_, d_pool1_, d_act1_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_CNN_MODEL_H_
