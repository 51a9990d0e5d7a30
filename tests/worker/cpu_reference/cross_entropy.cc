#include "tests/worker/cpu_reference/cross_entropy.h"

#include <glog/logging.h>

#include <cmath>

namespace sieve::cpu_reference {

float SoftmaxCrossEntropy(const float* logits, const uint8_t* labels, int batch, int classes,
                          float* dlogits, int64_t* correct) {
  double total = 0.0;
  int64_t hits = 0;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int b = 0; b < batch; ++b) {
    const float* z = logits + static_cast<int64_t>(b) * classes;
    const int label = labels[b];
    CHECK_LT(label, classes) << "label out of range (datasets are validated on load)";
    int best = 0;
    for (int k = 1; k < classes; ++k) {
      if (z[k] > z[best]) best = k;
    }
    hits += (best == label);
    const float zmax = z[best];
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - zmax));
    total += std::log(sum) - static_cast<double>(z[label] - zmax);
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<int64_t>(b) * classes;
      for (int k = 0; k < classes; ++k) {
        const double p = std::exp(static_cast<double>(z[k] - zmax)) / sum;
        d[k] = static_cast<float>(p) * inv_batch;
      }
      d[label] -= inv_batch;
    }
  }
  if (correct != nullptr) *correct = hits;
  return static_cast<float>(total / batch);
}

}  // namespace sieve::cpu_reference
