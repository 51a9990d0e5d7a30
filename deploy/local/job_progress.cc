#include "deploy/local/job_progress.h"

#include <cstdio>

#include "proto/job_status_text.h"
#include "proto/progress_line.h"  // FormatDuration

namespace sieve {
namespace {

// "1 server", "4 workers".
std::string Count(uint32_t n, const char* role) {
  return std::to_string(n) + " " + role + (n == 1 ? "" : "s");
}

// "2 of 4 workers".
std::string Missing(uint32_t missing, uint32_t total, const char* role) {
  return std::to_string(missing) + " of " + Count(total, role);
}

bool AnyWorkerReported(const pb::JobStatus& st) {
  for (const pb::JobNode& n : st.nodes()) {
    if (n.has_worker()) return true;
  }
  return false;
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

std::string JobProgressText(const pb::JobStatus& st) {
  if (st.phase() == pb::JOB_FINISHED || st.phase() == pb::JOB_FAILED) return JobStatusBrief(st);
  if (st.phase() != pb::JOB_RUNNING) {
    std::string missing;
    if (st.workers_registered() < st.num_workers()) {
      missing = Missing(st.num_workers() - st.workers_registered(), st.num_workers(), "worker");
    }
    if (st.servers_registered() < st.num_servers()) {
      if (!missing.empty()) missing += " and ";
      missing += Missing(st.num_servers() - st.servers_registered(), st.num_servers(), "server");
    }
    if (missing.empty()) missing = "the job to start";
    return "waiting for " + missing + "; scheduler at " + st.scheduler();
  }
  if (!AnyWorkerReported(st)) {
    return "job formed (" + Count(st.num_servers(), "server") + ", " +
           Count(st.num_workers(), "worker") + "); waiting for the first round";
  }
  const pb::JobProgress& p = st.progress();
  char head[200];
  int at = 0;
  if (p.epochs() > 0) {
    at = std::snprintf(head, sizeof(head), "epoch %u/%u ", p.epoch(), p.epochs());
  }
  const auto round = static_cast<unsigned long long>(p.round());
  const auto rounds = static_cast<unsigned long long>(p.total_rounds());
  if (rounds > 0) {
    at += std::snprintf(head + at, sizeof(head) - at, "round %llu/%llu %.0f%%", round, rounds,
                        100.0 * static_cast<double>(round) / static_cast<double>(rounds));
  } else {
    at += std::snprintf(head + at, sizeof(head) - at, "round %llu", round);
  }
  if (p.has_loss()) std::snprintf(head + at, sizeof(head) - at, " loss %.4f", p.loss());
  std::string text = head;
  if (p.rounds_per_second() > 0) {
    char r[48];
    std::snprintf(r, sizeof(r), " %.1f rounds/s", p.rounds_per_second());
    text += r;
  }
  text += " pushed " + FormatBytes(p.bytes_pushed());
  if (rounds > 0 && p.has_eta_seconds() && p.rounds_per_second() > 0) {
    text += " ETA " + FormatDuration(p.eta_seconds());
  }
  return text;
}

}  // namespace sieve
