// Reading a worker's end-of-run summary line (written by worker/trainer/summary.h's
// FormatSummaryLine, by sieve-worker and by the Python module alike) in `sieve launch`:
//
//   sieve-worker summary: rank=R rounds=N first_round=F epochs=E [test_acc=0.xxxx] loss=L
//       bytes_up=B ... seconds=S ...
//
// and, from a Python worker (sieve.torch), the script's own metrics at its end
// (`opt.record(perplexity=...)`: ` perplexity=3.46`).
//
// Contract: ParseWorkerSummaryLine() returns the fields the launcher uses when `line` starts with
// "sieve-worker summary:" and holds rank, rounds, bytes_up and seconds as well-formed numbers
// (test_acc is optional; other fields are ignored, in any order); anything else is nullopt. A
// field whose name is none of the summary line's own (summary.h) and whose value is a finite
// number is a user-named metric: kept in `metrics`, in line order, its value as written.
// Pure; thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_
#define SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sieve {

struct WorkerSummary {
  int rank = 0;
  uint64_t rounds = 0;
  std::optional<double> test_acc;
  uint64_t bytes_up = 0;
  double seconds = 0;
  // The script's own metrics, "perplexity" -> "3.46", in the order of the line.
  std::vector<std::pair<std::string, std::string>> metrics;
};

std::optional<WorkerSummary> ParseWorkerSummaryLine(std::string_view line);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_WORKER_SUMMARY_H_
