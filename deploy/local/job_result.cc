#include "deploy/local/job_result.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/progress_line.h"
#include "deploy/local/job_progress.h"

namespace sieve {
namespace {

constexpr std::string_view kSchedulerFailed = "sieve-scheduler: job failed: ";

// The result line's own fields that a worker's metric could also be named (test_acc and rounds
// are summary fields, never metrics): such a metric is left out of the line.
bool IsResultField(std::string_view name) {
  return name == "time" || name == "pushed" || name == "workers";
}

}  // namespace

void JobResult::WorkerLine(size_t process, std::string_view line) {
  Process& p = processes_[process];
  std::optional<uint64_t> bytes;
  if (auto summary = ParseWorkerSummaryLine(line)) {
    p.summary = summary;
    bytes = summary->bytes_up;
  } else if (auto point = ParseProgressLine(line)) {
    bytes = point->bytes_up;
  }
  if (bytes) p.bytes_up = std::max(p.bytes_up.value_or(0), *bytes);
}

void JobResult::SchedulerLine(std::string_view line) {
  const size_t at = line.find(kSchedulerFailed);
  if (at != std::string_view::npos) {
    scheduler_reason_ = std::string(line.substr(at + kSchedulerFailed.size()));
  }
}

std::string JobResult::Finished(double seconds) const {
  std::map<int, const Process*> last;  // rank -> its latest process
  uint64_t pushed = 0;
  bool reported = false;
  for (const auto& [id, p] : processes_) {
    last[p.rank] = &p;
    pushed += p.bytes_up.value_or(0);
    reported = reported || p.bytes_up.has_value();
  }
  std::optional<double> test_acc;
  std::optional<uint64_t> rounds;
  std::vector<std::pair<std::string, std::string>> metrics;  // each name's lowest rank's value
  int finished = 0;
  for (const auto& [rank, p] : last) {  // ascending ranks
    if (!p->exited_ok) continue;
    ++finished;
    if (!p->summary) continue;
    if (!test_acc) test_acc = p->summary->test_acc;
    rounds = std::max(rounds.value_or(0), p->summary->rounds);
    for (const auto& metric : p->summary->metrics) {
      const bool known = std::any_of(metrics.begin(), metrics.end(),
                                     [&](const auto& m) { return m.first == metric.first; });
      if (!known && !IsResultField(metric.first)) metrics.push_back(metric);
    }
  }
  std::string text = "job finished:";
  char buf[64];
  if (test_acc) {
    std::snprintf(buf, sizeof(buf), " test_acc=%.4f", *test_acc);
    text += buf;
  }
  if (rounds) text += " rounds=" + std::to_string(*rounds);
  std::snprintf(buf, sizeof(buf), " time=%.1fs", seconds);
  text += buf;
  if (reported) {
    std::string bytes = FormatBytes(pushed);
    bytes.erase(std::remove(bytes.begin(), bytes.end(), ' '), bytes.end());
    text += " pushed=" + bytes;
  }
  text += " workers=" + std::to_string(finished) + "/" + std::to_string(num_workers_);
  for (const auto& [name, value] : metrics) text += " " + name + "=" + value;
  return text + LostWorkers();
}

std::string JobResult::LostWorkers() const {
  std::string text;
  for (const auto& [rank, how] : lost_) {
    text += "; lost worker " + std::to_string(rank) + " (" + how + ")";
  }
  return text;
}

std::string JobResult::Failed(const std::string& reason) const {
  std::string text = "job FAILED: " + reason;
  if (!scheduler_reason_.empty()) text += " (scheduler: " + scheduler_reason_ + ")";
  return text + LostWorkers();
}

}  // namespace sieve
