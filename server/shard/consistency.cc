#include "server/shard/consistency.h"

#include <string>

namespace sieve {

StatusOr<Consistency> ParseConsistency(std::string_view name) {
  if (name == "bsp") return Consistency::kBsp;
  if (name == "ssp") return Consistency::kSsp;
  if (name == "asp") return Consistency::kAsp;
  return InvalidArgumentError("unknown consistency '" + std::string(name) +
                              "' (expected bsp, ssp or asp)");
}

StatusOr<StalenessLr> ParseStalenessLr(std::string_view name) {
  if (name == "none") return StalenessLr::kNone;
  if (name == "inverse") return StalenessLr::kInverse;
  return InvalidArgumentError("unknown staleness_lr '" + std::string(name) +
                              "' (expected none or inverse)");
}

StatusOr<LatePushes> ParseLatePushes(std::string_view name) {
  if (name == "apply") return LatePushes::kApply;
  if (name == "return") return LatePushes::kReturn;
  return InvalidArgumentError("unknown late_pushes '" + std::string(name) +
                              "' (expected apply or return)");
}

std::string_view ConsistencyName(Consistency c) {
  switch (c) {
    case Consistency::kBsp:
      return "bsp";
    case Consistency::kSsp:
      return "ssp";
    case Consistency::kAsp:
      return "asp";
  }
  return "?";
}

}  // namespace sieve
