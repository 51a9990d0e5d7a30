#include "proto/register_proof.h"

#include <random>
#include <string>

namespace sieve {
namespace {

void Put64(std::string* s, uint64_t v) {
  for (int b = 0; b < 8; ++b) s->push_back(static_cast<char>(v >> (8 * b)));
}

void PutString(std::string* s, std::string_view v) {
  Put64(s, v.size());
  s->append(v);
}

uint64_t NonZero(uint64_t v) { return v == 0 ? 1 : v; }

}  // namespace

SipKey JobKey(std::string_view token) {
  if (token.empty()) return {};
  // Two fixed keys (ASCII "sieve-job-key-lo" / "-hi"): 128 bits of key from the token.
  const SipKey lo{0x6f6a2d6576656973ull, 0x6f6c2d79656b2d62ull};
  const SipKey hi{0x6f6a2d6576656973ull, 0x69682d79656b2d62ull};
  SipKey k{SipHash24(lo, token), SipHash24(hi, token)};
  if (IsZero(k)) k.k0 = 1;
  return k;
}

SipKey RandomSipKey() {
  std::random_device rd;
  SipKey k;
  k.k0 = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  k.k1 = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return k;
}

uint64_t RegisterChallenge(const SipKey& secret, const pb::Register& r) {
  std::string m = "sieve-register-challenge";
  Put64(&m, r.instance());
  Put64(&m, static_cast<uint64_t>(r.role()));
  PutString(&m, r.host());
  Put64(&m, r.port());
  return NonZero(SipHash24(secret, m));
}

uint64_t RegisterProof(const SipKey& job_key, const pb::Register& r) {
  std::string m = "sieve-register-proof";
  Put64(&m, static_cast<uint64_t>(r.role()));
  PutString(&m, r.host());
  Put64(&m, r.port());
  Put64(&m, r.protocol_version());
  Put64(&m, static_cast<uint64_t>(static_cast<int64_t>(r.rank())));
  Put64(&m, r.instance());
  Put64(&m, r.num_params());
  Put64(&m, r.challenge());
  Put64(&m, r.rebuildable() ? 1 : 0);  // protocol 11
  return NonZero(SipHash24(job_key, m));
}

}  // namespace sieve
