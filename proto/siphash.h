// SipHash-2-4 (Aumasson & Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed 64-bit
// pseudorandom function of a byte string, the keyed digest behind the registration proof
// (proto/register_proof.h). Unlike JobDigest (an unkeyed hash that travels in clear), its output
// says nothing of its 128-bit key to someone who sees any number of (message, output) pairs.
// Pure functions, thread-safe.
#ifndef SIEVE_PROTO_SIPHASH_H_
#define SIEVE_PROTO_SIPHASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sieve {

struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool operator==(const SipKey&) const = default;
};

// SipHash-2-4 of `message` under `key` (k0 = the key's first 8 bytes little-endian, k1 the next
// 8, as in the paper's test vectors).
uint64_t SipHash24(const SipKey& key, std::string_view message);

}  // namespace sieve

#endif  // SIEVE_PROTO_SIPHASH_H_
