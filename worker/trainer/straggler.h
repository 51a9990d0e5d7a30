// Stragglers: an emulated slowdown of chosen workers' compute (--straggler), for studying what a
// slow worker costs BSP, SSP and ASP.
//
// A plan is a comma-separated list of items, each `SPEC` (every worker) or `RANK:SPEC` (worker
// RANK, overriding a plain SPEC); a rank may be named once. SPEC is one of
//   none          no slowdown
//   delay:T       a fixed extra T of compute per round                (e.g. delay:5ms)
//   xF            the round's measured compute time stretched F times (e.g. x3; F >= 1)
//   exp:T         an extra time drawn from the exponential distribution with mean T per round
// with T a non-negative number followed by us, ms or s. Examples: `3:x3` (worker 3 computes 3×
// slower), `exp:2ms,0:none` (every worker but 0 draws an exponential 2 ms delay each round).
//
// Straggler::ExtraSeconds(round, measured) is the time a worker adds after computing a round's
// gradient; Stall sleeps for it (the trainer calls it inside the round, so it counts as compute
// time in the metrics while the worker's other threads, e.g. heartbeats, run on). The exp draws
// are a pure function of (seed, rank, round): a run repeats exactly with the same --seed.
//
// Errors: ParseStragglerPlan returns InvalidArgument naming the bad item. A rank beyond the job's
// workers is checked by CheckRanks once the job size is known. Thread-safety: plain values and
// pure functions.
#ifndef SIEVE_WORKER_TRAINER_STRAGGLER_H_
#define SIEVE_WORKER_TRAINER_STRAGGLER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace sieve {

struct StragglerSpec {
  enum class Kind { kNone, kDelay, kScale, kExp };
  Kind kind = Kind::kNone;
  double seconds = 0.0;       // kDelay: the extra time; kExp: the mean extra time
  double factor = 1.0;        // kScale: compute time multiplier (>= 1)
  std::string text = "none";  // as written (for the summary line)

  bool active() const { return kind != Kind::kNone; }
};

// One SPEC (see the header comment).
StatusOr<StragglerSpec> ParseStragglerSpec(std::string_view text);

struct StragglerPlan {
  StragglerSpec every;                // the plain SPEC (none when there is none)
  std::map<int, StragglerSpec> rank;  // RANK:SPEC overrides

  const StragglerSpec& ForRank(int r) const;
  // InvalidArgument naming the first rank that is not in [0, workers).
  Status CheckRanks(int workers) const;
};

// The whole --straggler value; "" is no slowdown.
StatusOr<StragglerPlan> ParseStragglerPlan(std::string_view text);

class Straggler {
 public:
  Straggler(StragglerSpec spec, uint64_t seed, int rank)
      : spec_(std::move(spec)), seed_(seed), rank_(rank) {}

  const StragglerSpec& spec() const { return spec_; }
  // Seconds to add to a round whose gradient took `measured_compute_s` (>= 0).
  double ExtraSeconds(uint64_t round, double measured_compute_s) const;
  // Sleeps the calling thread for ExtraSeconds(...) (nothing when inactive) and returns the
  // seconds it actually slept.
  double Stall(uint64_t round, double measured_compute_s) const;

 private:
  StragglerSpec spec_;
  uint64_t seed_;
  int rank_;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_STRAGGLER_H_
