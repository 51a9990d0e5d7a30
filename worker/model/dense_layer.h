// A fully connected layer on NnOps (kernels/nn/nn_ops.h), all buffers in the ops' device memory,
// row-major:
//
//   y[b][o] = Σ_i x[b][i]·w[o][i] + bias[o]        x: batch x in, w: out x in, y: batch x out
//
// DenseForward overwrites y. DenseBackward takes dy = dL/dy and overwrites dw (out x in) and
// dbias (out) with dL/dw and dL/dbias, and dx (batch x in) with dL/dx when dx is not null.
// A convolution is this layer over Im2Col patches. Buffers are the caller's and must not overlap.
// Errors: those of NnOps. Thread-safety: that of the NnOps.
#ifndef SIEVE_WORKER_MODEL_DENSE_LAYER_H_
#define SIEVE_WORKER_MODEL_DENSE_LAYER_H_

#include "base/status.h"
#include "kernels/nn/nn_ops.h"

namespace sieve {

Status DenseForward(NnOps& nn, const float* x, int batch, int in, const float* w, const float* bias,
                    int out, float* y);
Status DenseBackward(NnOps& nn, const float* x, int batch, int in, const float* w, int out,
                     const float* dy, float* dw, float* dbias, float* dx);

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_DENSE_LAYER_H_
