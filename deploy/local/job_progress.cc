#include "deploy/local/job_progress.h"

#include <algorithm>
#include <cstdio>

namespace sieve {
namespace {

// The message of a glog line ("I1201 10:40:00.123456 12345 scheduler.cc:252] MESSAGE"), or the
// whole line when it has no glog prefix.
std::string_view GlogMessage(std::string_view line) {
  size_t at = line.find("] ");
  return at == std::string_view::npos ? line : line.substr(at + 2);
}

// "1 server", "4 workers".
std::string Count(int n, const char* role) {
  return std::to_string(n) + " " + role + (n == 1 ? "" : "s");
}

// "2 of 4 workers".
std::string Missing(int missing, int total, const char* role) {
  return std::to_string(missing) + " of " + Count(total, role);
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= 1000000000ULL) {
    std::snprintf(text, sizeof(text), "%.1f GB", b / 1e9);
  } else if (bytes >= 1000000ULL) {
    std::snprintf(text, sizeof(text), "%.1f MB", b / 1e6);
  } else if (bytes >= 1000ULL) {
    std::snprintf(text, sizeof(text), "%.1f kB", b / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

JobProgress::JobProgress(int num_servers, int num_workers)
    : num_servers_(num_servers), num_workers_(num_workers) {}

void JobProgress::SchedulerLine(std::string_view line) {
  std::string_view message = GlogMessage(line);
  if (message.starts_with("server registered from ")) {
    servers_registered_ = std::min(servers_registered_ + 1, num_servers_);
  } else if (message.starts_with("worker registered from ")) {
    workers_registered_ = std::min(workers_registered_ + 1, num_workers_);
  } else if (message.starts_with("node table sent")) {
    formed_ = true;
  }
}

void JobProgress::WorkerProgress(int rank, const ProgressPoint& point, Clock::time_point now) {
  Worker& w = workers_[rank];
  if (point.bytes_up < w.latest.bytes_up) w.bytes_before += w.latest.bytes_up;
  w.latest = point;
  formed_ = true;
  if (!first_) first_.emplace(JobRound(), now);
  last_ = now;
}

uint64_t JobProgress::JobRound() const {
  uint64_t round = UINT64_MAX;
  for (const auto& [rank, w] : workers_) round = std::min(round, w.latest.round);
  return workers_.empty() ? 0 : round;
}

std::string JobProgress::Text() const {
  if (scheduler_.empty()) return "";
  if (!formed_) {
    std::string missing;
    if (workers_registered_ < num_workers_) {
      missing = Missing(num_workers_ - workers_registered_, num_workers_, "worker");
    }
    if (servers_registered_ < num_servers_) {
      missing += (missing.empty() ? "" : " and ") +
                 Missing(num_servers_ - servers_registered_, num_servers_, "server");
    }
    if (missing.empty()) missing = "the job to start";
    return "waiting for " + missing + "; scheduler at " + scheduler_;
  }
  if (workers_.empty()) {
    return "job formed (" + Count(num_servers_, "server") + ", " + Count(num_workers_, "worker") +
           "); waiting for the first round";
  }
  // The slowest worker's position; totals are the same for every worker of a job.
  const ProgressPoint* slowest = nullptr;
  double loss = 0;
  uint64_t bytes = 0;
  for (const auto& [rank, w] : workers_) {
    if (slowest == nullptr || w.latest.round < slowest->round) slowest = &w.latest;
    loss += w.latest.loss;
    bytes += w.bytes_before + w.latest.bytes_up;
  }
  loss /= static_cast<double>(workers_.size());
  const uint64_t round = slowest->round, rounds = slowest->rounds;
  // A total of 0 is unknown (a Python worker without steps_per_epoch writes "epoch 0/0 round
  // 57/0"): what is known is shown, with no total, percentage or ETA.
  char head[160];
  int at = 0;
  if (slowest->epochs > 0) {
    at = std::snprintf(head, sizeof(head), "epoch %llu/%llu ",
                       static_cast<unsigned long long>(slowest->epoch),
                       static_cast<unsigned long long>(slowest->epochs));
  }
  if (rounds > 0) {
    std::snprintf(head + at, sizeof(head) - at, "round %llu/%llu %.0f%% loss %.4f",
                  static_cast<unsigned long long>(round), static_cast<unsigned long long>(rounds),
                  100.0 * static_cast<double>(round) / static_cast<double>(rounds), loss);
  } else {
    std::snprintf(head + at, sizeof(head) - at, "round %llu loss %.4f",
                  static_cast<unsigned long long>(round), loss);
  }
  std::string text = head;
  const double seconds = first_ ? std::chrono::duration<double>(last_ - first_->second).count() : 0;
  if (seconds > 0 && round > first_->first) {
    const double rate = static_cast<double>(round - first_->first) / seconds;
    char r[48];
    std::snprintf(r, sizeof(r), " %.1f rounds/s", rate);
    text += r;
    text += " pushed " + FormatBytes(bytes);
    if (rounds > round)
      text += " ETA " + FormatDuration(static_cast<double>(rounds - round) / rate);
  } else {
    text += " pushed " + FormatBytes(bytes);
  }
  return text;
}

}  // namespace sieve
