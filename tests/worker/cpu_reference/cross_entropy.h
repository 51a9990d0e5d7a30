// Part of the CPU reference model (tests/worker/cpu_reference/model.h): the worker's model math as
// it was before it moved onto kernels/nn, kept as an independent second implementation.
// Softmax cross-entropy over a batch of logits (batch x classes, row-major), labels one byte each
// in [0, classes). Returns the mean loss over the batch (natural log). When dlogits is not null it
// is overwritten with d(mean loss)/d(logits) = (softmax - onehot) / batch. When correct is not null
// it receives the number of rows whose arg-max logit (lowest index on ties) equals the label.
// Computed in a numerically stable way (max subtracted). Thread-safety: no shared state.
#ifndef SIEVE_TESTS_WORKER_CPU_REFERENCE_CROSS_ENTROPY_H_
#define SIEVE_TESTS_WORKER_CPU_REFERENCE_CROSS_ENTROPY_H_

#include <cstdint>

namespace sieve::cpu_reference {

float SoftmaxCrossEntropy(const float* logits, const uint8_t* labels, int batch, int classes,
                          float* dlogits, int64_t* correct);

}  // namespace sieve::cpu_reference

#endif  // SIEVE_TESTS_WORKER_CPU_REFERENCE_CROSS_ENTROPY_H_
