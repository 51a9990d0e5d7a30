#include "trace/trace_rounds.h"

#include <charconv>

namespace sieve {
namespace {

// A whole decimal number (no sign, no spaces), or false.
bool ParseRound(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

StatusOr<TraceRounds> ParseTraceRounds(std::string_view text) {
  const size_t colon = text.find(':');
  TraceRounds r;
  std::string quoted = "'";
  quoted.append(text);
  quoted.push_back('\'');
  if (colon == std::string_view::npos || !ParseRound(text.substr(0, colon), &r.begin) ||
      !ParseRound(text.substr(colon + 1), &r.end)) {
    return InvalidArgumentError(
        "expected A:B, the rounds A to B-1 as whole numbers (e.g. 0:100), "
        "got " +
        quoted);
  }
  if (r.begin >= r.end) {
    return InvalidArgumentError(quoted + " records no round: A:B needs A < B (rounds A to B-1)");
  }
  return r;
}

}  // namespace sieve
