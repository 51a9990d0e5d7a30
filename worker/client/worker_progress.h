// WorkerProgress: what a worker says of its training for the job's status (PsClient::Report; on
// the wire sieve.proto's WorkerReport, docs/protocol.md "Job status"). Plain values; a report out
// of range (a negative or non-finite loss, an accuracy outside [0, 1], a counter going back, a
// round beyond its total) is refused by the scheduler and counted, never shown.
#ifndef SIEVE_WORKER_CLIENT_WORKER_PROGRESS_H_
#define SIEVE_WORKER_CLIENT_WORKER_PROGRESS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace sieve {

struct WorkerProgress {
  uint64_t round = 0;                   // rounds this process finished
  uint64_t total_rounds = 0;            // rounds it runs in all; 0 = unknown
  uint32_t epoch = 0;                   // the epoch in progress, from 1; 0 = unknown
  uint32_t epochs = 0;                  // 0 = unknown
  std::optional<double> loss;           // the last round's training loss
  std::optional<double> test_accuracy;  // the last evaluation's, in [0, 1]
  uint64_t bytes_pushed = 0;            // payload bytes this process pushed / received in UPDATEs
  uint64_t bytes_pulled = 0;
  uint64_t skipped_rounds = 0;  // rounds an emulated straggler skipped
  uint64_t missed_slices = 0;   // slices of its pushes a round closed without (backup workers)
  double straggle_seconds = 0;  // compute time an emulated straggler added
  // A script's own metrics: at most 16, names of 1 to 64 characters [A-Za-z0-9_.-], finite.
  std::map<std::string, double> metrics;
};

}  // namespace sieve

#endif  // SIEVE_WORKER_CLIENT_WORKER_PROGRESS_H_
