// Synthetic gradients for --model=synthetic: no data, any D, bell-shaped or heavy-tailed
// coordinates, for systems benchmarks and selection studies.
//
// The synthetic objective is L(w) = 0.5·λ·‖w‖² observed through noise: coordinate i of round t on
// rank r is g_i = λ·w_i + σ·X_i, where X_i is a unit-variance noise draw. The reported loss is
// SyntheticLoss = 0.5·λ·‖w‖²/D (the noise-free objective per coordinate). Two noise sources
// (SyntheticNoiseSource, --synthetic_noise) define X_i; both are deterministic functions of
// (seed, rank, round, i): identical on every machine and for any number of threads.
//
// hash: X_i is an exact draw from the target distribution, a pure function of
//   (seed, rank, round, i) through CounterHash (kernels/model/param_init.h): Gaussian (Box-Muller
//   from two 53-bit uniforms) or Laplace (inverse CDF, scale 1/√2, excess kurtosis 3). Independent
//   across ranks, rounds and coordinates. Costs two hashes, a log and a cos per coordinate per
//   round (~34 ns on one core: 0.34 s per round at D = 1e7, measured on the development machine),
//   which at large D dominates a systems benchmark's round.
//
// pool: a table of P = kSyntheticPoolSize hash-mode draws of (seed, rank) is made once per
//   process (SyntheticNoisePool), then shifted and scaled to sample mean 0 and sample variance 1
//   exactly. The coordinates are cut into blocks of B = kSyntheticPoolBlock; block b of round t
//   gets the offset o(t, b) = CounterHash(key(seed, rank, t), b) mod P, and coordinate i = b·B + c
//   takes X_i = pool[(o(t, b) + c) mod P]. The round is one streaming, vectorized pass (read the
//   pool window and w, write g): memory speed, 5.3 ms at D = 1e7 on one core (64x less than hash).
//   Making the pool costs P hash draws (~35 ms) once per process.
//   What holds:
//   - Marginal: over the offset, X_i is a uniform pick from the pool, so it has mean 0, variance 1
//     and the pool's empirical distribution (the target shape up to the sampling error of P draws;
//     tails end at the pool's extremes, ~±5σ Gaussian and ~±10σ Laplace for P = 2^20).
//   - One coordinate across rounds: i.i.d. picks with replacement from the pool (independent
//     hashed offsets per round), so error feedback's residual is a sum of independent draws.
//   - One round, one block: B consecutive distinct pool entries, i.e. independent draws.
//   - Ranks: each rank has its own pool and offsets; independent across ranks.
//   What does not hold: coordinates in different blocks of the same round are not independent:
//   each pool entry appears about D/P times per round (two given coordinates coincide with
//   probability 1/P), and the rounds of one coordinate reuse the same P values. Values differ
//   from hash mode's. Selection studies that need exact independence should use hash.
//   Memory: 4·P bytes per cached pool.
//
// Default (TrainerOptions::synthetic_noise): pool. The synthetic model exists to measure the
// system (push/pull, selection, aggregation) at large D; there the gradient must cost little next
// to the work being measured, and the pool keeps the properties those measurements depend on (the
// marginal distribution, independent rounds per coordinate, distinct values within a block).
//
// Thread-safety: pure functions of their arguments apart from SyntheticNoisePool's process-wide
// cache, which is guarded by a mutex; the fill may use OpenMP threads internally.
#ifndef SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_
#define SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "worker/trainer/trainer_options.h"

namespace sieve {

inline constexpr uint64_t kSyntheticPoolSize = uint64_t{1} << 20;   // P (a power of two)
inline constexpr uint64_t kSyntheticPoolBlock = uint64_t{1} << 16;  // B (<= P)

struct SyntheticGradientSpec {
  GradDist dist = GradDist::kGaussian;
  double scale = 1.0;  // σ
  double pull = 0.0;   // λ
  uint64_t seed = 1;
  int rank = 0;
  SyntheticNoiseSource noise = SyntheticNoiseSource::kHash;
};

// The unit-variance noise draw X_i of (spec.seed, spec.rank, round, i) from spec.noise.
float SyntheticNoise(const SyntheticGradientSpec& spec, uint64_t round, uint64_t i);

// The P pool values of (spec.dist, spec.seed, spec.rank) (spec.noise, scale and pull are
// ignored): sample mean 0 and sample variance 1 up to float rounding. Made on first use and
// cached (the last few distinct keys), so every later call for the same key is cheap.
std::shared_ptr<const std::vector<float>> SyntheticNoisePool(const SyntheticGradientSpec& spec);

// grad[i] = pull·weights[i] + scale·X_i for i in [0, D); weights and grad have length D
// (weights may be empty when pull is 0).
void SyntheticGradient(const SyntheticGradientSpec& spec, uint64_t round,
                       std::span<const float> weights, std::span<float> grad);

// The pool offsets o(round, b) of the ceil(d / B) blocks of `round` (pool noise), into *offsets:
// what a device computes pool-noise gradients from (NnOps::PoolNoiseGradient with the pool of
// SyntheticNoisePool(spec)).
void SyntheticPoolOffsets(const SyntheticGradientSpec& spec, uint64_t round, uint64_t d,
                          std::vector<uint64_t>* offsets);

// 0.5·pull·‖w‖²/D (0 for an empty w). One vectorized pass; the sum's order is fixed by the build,
// not by the thread count.
double SyntheticLoss(double pull, std::span<const float> weights);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_SYNTHETIC_GRADIENT_H_
