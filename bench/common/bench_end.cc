#include "bench/common/bench_end.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace sieve {

void WriteJsonFileOrExit(std::string_view program, const std::string& path,
                         const std::string& text) {
  if (path.empty()) return;
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "%.*s: cannot write %s\n", static_cast<int>(program.size()),
                 program.data(), path.c_str());
    std::exit(1);
  }
  std::printf("json: %s\n", path.c_str());
}

int FinishBench(std::string_view program, const std::string& json_path, const std::string& json,
                const std::string& failure) {
  WriteJsonFileOrExit(program, json_path, json);
  if (failure.empty()) return 0;
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
               failure.c_str());
  return 1;
}

}  // namespace sieve
