#include "tests/net/summary_line.h"

#include <sstream>

namespace sieve::testing {

KeyValues ParseSummary(const std::string& line, const std::string& marker) {
  KeyValues kv;
  std::istringstream in(line.substr(line.find(marker) + marker.size()));
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return kv;
}

}  // namespace sieve::testing
