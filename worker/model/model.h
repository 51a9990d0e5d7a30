// Model: a classifier whose parameters live in one flat fp32 buffer laid out by a ModelLayout
// (kernels/model/model_layout.h), computed by the model math of kernels/nn (NnOps) on one Device.
//
// Memory: a Model is created for a Device and owns an NnOps on a context of its own (on CUDA: its
// own stream). Every pointer argument named params, x or grad is in that device's memory (host RAM
// on the CPU, GPU global memory on CUDA): allocate them from context(). Labels are host bytes.
// Inputs are normalized images, batch x input_size() floats row-major (worker/data/dataset.h);
// labels are in [0, num_classes()). `params` has num_params() floats in layout order. The model
// keeps scratch buffers in device memory (grown to the largest batch seen, then reused) and never
// keeps or frees the caller's buffers.
//
// ForwardBackward gives the mean cross-entropy loss (natural log) over the batch and overwrites
// grad[0 .. num_params()) with d(mean loss)/d(params). Weight decay is not included (the worker
// adds it). Evaluate gives the mean loss and the accuracy over n examples, processed in chunks of
// at most max_batch.
//
// Ordering: calls run on context()'s stream in call order. The loss comes back complete (the host
// waits for the forward pass); the backward pass may still be running when ForwardBackward
// returns on CUDA: synchronize context() before grad is read through another stream or copied to
// the host by other means. On the CPU every call is complete on return.
//
// Errors: batch < 1, n < 0 or max_batch < 1 are InvalidArgument; a label out of range is
// InvalidArgument (nothing is written); device failures (CUDA, cuBLAS, out of memory) come back
// as the backend's Status, never as an abort.
//
// Thread-safety: one thread at a time per Model (its scratch and stream); use one Model per
// thread. On the CPU the only threads a call may use are OpenBLAS's (inside sgemm) and the OpenMP
// team of the element-wise ops: a process running several workers on few cores should cap both.
#ifndef SIEVE_WORKER_MODEL_MODEL_H_
#define SIEVE_WORKER_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "base/status.h"
#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "kernels/nn/nn_ops.h"
#include "worker/model/eval_result.h"

namespace sieve {

class Model {
 public:
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  virtual const ModelLayout& layout() const = 0;
  uint64_t num_params() const { return layout().num_params; }
  int input_size() const { return 28 * 28; }
  int num_classes() const { return 10; }

  Device device() const { return ops_->device(); }
  // The context every call runs on; buffers handed to the model come from it (or from any
  // allocation of the same device's memory). Owned by the model.
  BackendContext* context() const { return ops_->context(); }
  // The model's ops (for callers that add element-wise work on the same stream, e.g. weight
  // decay or the UPDATE scatter). Owned by the model.
  NnOps* ops() const { return ops_.get(); }

  // See the file comment. *loss gets the mean loss of the batch.
  Status ForwardBackward(const float* params, const float* x, const uint8_t* labels, int batch,
                         float* grad, float* loss);

  // Mean loss of a batch without gradients; `correct` (nullable) gets the number of right
  // predictions.
  Status Loss(const float* params, const float* x, const uint8_t* labels, int batch, float* loss,
              int64_t* correct);

  // n == 0 gives all zeros.
  Status Evaluate(const float* params, const float* x, const uint8_t* labels, int64_t n,
                  EvalResult* out, int max_batch = 500);

 protected:
  explicit Model(std::unique_ptr<NnOps> ops);
  NnOps& nn() const { return *ops_; }

  // The one entry point implementations provide: the batch's loss and arg-max hits in *out, and
  // grad (length D) filled when not null. batch ≥ 1.
  virtual Status Run(const float* params, const float* x, const uint8_t* labels, int batch,
                     float* grad, XentResult* out) = 0;

 private:
  std::unique_ptr<NnOps> ops_;
};

// The model called `name` on `device`: "softmax", "fnn3", "cnn" or "cnn_large" (layouts as in
// MakeModelLayout). Errors: NotFound for any other name; "synthetic" has a layout but no model
// math (the worker generates its gradients) and is rejected with InvalidArgument; the device's
// errors (FailedPrecondition for CUDA without a GPU).
StatusOr<std::unique_ptr<Model>> MakeModel(std::string_view name, Device device = Device::kCpu);

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_MODEL_H_
