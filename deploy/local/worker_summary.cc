#include "deploy/local/worker_summary.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <string>

namespace sieve {
namespace {

constexpr std::string_view kPrefix = "sieve-worker summary:";

// The summary line's own fields (worker/trainer/summary.h), which sieve.torch's record() refuses
// as metric names (train_acc too, a named argument of record()); any other field is a metric.
constexpr std::string_view kSummaryFields[] = {
    "rank",           "rounds",          "first_round",    "epochs",
    "test_acc",       "near_chance",     "loss",           "bytes_up",
    "bytes_down",     "dense_bytes",     "ratio",          "mean_round_s",
    "max_pushpull_s", "seconds",         "pushed_sum",     "skipped_rounds",
    "missed_slices",  "returned_sum",    "barrier_probes", "barrier_p50_ms",
    "barrier_p99_ms", "barrier_probe_s", "straggler",      "straggle_s",
    "train_acc"};

bool IsSummaryField(std::string_view name) {
  return std::find(std::begin(kSummaryFields), std::end(kSummaryFields), name) !=
         std::end(kSummaryFields);
}

template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<WorkerSummary> ParseWorkerSummaryLine(std::string_view line) {
  if (!line.starts_with(kPrefix)) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  std::map<std::string_view, std::string_view> fields;
  std::vector<std::string_view> order;  // the fields' names as they come
  while (!line.empty()) {
    const size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
    if (word.empty()) continue;
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = word.substr(0, eq);
    if (!fields.contains(name)) order.push_back(name);
    fields[name] = word.substr(eq + 1);
  }
  WorkerSummary s;
  if (!ParseNumber(fields["rank"], &s.rank) || !ParseNumber(fields["rounds"], &s.rounds) ||
      !ParseNumber(fields["bytes_up"], &s.bytes_up) ||
      !ParseNumber(fields["seconds"], &s.seconds)) {
    return std::nullopt;
  }
  if (auto acc = fields.find("test_acc"); acc != fields.end()) {
    double value = 0;
    if (!ParseNumber(acc->second, &value)) return std::nullopt;
    s.test_acc = value;
  }
  for (std::string_view name : order) {
    double value = 0;
    if (name.empty() || IsSummaryField(name) || !ParseNumber(fields[name], &value) ||
        !std::isfinite(value)) {
      continue;
    }
    s.metrics.emplace_back(name, fields[name]);
  }
  return s;
}

}  // namespace sieve
