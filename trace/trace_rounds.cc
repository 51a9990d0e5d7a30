#include "trace/trace_rounds.h"

#include <optional>

#include "base/parse_number.h"

namespace sieve {

StatusOr<TraceRounds> ParseTraceRounds(std::string_view text) {
  const size_t colon = text.find(':');
  std::string quoted = "'";
  quoted.append(text);
  quoted.push_back('\'');
  std::optional<uint64_t> begin, end;  // whole decimal numbers (no sign, no spaces)
  if (colon != std::string_view::npos) {
    begin = ParseNumber<uint64_t>(text.substr(0, colon));
    end = ParseNumber<uint64_t>(text.substr(colon + 1));
  }
  if (!begin || !end) {
    return InvalidArgumentError(
        "expected A:B, the rounds A to B-1 as whole numbers (e.g. 0:100), "
        "got " +
        quoted);
  }
  TraceRounds r;
  r.begin = *begin;
  r.end = *end;
  if (r.begin >= r.end) {
    return InvalidArgumentError(quoted + " records no round: A:B needs A < B (rounds A to B-1)");
  }
  return r;
}

}  // namespace sieve
