// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// 2x2, stride-2 max pooling over NHWC tensors (h and w even): y is batch x h/2 x w/2 x c.
// Forward overwrites y and records in argmax[j] the flat index into x of the maximum that produced
// y[j] (first maximum on ties, in (dy, dx) order). Backward *overwrites* dx (batch x h x w x c)
// with dy routed to those positions and zeros elsewhere. Buffers are owned by the caller.
// Thread-safety: no shared state.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_MAX_POOL_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_MAX_POOL_H_

#include <cstdint>

namespace sieve::cpu_reference {

void MaxPool2x2Forward(const float* x, int batch, int h, int w, int c, float* y, int32_t* argmax);
void MaxPool2x2Backward(const float* dy, const int32_t* argmax, int batch, int h, int w, int c,
                        float* dx);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_MAX_POOL_H_
