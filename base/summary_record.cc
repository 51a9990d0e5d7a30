#include "base/summary_record.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "base/atomic_file.h"
#include "base/json_text.h"
#include "base/rank_pattern.h"

namespace sieve {
namespace {

bool ValidKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::string JsonNumber(double v) {
  std::string out;
  AppendJsonNumber(v, &out);
  return out;
}

std::string Printf(const char* format, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, precision, v);
  return buf;
}

bool Shown(SummaryRecord::Show show, bool non_zero) {
  switch (show) {
    case SummaryRecord::Show::kAlways:
      return true;
    case SummaryRecord::Show::kNonZero:
      return non_zero;
    case SummaryRecord::Show::kHidden:
      return false;
  }
  return false;
}

}  // namespace

SummaryRecord& SummaryRecord::Add(std::string_view key, std::string line_value,
                                  std::string json_value, bool shown) {
  if (!ValidKey(key)) std::abort();  // keys are the callers' constants
  for (const Field& f : fields_)
    if (f.key == key) std::abort();
  fields_.push_back(Field{std::string(key), std::move(line_value), std::move(json_value), shown});
  return *this;
}

SummaryRecord& SummaryRecord::Int(std::string_view key, int64_t v, Show show) {
  const std::string text = std::to_string(v);
  return Add(key, text, text, Shown(show, v != 0));
}

SummaryRecord& SummaryRecord::Uint(std::string_view key, uint64_t v, Show show) {
  const std::string text = std::to_string(v);
  return Add(key, text, text, Shown(show, v != 0));
}

SummaryRecord& SummaryRecord::Real(std::string_view key, double v, int digits, Show show) {
  return Add(key, Printf("%.*g", digits, v), JsonNumber(v), Shown(show, v != 0.0));
}

SummaryRecord& SummaryRecord::Fixed(std::string_view key, double v, int decimals, Show show) {
  return Add(key, Printf("%.*f", decimals, v), JsonNumber(v), Shown(show, v != 0.0));
}

SummaryRecord& SummaryRecord::Text(std::string_view key, std::string_view v, Show show) {
  std::string json;
  AppendJsonString(v, &json);
  // A line's words are split at spaces: a value never carries one.
  std::string line(v);
  for (char& c : line)
    if (c == ' ' || c == '\n' || c == '\t') c = '_';
  return Add(key, std::move(line), std::move(json), Shown(show, !v.empty()));
}

SummaryRecord& SummaryRecord::List(std::string_view key, std::vector<SummaryRecord> items) {
  std::string json = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) json += ',';
    json += items[i].Json();
  }
  json += ']';
  return Add(key, "", std::move(json), false);
}

std::string SummaryRecord::Line(std::string_view prefix) const {
  std::string out(prefix);
  for (const Field& f : fields_) {
    if (!f.shown) continue;
    out.append(" ").append(f.key).append("=").append(f.line_value);
  }
  return out;
}

std::string SummaryRecord::Json() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(fields_[i].key, &out);
    out.append(":").append(fields_[i].json_value);
  }
  out += '}';
  return out;
}

Status WriteSummaryFile(const std::string& pattern, std::string_view role, int rank,
                        const SummaryRecord& record) {
  const std::string path = ExpandRolePattern(pattern, role, rank);
  Status s = WriteFileAtomically(path, record.Json() + "\n");
  if (!s.ok()) return UnavailableError(std::string("--summary_out: ").append(s.message()));
  return s;
}

}  // namespace sieve
