#include "scheduler/node_reports.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace sieve {
namespace {

constexpr std::chrono::seconds kRateWindow{30};

bool ValidMetricName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

Status Below(const char* what, uint64_t now, uint64_t before) {
  return InvalidArgumentError(std::string(what) + " " + std::to_string(now) +
                              " is below the process's last report (" + std::to_string(before) +
                              ")");
}

}  // namespace

Status NodeReports::CheckWorker(const pb::WorkerReport& r, const Node* last, uint64_t job_round) {
  if (r.has_loss() && !(std::isfinite(r.loss()) && r.loss() >= 0)) {
    return InvalidArgumentError("loss " + std::to_string(r.loss()) + " is not finite and >= 0");
  }
  if (r.has_test_accuracy() && !(r.test_accuracy() >= 0 && r.test_accuracy() <= 1)) {
    return InvalidArgumentError("test accuracy " + std::to_string(r.test_accuracy()) +
                                " is outside [0, 1]");
  }
  if (!(std::isfinite(r.straggle_seconds()) && r.straggle_seconds() >= 0)) {
    return InvalidArgumentError("straggle time is not finite and >= 0");
  }
  if (r.total_rounds() > 0 && r.round() > r.total_rounds()) {
    return InvalidArgumentError("round " + std::to_string(r.round()) + " is beyond its total " +
                                std::to_string(r.total_rounds()));
  }
  if (r.epochs() > 0 && r.epoch() > r.epochs()) {
    return InvalidArgumentError("epoch " + std::to_string(r.epoch()) + " is beyond its epochs " +
                                std::to_string(r.epochs()));
  }
  if (r.metrics_size() > kMaxMetrics) {
    return InvalidArgumentError(std::to_string(r.metrics_size()) + " metrics (at most " +
                                std::to_string(kMaxMetrics) + ")");
  }
  for (const auto& [name, value] : r.metrics()) {
    if (!ValidMetricName(name))
      return InvalidArgumentError("a metric name is not [A-Za-z0-9_.-]{1,64}");
    if (!std::isfinite(value)) return InvalidArgumentError("metric " + name + " is not finite");
  }
  // A process's first report is held to the job's furthest worker instead (a rejoiner starts late).
  const uint64_t before = last != nullptr && last->has_worker ? last->worker.round() : job_round;
  if (last != nullptr && last->has_worker) {
    const pb::WorkerReport& p = last->worker;
    if (r.round() < p.round()) return Below("round", r.round(), p.round());
    if (r.bytes_pushed() < p.bytes_pushed())
      return Below("bytes pushed", r.bytes_pushed(), p.bytes_pushed());
    if (r.bytes_pulled() < p.bytes_pulled())
      return Below("bytes pulled", r.bytes_pulled(), p.bytes_pulled());
    if (r.skipped_rounds() < p.skipped_rounds())
      return Below("skipped rounds", r.skipped_rounds(), p.skipped_rounds());
    if (r.missed_slices() < p.missed_slices())
      return Below("missed slices", r.missed_slices(), p.missed_slices());
  }
  if (r.round() > before && r.round() - before > kMaxRoundStep) {
    return InvalidArgumentError("round " + std::to_string(r.round()) + " is more than " +
                                std::to_string(kMaxRoundStep) + " past the last report's (" +
                                std::to_string(before) + ")");
  }
  return Status::Ok();
}

Status NodeReports::CheckServer(const pb::ServerReport& r, const Node* last) {
  if (last == nullptr || !last->has_server) return Status::Ok();
  const pb::ServerReport& p = last->server;
  if (r.rounds() < p.rounds()) return Below("rounds", r.rounds(), p.rounds());
  if (r.pushes_applied() < p.pushes_applied())
    return Below("pushes applied", r.pushes_applied(), p.pushes_applied());
  if (r.rejected() < p.rejected()) return Below("rejected", r.rejected(), p.rejected());
  if (r.duplicates() < p.duplicates()) return Below("duplicates", r.duplicates(), p.duplicates());
  return Status::Ok();
}

