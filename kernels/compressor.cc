#include "kernels/compressor.h"

#include <string>

namespace sieve {

namespace {
struct Named {
  std::string_view name;
  Compressor value;
};
constexpr Named kNames[] = {{"none", Compressor::kNone},
                            {"topk", Compressor::kTopk},
                            {"gaussiank", Compressor::kGaussiank},
                            {"gaussiank_paper", Compressor::kGaussiankPaper},
                            {"dgc", Compressor::kDgc},
                            {"randomk", Compressor::kRandomk}};
}  // namespace

StatusOr<Compressor> ParseCompressor(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.value;
  }
  return InvalidArgumentError("unknown compressor '" + std::string(name) +
                              "' (expected none, topk, gaussiank, gaussiank_paper, dgc or "
                              "randomk)");
}

std::string_view CompressorName(Compressor c) {
  for (const Named& n : kNames) {
    if (n.value == c) return n.name;
  }
  return "unknown";
}

}  // namespace sieve
