// FlagValue(): the value of a benchmark's `--name=value` command-line word, for the benchmarks
// that read their own few flags (bench_pushpull, bench_server, bench_wire).
//
// Contract: a pointer into `word` just past "--<name>=" when `word` starts with it (the value,
// possibly empty), else nullptr. Pure; thread-safe.
#ifndef SIEVE_BENCH_COMMON_FLAG_VALUE_H_
#define SIEVE_BENCH_COMMON_FLAG_VALUE_H_

#include <string_view>

namespace sieve {

inline const char* FlagValue(const char* word, std::string_view name) {
  const std::string_view w = word;
  if (w.size() < name.size() + 3 || !w.starts_with("--") || w.substr(2, name.size()) != name ||
      w[2 + name.size()] != '=') {
    return nullptr;
  }
  return word + name.size() + 3;
}

}  // namespace sieve

#endif  // SIEVE_BENCH_COMMON_FLAG_VALUE_H_
