// Synthetic gradients for --model=synthetic: no data, any D, bell-shaped or heavy-tailed
// coordinates, for systems benchmarks and selection studies.
//
// The synthetic objective is L(w) = 0.5·λ·‖w‖² observed through noise: coordinate i of round t on
// rank r is g_i = λ·w_i + σ·X_i, where X_i has mean 0 and variance 1 and is Gaussian (Box-Muller)
// or Laplace (scale 1/√2, excess kurtosis 3). X_i is a pure function of (seed, rank, round, i)
// through CounterHash (kernels/model/param_init.h): identical on every machine and for any number
// of threads, independent across ranks, rounds and coordinates. The reported loss is
// SyntheticLoss = 0.5·λ·‖w‖²/D (the noise-free objective per coordinate).
// Thread-safety: pure functions; the fill may use OpenMP threads internally.
#ifndef SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_
#define SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_

#include <cstdint>
#include <span>

#include "worker/trainer/trainer_options.h"

namespace sieve {

struct SyntheticGradientSpec {
  GradDist dist = GradDist::kGaussian;
  double scale = 1.0;  // σ
  double pull = 0.0;   // λ
  uint64_t seed = 1;
  int rank = 0;
};

// The unit-variance noise draw X_i of (spec.seed, spec.rank, round, i).
float SyntheticNoise(const SyntheticGradientSpec& spec, uint64_t round, uint64_t i);

// grad[i] = pull·weights[i] + scale·X_i for i in [0, D); weights and grad have length D
// (weights may be empty when pull is 0).
void SyntheticGradient(const SyntheticGradientSpec& spec, uint64_t round,
                       std::span<const float> weights, std::span<float> grad);

// 0.5·pull·‖w‖²/D (0 for an empty w).
double SyntheticLoss(double pull, std::span<const float> weights);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_
