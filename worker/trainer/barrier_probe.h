// The barrier probe of sieve-worker --barrier_probe=N (used by the scale harness,
// bench/scale/run.py): N more workers' barriers right after the start, each timed on this worker
// from its Barrier() call to its return, summarized as percentiles for the summary line
// (barrier_probes= barrier_p50_ms= barrier_p99_ms= barrier_probe_s=, summary.h).
//
// Every worker of the job must run the same N (a worker that does not enter a barrier holds the
// others in it until the round timeout); a rejoining worker runs none (Trainer::Run), so the probe
// is for jobs whose workers all start together. Thread-safety: pure, apart from what `barrier`
// does.
#ifndef SIEVE_WORKER_TRAINER_BARRIER_PROBE_H_
#define SIEVE_WORKER_TRAINER_BARRIER_PROBE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"

namespace sieve {

struct BarrierProbeStats {
  uint64_t probes = 0;  // barriers timed
  double p50_ms = 0.0;  // nearest-rank percentiles of their latencies
  double p99_ms = 0.0;
  double total_s = 0.0;  // wall time of the whole probe
};

// The nearest-rank q-quantile of `samples`: the smallest sample x such that at least ceil(q·n)
// of the n samples are <= x (q in (0, 1]; q = 1 is the maximum). 0 for no samples.
double NearestRankPercentile(std::vector<double> samples, double q);

// p50 and p99 of the latencies (ms); probes = their count; total_s is left 0.
BarrierProbeStats SummarizeBarrierLatencies(const std::vector<double>& latencies_ms);

// Calls `barrier` n times (n >= 0), timing each call with a steady clock. The first error stops
// the probe and is returned, with the barrier's index in its message.
StatusOr<BarrierProbeStats> RunBarrierProbe(int n, const std::function<Status()>& barrier);

}  // namespace sieve

#endif  // SIEVE_WORKER_TRAINER_BARRIER_PROBE_H_
