// Deterministic, shard-independent initial values of a model's flat parameter vector.
//
// The initial value of global parameter i is a pure function of (seed, i, the rule of the segment
// holding i): a counter-based generator (SplitMix64 finalizer over the seed and the index) feeds
// the segment's InitRule (uniform from one 53-bit draw, normal by Box-Muller from two). No state is
// carried from one index to the next, so a server owning [lo, hi) and a worker generating all of
// [0, D) get bitwise-identical values for every index they share, in any order and on any number of
// threads.
//
// Thread-safety: pure functions; concurrent calls on disjoint outputs are safe.
#ifndef SIEVE_KERNELS_MODEL_PARAM_INIT_H_
#define SIEVE_KERNELS_MODEL_PARAM_INIT_H_

#include <cstdint>
#include <vector>

#include "kernels/model/model_layout.h"

namespace sieve {

// Writes the initial values of global parameters [lo, hi) to out[0 .. hi - lo). `out` is owned by
// the caller and must hold hi - lo floats. The range may come from a peer (a server's shard in the
// node table): unless lo <= hi <= layout.num_params it is OutOfRange and nothing is written.
Status InitSlice(const ModelLayout& layout, uint64_t seed, uint64_t lo, uint64_t hi, float* out);

// All D initial values: InitSlice(layout, seed, 0, D, ...).
std::vector<float> InitParams(const ModelLayout& layout, uint64_t seed);

// 64 well-mixed bits for (seed, counter): the generator under InitSlice, exposed so other
// deterministic per-index draws (e.g. synthetic gradients) can use the same construction.
uint64_t CounterHash(uint64_t seed, uint64_t counter);

}  // namespace sieve

#endif  // SIEVE_KERNELS_MODEL_PARAM_INIT_H_
