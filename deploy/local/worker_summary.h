// Reading a worker's end-of-run summary line (written by worker/trainer/summary.h's
// FormatSummaryLine, by sieve-worker and by the Python module alike) in `sieve launch`:
//
//   sieve-worker summary: rank=R rounds=N first_round=F epochs=E [test_acc=0.xxxx] loss=L
//       bytes_up=B ... seconds=S ...
//
// Contract: ParseWorkerSummaryLine() returns the fields the launcher uses when `line` starts with
// "sieve-worker summary:" and holds rank, rounds, bytes_up and seconds as well-formed numbers
// (test_acc is optional; other fields are ignored, in any order); anything else is nullopt.
// Pure; thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_
#define SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace sieve {

struct WorkerSummary {
  int rank = 0;
  uint64_t rounds = 0;
  std::optional<double> test_acc;
  uint64_t bytes_up = 0;
  double seconds = 0;
};

std::optional<WorkerSummary> ParseWorkerSummaryLine(std::string_view line);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_
