#include "deploy/local/status_screen.h"

#include <cstdio>
#include <sstream>

#include "deploy/local/job_progress.h"
#include "proto/job_status_text.h"

namespace sieve {
namespace {

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// What a row says beyond round and loss: a server's counters and shards, a worker's extras, and
// why it was lost.
std::string Detail(const pb::JobNode& n) {
  std::string d;
  if (n.has_server()) {
    const pb::ServerReport& s = n.server();
    d = "applied " + std::to_string(s.pushes_applied()) + " rejected " +
        std::to_string(s.rejected()) + " dup " + std::to_string(s.duplicates());
  }
  if (n.role() == pb::ROLE_SERVER && n.primary_shards_size() > 0) {
    d += " shards";
    for (int s : n.primary_shards()) d.append(" ").append(std::to_string(s));
  }
  if (n.backup_shards_size() > 0) {
    d += " backups";
    for (int s : n.backup_shards()) d.append(" ").append(std::to_string(s));
  }
  if (n.has_worker()) {
    const pb::WorkerReport& w = n.worker();
    d = "pushed " + FormatBytes(w.bytes_pushed());
    if (w.skipped_rounds() > 0) d += " skipped " + std::to_string(w.skipped_rounds());
    if (w.missed_slices() > 0) d += " missed " + std::to_string(w.missed_slices());
    if (w.straggle_seconds() > 0) d += " straggle " + Format("%.1fs", w.straggle_seconds());
  }
  if (n.restarts() > 0) d += " restarts " + std::to_string(n.restarts());
  if (n.state() == pb::NODE_LOST && !n.lost_reason().empty()) d += " (" + n.lost_reason() + ")";
  return d;
}

}  // namespace

std::string StatusScreen(const pb::JobStatus& st, size_t width) {
  std::ostringstream out;
  auto line = [&](std::string text) {
    if (width > 0 && text.size() > width) text.resize(width);
    out << text << "\n";
  };
  line("job " + st.job() + "  " + PhaseName(st.phase()) + "  " +
       Format("%.1fs", st.elapsed_seconds()) + "  scheduler " + st.scheduler() + "  D " +
       std::to_string(st.num_params()));
  if (st.phase() == pb::JOB_FAILED) {
    const pb::JobFailure& f = st.failure();
    std::string who;
    if (f.node_id() >= 0) {
      who = std::string(f.role() == pb::ROLE_SERVER ? " server " : " worker ") +
            std::to_string(f.rank());
    }
    line("FAILED: " + f.code() + who + ": " + f.message());
  }
  const pb::JobProgress& p = st.progress();
  if (p.total_rounds() > 0) {
    constexpr int kBar = 40;
    const double done = static_cast<double>(p.round()) / static_cast<double>(p.total_rounds());
    const int filled = static_cast<int>(done * kBar);
    line("[" + std::string(filled, '#') + std::string(kBar - filled, '.') + "] " +
         Format("%3.0f%%", 100 * done));
  }
  line(JobProgressText(st));
  std::string extra;
  if (p.has_test_accuracy()) extra = "test accuracy " + Format("%.4f", p.test_accuracy()) + "  ";
  extra +=
      "pulled " + FormatBytes(p.bytes_pulled()) + "  heartbeats " + std::to_string(st.heartbeats());
  if (st.reports_refused() > 0)
    extra += "  reports refused " + std::to_string(st.reports_refused());
  for (const auto& [name, value] : p.metrics()) extra += "  " + name + " " + Format("%.6g", value);
  line(extra);
  char row[256];
  std::snprintf(row, sizeof(row), "%-7s %-5s %-10s %-21s %6s  %-12s %-7s %s", "ROLE", "RANK",
                "STATE", "ADDRESS", "HEARD", "ROUND", "LOSS", "DETAIL");
  line(row);
  for (const pb::JobNode& n : st.nodes()) {
    std::string round = "-", loss = "-";
    if (n.has_worker()) {
      round = std::to_string(n.worker().round());
      if (n.worker().has_loss()) loss = Format("%.4f", n.worker().loss());
    } else if (n.has_server()) {
      round = std::to_string(n.server().rounds());
    }
    std::snprintf(row, sizeof(row), "%-7s %-5d %-10s %-21s %5.1fs  %-12s %-7s ",
                  n.role() == pb::ROLE_SERVER ? "server" : "worker", n.rank(),
                  NodeStateName(n.state()).c_str(), n.address().c_str(),
                  static_cast<double>(n.heartbeat_age_ms()) / 1000.0, round.c_str(), loss.c_str());
    line(row + Detail(n));
  }
  return out.str();
}

}  // namespace sieve
