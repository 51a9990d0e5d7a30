// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// ReLU, in place. Forward: v[i] = max(v[i], 0). Backward: given the forward *output* y,
// dv[i] = 0 wherever y[i] <= 0 (the subgradient 0 is used at 0). n is the element count.
// Thread-safety: no shared state.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_RELU_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_RELU_H_

#include <cstdint>

namespace sieve::cpu_reference {

void ReluForward(float* v, int64_t n);
void ReluBackward(const float* y, int64_t n, float* dv);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_RELU_H_
