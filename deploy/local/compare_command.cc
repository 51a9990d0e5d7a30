#include "deploy/local/compare_command.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "deploy/local/daemon_locator.h"

namespace sieve {
namespace {

bool IsFile(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// Directory of this executable (build/deploy), "." when unknown.
std::string SelfDir() {
  std::string dir = ExecutableDir();
  return dir.empty() ? "." : dir;
}

// The driver: $SIEVE_COMPARE_PY, else next to the sources this binary was built from.
std::string FindDriver() {
  if (const char* env = std::getenv("SIEVE_COMPARE_PY"); env != nullptr && *env != '\0') {
    return env;
  }
  const std::string built_from = std::string(SIEVE_SOURCE_DIR) + "/deploy/local/compare_command.py";
  if (IsFile(built_from)) return built_from;
  const std::string relative = SelfDir() + "/../../deploy/local/compare_command.py";
  if (IsFile(relative)) return relative;
  return "";
}

// Debian's interpreter first: python3-yaml / python3-matplotlib are installed for it.
std::string FindPython() {
  if (const char* env = std::getenv("SIEVE_PYTHON"); env != nullptr && *env != '\0') return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  const std::string driver = FindDriver();
  if (driver.empty()) {
    std::fprintf(stderr, "sieve compare: cannot find compare_command.py (set SIEVE_COMPARE_PY)\n");
    return 1;
  }
  const std::string python = FindPython();
  std::vector<std::string> words = {python, driver, "--build=" + SelfDir() + "/.."};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "sieve compare: cannot run %s: %s\n", python.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace sieve
