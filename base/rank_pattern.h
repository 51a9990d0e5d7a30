// Per-rank file names: a daemon given "out-{rank}.bin" writes out-3.bin as rank 3.
//
// Contract: ExpandRankPattern(path, rank) returns `path` with every occurrence of "{rank}"
// replaced by the decimal rank; a path without the pattern comes back unchanged.
// ExpandRolePattern(path, role, rank) also replaces every "{role}" by `role` ("server",
// "worker"): one pattern for a job's servers and workers (--trace_out, --summary_out). Pure
// functions, safe from any thread.
#ifndef SIEVE_BASE_RANK_PATTERN_H_
#define SIEVE_BASE_RANK_PATTERN_H_

#include <string>
#include <string_view>

namespace sieve {

std::string ExpandRankPattern(const std::string& path, int rank);
std::string ExpandRolePattern(const std::string& path, std::string_view role, int rank);

}  // namespace sieve

#endif  // SIEVE_BASE_RANK_PATTERN_H_
