// The end of a benchmark run: its results file (--json=PATH, results/bench/<name>-<timestamp>.json
// by scripts/bench) and its exit code.
//
// Contract: WriteJsonFileOrExit() writes `text` to `path` (replacing it) and prints "json: PATH"
// on stdout; an empty `path` writes nothing. A file that cannot be opened or written is fatal:
// "<program>: cannot write PATH" on stderr and exit(1), so that a run whose results were lost
// never exits 0. FinishBench() does that, then returns main's exit code: 0, or 1 after
// "<program>: <failure>" on stderr when `failure` is not empty. Thread-compatible (call once, at
// the end).
#ifndef SIEVE_BENCH_COMMON_BENCH_END_H_
#define SIEVE_BENCH_COMMON_BENCH_END_H_

#include <string>
#include <string_view>

namespace sieve {

void WriteJsonFileOrExit(std::string_view program, const std::string& path,
                         const std::string& text);
int FinishBench(std::string_view program, const std::string& json_path, const std::string& json,
                const std::string& failure);

}  // namespace sieve

#endif  // SIEVE_BENCH_COMMON_BENCH_END_H_
