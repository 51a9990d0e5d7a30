#include "deploy/local/worker_summary.h"

#include <charconv>
#include <map>
#include <string>

namespace sieve {
namespace {

constexpr std::string_view kPrefix = "sieve-worker summary:";

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
  while (!line.empty()) {
    const size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    line.remove_prefix(space == std::string_view::npos ? line.size() : space + 1);
    if (word.empty()) continue;
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    fields[word.substr(0, eq)] = word.substr(eq + 1);
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
  return s;
}

}  // namespace sieve
