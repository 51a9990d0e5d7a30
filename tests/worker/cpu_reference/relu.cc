#include "tests/worker/cpu_reference/relu.h"

namespace sieve::cpu_reference {

void ReluForward(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
}

void ReluBackward(const float* y, int64_t n, float* dv) {
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] <= 0.0f) dv[i] = 0.0f;
  }
}

}  // namespace sieve::cpu_reference
