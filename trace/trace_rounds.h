// TraceRounds: the rounds a timeline records (--trace_rounds=A:B: rounds A to B - 1), so that a
// trace of a long job stays small. A plain value; ParseTraceRounds reads the flag's text.
//
// Contract: begin < end once parsed (an empty range records nothing and is refused as a usage
// error). Rounds are the job's rounds as the workers number them (0, 1, ... across epochs).
// Thread-safety: plain data and a pure function.
#ifndef SIEVE_TRACE_TRACE_ROUNDS_H_
#define SIEVE_TRACE_TRACE_ROUNDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

struct TraceRounds {
  uint64_t begin = 0;
  uint64_t end = 100;  // the default of --trace_rounds: the job's first 100 rounds

  bool Contains(uint64_t round) const { return round >= begin && round < end; }
  // "A:B", as the flag is written.
  std::string ToString() const { return std::to_string(begin) + ":" + std::to_string(end); }
};

// Parses "A:B" (decimal, 0 <= A < B < 2^64). Errors: InvalidArgument saying what was expected and
// quoting `text` (the caller prefixes the flag's name).
StatusOr<TraceRounds> ParseTraceRounds(std::string_view text);

}  // namespace sieve

#endif  // SIEVE_TRACE_TRACE_ROUNDS_H_
