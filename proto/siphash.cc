#include "proto/siphash.h"

#include <cstring>

namespace sieve {
namespace {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct State {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
  void Absorb(uint64_t m) {  // two compression rounds per 8-byte word
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

}  // namespace

uint64_t SipHash24(const SipKey& key, std::string_view message) {
  State s{key.k0 ^ 0x736f6d6570736575ull, key.k1 ^ 0x646f72616e646f6dull,
          key.k0 ^ 0x6c7967656e657261ull, key.k1 ^ 0x7465646279746573ull};
  const size_t n = message.size();
  const auto* p = reinterpret_cast<const unsigned char*>(message.data());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m = 0;
    for (int b = 0; b < 8; ++b) m |= static_cast<uint64_t>(p[i + b]) << (8 * b);
    s.Absorb(m);
  }
  // The last word: the remaining bytes, and the length's low byte in the top byte.
  uint64_t last = static_cast<uint64_t>(n & 0xff) << 56;
  for (size_t b = 0; i + b < n; ++b) last |= static_cast<uint64_t>(p[i + b]) << (8 * b);
  s.Absorb(last);
  s.v2 ^= 0xff;
  for (int r = 0; r < 4; ++r) s.Round();  // four finalization rounds
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace sieve
