// EvalResult: what evaluating a classifier on a set of examples gives, the worker's models
// (worker/model/model.h) and the CPU reference model (tests/worker/cpu_reference/model.h) alike.
#ifndef SIEVE_WORKER_MODEL_EVAL_RESULT_H_
#define SIEVE_WORKER_MODEL_EVAL_RESULT_H_

#include <cstdint>

namespace sieve {

struct EvalResult {
  double loss = 0.0;      // mean cross-entropy
  double accuracy = 0.0;  // fraction of arg-max predictions equal to the label, in [0, 1]
  int64_t correct = 0;
  int64_t count = 0;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_MODEL_EVAL_RESULT_H_
