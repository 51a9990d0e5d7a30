// The CPU reference model (test-only): the worker's models (worker/model/) as they were computed
// before their math moved onto kernels/nn — plain loops and OpenBLAS sgemm on host buffers. Tests
// compare the production Model (on every compiled backend) against it: bitwise on the CPU, where
// both make the same sgemm calls and round the same way, within a tolerance on CUDA.
//
// Model: a classifier whose parameters live in one flat fp32 buffer laid out by a ModelLayout
// (kernels/model/model_layout.h), with forward/backward on the CPU.
//
// Inputs are normalized images, batch x input_size() floats row-major (worker/data/dataset.h);
// labels are one byte each in [0, num_classes()) (a label out of range is a CHECK failure: the
// data layer validates them). `params` has num_params() floats in layout order; the model never
// keeps or frees caller buffers.
//
// ForwardBackward returns the mean cross-entropy loss (natural log) over the batch and overwrites
// grad[0 .. num_params()) with d(mean loss)/d(params). Weight decay is not included (the worker
// adds it). Evaluate returns the mean loss and the accuracy over n examples, processed in chunks of
// at most max_batch.
//
// Thread-safety: a Model instance keeps scratch buffers (grown on demand to the largest batch seen,
// then reused without allocation) and must be used by one thread at a time; use one instance per
// thread. The only threads a call may use are OpenBLAS's own (inside sgemm); a process running
// several workers on few cores should cap them (OPENBLAS_NUM_THREADS or openblas_set_num_threads).
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_MODEL_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "base/status.h"
#include "kernels/model/model_layout.h"
#include "worker/model/eval_result.h"

namespace sieve::cpu_reference {

using ::sieve::EvalResult;  // worker/model/eval_result.h

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelLayout& layout() const = 0;
  uint64_t num_params() const { return layout().num_params; }
  virtual int input_size() const { return 28 * 28; }
  virtual int num_classes() const { return 10; }

  // batch >= 1. See the file comment.
  float ForwardBackward(const float* params, const float* x, const uint8_t* labels, int batch,
                        float* grad);

  // Mean loss of a batch without gradients; `correct` (nullable) gets the number of right
  // predictions.
  float Loss(const float* params, const float* x, const uint8_t* labels, int batch,
             int64_t* correct);

  // n >= 0, max_batch >= 1. n == 0 gives all zeros.
  EvalResult Evaluate(const float* params, const float* x, const uint8_t* labels, int64_t n,
                      int max_batch = 500);

 protected:
  // The one entry point implementations provide: mean loss of the batch; fills grad (length D) if
  // not null and *correct if not null.
  virtual float Run(const float* params, const float* x, const uint8_t* labels, int batch,
                    float* grad, int64_t* correct) = 0;
};

// The model called `name`: "softmax", "fnn3" or "cnn" (layouts as in MakeModelLayout).
// Errors: NotFound for any other name; "synthetic" has a layout but no model math (the worker
// generates its gradients) and is rejected with InvalidArgument.
StatusOr<std::unique_ptr<Model>> MakeModel(std::string_view name);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_MODEL_H_