Status NodeReports::Accept(int id, pb::Role role, uint64_t instance, const pb::Heartbeat& hb,
                           Clock::time_point /*now*/) {
  auto it = nodes_.find(id);
  const Node* same = it != nodes_.end() && it->second.instance == instance ? &it->second : nullptr;
  Status s;
  if (hb.has_worker() && role != pb::ROLE_WORKER) {
    s = InvalidArgumentError("a worker's report from a node that is not a worker");
  } else if (hb.has_server() && role != pb::ROLE_SERVER) {
    s = InvalidArgumentError("a server's report from a node that is not a server");
  } else if (hb.has_worker()) {
    // Only a process's first report is held to the job's furthest round: the scan over every
    // node is skipped for the others (every heartbeat of every worker comes through here).
    uint64_t job_round = 0;
    if (same == nullptr || !same->has_worker) {
      for (const auto& [other, n] : nodes_) {
        if (n.has_worker) job_round = std::max(job_round, n.worker.round());
      }
    }
    s = CheckWorker(hb.worker(), same, job_round);
  } else if (hb.has_server()) {
    s = CheckServer(hb.server(), same);
  } else {
    return Status::Ok();  // a bare heartbeat: nothing to take
  }
  if (!s.ok()) {
    ++refused_;
    return s;
  }
  Node& n = nodes_[id];
  if (n.instance != instance) {  // a new process: its predecessor's bytes stay in the totals
    if (n.has_worker) {
      n.pushed_before += n.worker.bytes_pushed();
      n.pulled_before += n.worker.bytes_pulled();
    }
    n.instance = instance;
    n.has_worker = n.has_server = false;
    n.worker.Clear();
    n.server.Clear();
  }
  if (hb.has_worker()) {
    n.worker = hb.worker();
    n.has_worker = true;
  }
  if (hb.has_server()) {
    n.server = hb.server();
    n.has_server = true;
  }
  return Status::Ok();
}

void NodeReports::Forget(int id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return;
  Node& n = it->second;
  if (n.has_worker) {
    n.pushed_before += n.worker.bytes_pushed();
    n.pulled_before += n.worker.bytes_pulled();
  }
  n.instance = 0;
  n.has_worker = n.has_server = false;
  n.worker.Clear();
  n.server.Clear();
}

const pb::WorkerReport* NodeReports::Worker(int id) const {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.has_worker ? &it->second.worker : nullptr;
}

const pb::ServerReport* NodeReports::Server(int id) const {
  auto it = nodes_.find(id);
  return it != nodes_.end() && it->second.has_server ? &it->second.server : nullptr;
}

pb::JobProgress NodeReports::Progress(const std::vector<WorkerRow>& rows, Clock::time_point now) {
  pb::JobProgress p;
  // The workers whose state is the job's: those still training; once none is, the live ones
  // (finished); once none is live, every one.
  bool any_training = false, any_live = false;
  for (const WorkerRow& w : rows) {
    if (Worker(w.id) == nullptr) continue;
    any_live = any_live || w.live;
    any_training = any_training || (w.live && !w.finished);
  }
  std::optional<uint64_t> slowest;
  double loss_sum = 0;
  int losses = 0;
  int accuracy_rank = std::numeric_limits<int>::max();
  int metrics_rank = std::numeric_limits<int>::max();
  for (const WorkerRow& w : rows) {
    auto it = nodes_.find(w.id);
    if (it == nodes_.end()) continue;
    const Node& n = it->second;
    p.set_bytes_pushed(p.bytes_pushed() + n.pushed_before + n.worker.bytes_pushed());
    p.set_bytes_pulled(p.bytes_pulled() + n.pulled_before + n.worker.bytes_pulled());
    if (!n.has_worker) continue;
    const pb::WorkerReport& r = n.worker;
    p.set_total_rounds(std::max(p.total_rounds(), r.total_rounds()));
    p.set_epochs(std::max(p.epochs(), r.epochs()));
    if (r.has_test_accuracy() && w.rank < accuracy_rank) {
      accuracy_rank = w.rank;
      p.set_test_accuracy(r.test_accuracy());
    }
    if (r.metrics_size() > 0 && w.rank < metrics_rank) {
      metrics_rank = w.rank;
      *p.mutable_metrics() = r.metrics();
    }
    const bool counts = any_training ? (w.live && !w.finished) : any_live ? w.live : true;
    if (!counts) continue;
    if (!slowest || r.round() < *slowest) {
      slowest = r.round();
      p.set_epoch(r.epoch());
    }
    if (r.has_loss()) {
      loss_sum += r.loss();
      ++losses;
    }
  }
  if (losses > 0) p.set_loss(loss_sum / losses);
  p.set_round(slowest.value_or(0));
  if (!slowest) return p;
  if (samples_.empty() || samples_.back().second != p.round())
    samples_.emplace_back(now, p.round());
  while (samples_.size() > 2 && now - samples_.front().first > kRateWindow) samples_.pop_front();
  const auto& [t0, r0] = samples_.front();
  const double span = std::chrono::duration<double>(now - t0).count();
  if (span >= 1.0 && p.round() > r0) {
    const double rate = static_cast<double>(p.round() - r0) / span;
    p.set_rounds_per_second(rate);
    if (p.total_rounds() > p.round()) {
      p.set_eta_seconds(static_cast<double>(p.total_rounds() - p.round()) / rate);
    } else if (p.total_rounds() > 0) {
      p.set_eta_seconds(0);
    }
  }
  return p;
}

}  // namespace sieve
