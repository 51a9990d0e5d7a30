// ReLU, in place. Forward: v[i] = max(v[i], 0). Backward: given the forward *output* y,
// dv[i] = 0 wherever y[i] <= 0 (the subgradient 0 is used at 0). n is the element count.
// Thread-safety: no shared state.
#ifndef SIEVE_WORKER_MODEL_RELU_H_
#define SIEVE_WORKER_MODEL_RELU_H_

#include <cstdint>

namespace sieve {

void ReluForward(float* v, int64_t n);
void ReluBackward(const float* y, int64_t n, float* dv);

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_RELU_H_
