#include "proto/job_identity.h"

#include <fstream>

namespace sieve {

uint64_t JobDigest(std::string_view token) {
  if (token.empty()) return 0;
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (const char c : token) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;  // FNV prime
  }
  // Finalizer (splitmix64): every input bit affects every output bit.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;  // 0 means "no token"
}

uint64_t JobInstanceDigest(uint64_t job, uint64_t instance) {
  if (job == 0) return 0;
  uint64_t h = job ^ (instance * 0x9e3779b97f4a7c15ull) ^ 0x6a09e667f3bcc909ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 || h == job ? h + 2 : h;
}

bool IsOneOf(std::span<const pb::MsgType> types, int type) {
  for (const pb::MsgType t : types) {
    if (t == type) return true;
  }
  return false;
}

StatusOr<std::string> ReadJobTokenFile(const std::string& path) {
  constexpr size_t kMaxTokenBytes = 4096;
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFoundError("cannot read " + path);
  std::string token;
  char c;
  while (token.size() <= kMaxTokenBytes && f.get(c)) token.push_back(c);
  if (token.size() > kMaxTokenBytes) {
    return InvalidArgumentError(path + " holds more than " + std::to_string(kMaxTokenBytes) +
                                " bytes; a job token is one line");
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) return InvalidArgumentError(path + " is empty");
  return token;
}

}  // namespace sieve
