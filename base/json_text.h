// JSON text pieces shared by the trace writer, the trace merge and the run summaries: string
// literals, numbers and nanosecond times written as microseconds. They append to a caller's string.
//
// Contract: every function appends valid JSON text for one value. AppendJsonString escapes '"',
// '\\' and control characters and replaces bytes that are not well-formed UTF-8 with U+FFFD, so
// any input bytes (a host name, a file name) give a string every JSON parser accepts.
// AppendJsonNumber writes the shortest text that reads back as the same double (integers without
// a fraction or exponent); NaN and infinities, which JSON lacks, are written as null.
// AppendMicros writes a count of nanoseconds as microseconds with exactly three decimals
// ("-1.500", "12.000"): the trace-event format's unit, at the steady clock's resolution.
// Thread-safety: pure functions.
#ifndef SIEVE_BASE_JSON_TEXT_H_
#define SIEVE_BASE_JSON_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace sieve {

void AppendJsonString(std::string_view s, std::string* out);
void AppendJsonNumber(double v, std::string* out);
void AppendMicros(int64_t ns, std::string* out);

}  // namespace sieve

#endif  // SIEVE_BASE_JSON_TEXT_H_
