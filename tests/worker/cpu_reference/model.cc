#include "tests/worker/cpu_reference/model.h"

#include <glog/logging.h>

#include <algorithm>

namespace sieve::cpu_reference {

float Model::ForwardBackward(const float* params, const float* x, const uint8_t* labels, int batch,
                             float* grad) {
  CHECK_GE(batch, 1);
  CHECK(grad != nullptr);
  return Run(params, x, labels, batch, grad, nullptr);
}

float Model::Loss(const float* params, const float* x, const uint8_t* labels, int batch,
                  int64_t* correct) {
  CHECK_GE(batch, 1);
  return Run(params, x, labels, batch, nullptr, correct);
}

EvalResult Model::Evaluate(const float* params, const float* x, const uint8_t* labels, int64_t n,
                           int max_batch) {
  CHECK_GE(n, 0);
  CHECK_GE(max_batch, 1);
  EvalResult r;
  double loss_sum = 0.0;
  for (int64_t start = 0; start < n; start += max_batch) {
    const int batch = static_cast<int>(std::min<int64_t>(max_batch, n - start));
    int64_t correct = 0;
    const float loss =
        Run(params, x + start * input_size(), labels + start, batch, nullptr, &correct);
    loss_sum += static_cast<double>(loss) * batch;
    r.correct += correct;
  }
  r.count = n;
  if (n > 0) {
    r.loss = loss_sum / static_cast<double>(n);
    r.accuracy = static_cast<double>(r.correct) / static_cast<double>(n);
  }
  return r;
}

}  // namespace sieve::cpu_reference
