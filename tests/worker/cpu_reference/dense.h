// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// Fully connected layer on row-major float buffers, computed with OpenBLAS sgemm.
//
//   y[b][o] = sum_i x[b][i] * w[o][i] + bias[o]        x: batch x in, w: out x in, y: batch x out
//
// The backward pass takes dy = dL/dy and *overwrites* dw (out x in) and dbias (out) with dL/dw and
// dL/dbias, and dx (batch x in) with dL/dx when dx is not null. Buffers are owned by the caller and
// must not overlap. Thread-safety: no shared state; OpenBLAS may use its own
// threads inside a call.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_DENSE_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_DENSE_H_

namespace sieve::cpu_reference {

void DenseForward(const float* x, int batch, int in, const float* w, const float* bias, int out,
                  float* y);

void DenseBackward(const float* x, int batch, int in, const float* w, int out, const float* dy,
                   float* dw, float* dbias, float* dx);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_DENSE_H_
