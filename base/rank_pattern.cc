#include "base/rank_pattern.h"

#include <string_view>

namespace sieve {

std::string ExpandRankPattern(const std::string& path, int rank) {
  static constexpr std::string_view kPattern = "{rank}";
  const std::string r = std::to_string(rank);
  std::string out = path;
  for (size_t pos = out.find(kPattern); pos != std::string::npos; pos = out.find(kPattern, pos)) {
    out.replace(pos, kPattern.size(), r);
    pos += r.size();
  }
  return out;
}

std::string ExpandRolePattern(const std::string& path, std::string_view role, int rank) {
  static constexpr std::string_view kRole = "{role}";
  std::string out = path;
  for (size_t pos = out.find(kRole); pos != std::string::npos; pos = out.find(kRole, pos)) {
    out.replace(pos, kRole.size(), role);
    pos += role.size();
  }
  return ExpandRankPattern(out, rank);
}

}  // namespace sieve
