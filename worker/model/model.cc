#include "worker/model/model.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sieve {

Model::Model(std::unique_ptr<NnOps> ops) : ops_(std::move(ops)) {}

Model::~Model() = default;

Status Model::ForwardBackward(const float* params, const float* x, const uint8_t* labels, int batch,
                              float* grad, float* loss) {
  if (batch < 1) return InvalidArgumentError("batch must be >= 1, got " + std::to_string(batch));
  if (grad == nullptr) return InvalidArgumentError("ForwardBackward needs a gradient buffer");
  XentResult r;
  SIEVE_RETURN_IF_ERROR(Run(params, x, labels, batch, grad, &r));
  *loss = r.loss;
  return Status::Ok();
}

Status Model::Loss(const float* params, const float* x, const uint8_t* labels, int batch,
                   float* loss, int64_t* correct) {
  if (batch < 1) return InvalidArgumentError("batch must be >= 1, got " + std::to_string(batch));
  XentResult r;
  SIEVE_RETURN_IF_ERROR(Run(params, x, labels, batch, nullptr, &r));
  *loss = r.loss;
  if (correct != nullptr) *correct = r.correct;
  return Status::Ok();
}

Status Model::Evaluate(const float* params, const float* x, const uint8_t* labels, int64_t n,
                       EvalResult* out, int max_batch) {
  if (n < 0 || max_batch < 1) {
    return InvalidArgumentError("Evaluate: n must be >= 0 and max_batch >= 1");
  }
  EvalResult r;
  double loss_sum = 0.0;
  for (int64_t start = 0; start < n; start += max_batch) {
    const int batch = static_cast<int>(std::min<int64_t>(max_batch, n - start));
    XentResult part;
    SIEVE_RETURN_IF_ERROR(
        Run(params, x + start * input_size(), labels + start, batch, nullptr, &part));
    loss_sum += static_cast<double>(part.loss) * batch;
    r.correct += part.correct;
  }
  r.count = n;
  if (n > 0) {
    r.loss = loss_sum / static_cast<double>(n);
    r.accuracy = static_cast<double>(r.correct) / static_cast<double>(n);
  }
  *out = r;
  return Status::Ok();
}

}  // namespace sieve
