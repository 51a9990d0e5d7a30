#include "deploy/local/job_result.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "deploy/local/job_progress.h"

namespace sieve {
namespace {

// The result line's own fields that a worker's metric could also be named (test_acc and rounds
// are summary fields, never metrics): such a metric is left out of the line.
bool IsResultField(const std::string& name) {
  return name == "time" || name == "pushed" || name == "workers";
}

}  // namespace

std::string JobResult::Finished(double seconds, const pb::JobStatus* status) const {
  std::string text = "job finished:";
  char buf[64];
  std::optional<uint64_t> rounds;
  bool reported = false;
  if (status != nullptr) {
    for (const pb::JobNode& n : status->nodes()) {
      if (!n.has_worker()) continue;
      reported = true;
      rounds = std::max(rounds.value_or(0), n.worker().round());
    }
  }
  const pb::JobProgress* p = status != nullptr ? &status->progress() : nullptr;
  if (p != nullptr && p->has_test_accuracy()) {
    std::snprintf(buf, sizeof(buf), " test_acc=%.4f", p->test_accuracy());
    text += buf;
  }
  if (rounds) text += " rounds=" + std::to_string(*rounds);
  std::snprintf(buf, sizeof(buf), " time=%.1fs", seconds);
  text += buf;
  if (reported) {
    std::string bytes = FormatBytes(p->bytes_pushed());
    bytes.erase(std::remove(bytes.begin(), bytes.end(), ' '), bytes.end());
    text += " pushed=" + bytes;
  }
  const uint32_t finished = status != nullptr ? status->workers_finished() : 0;
  text += " workers=" + std::to_string(finished) + "/" + std::to_string(num_workers_);
  if (p != nullptr) {
    std::map<std::string, double> metrics(p->metrics().begin(), p->metrics().end());  // by name
    for (const auto& [name, value] : metrics) {
      if (IsResultField(name)) continue;
      std::snprintf(buf, sizeof(buf), "=%.6g", value);
      text += " " + name + buf;
    }
  }
  return text + LostWorkers();
}

std::string JobResult::LostWorkers() const {
  std::string text;
  for (const auto& [rank, how] : lost_) {
    text += "; lost worker " + std::to_string(rank) + " (" + how + ")";
  }
  return text;
}

std::string JobResult::Failed(const std::string& reason, const pb::JobStatus* status) const {
  std::string text = "job FAILED: " + reason;
  if (status != nullptr && status->phase() == pb::JOB_FAILED) {
    text += " (scheduler: " + status->failure().code() + ": " + status->failure().message() + ")";
  }
  return text + LostWorkers();
}

}  // namespace sieve
