// Parsing of the daemons' one-line run summaries ("sieve-worker summary: rank=0 rounds=... "),
// shared by the multi-process tests. Pure function; thread-safe.
#ifndef SIEVE_TESTS_NET_SUMMARY_LINE_H_
#define SIEVE_TESTS_NET_SUMMARY_LINE_H_

#include <map>
#include <string>

namespace sieve::testing {

using KeyValues = std::map<std::string, std::string>;

// The key=value words that follow `marker` in `line` (words without '=' are ignored). `line` must
// contain `marker`.
KeyValues ParseSummary(const std::string& line, const std::string& marker);

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_SUMMARY_LINE_H_
