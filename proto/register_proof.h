// The registration proof (protocol 7; docs/protocol.md, "Registration"). In a job with a token a
// scheduler believes a REGISTER only when it answers a challenge of this scheduler's and proves
// that its sender holds the token:
//   1. a REGISTER without a valid challenge is answered with REGISTER_CHALLENGE carrying
//      RegisterChallenge(secret, register): a keyed digest, under a secret the scheduler draws at
//      its start, of the REGISTER's instance, role and address, so no state is kept per peer;
//   2. the node sends the REGISTER again with that challenge and RegisterProof(JobKey(token),
//      register): a keyed digest of every field of the REGISTER (the challenge included);
//   3. the scheduler recomputes both; a REGISTER recorded in another job (another scheduler, so
//      another secret) carries a challenge this one never issued and is challenged again, never
//      counted; a proof made without the token is refused.
// Both digests are SipHash-2-4 (proto/siphash.h), so neither the token nor the secret can be
// learnt from the digests seen on the wire. Without a token nothing is proven (JobKey is zero).
// Pure functions, thread-safe.
#ifndef SIEVE_PROTO_REGISTER_PROOF_H_
#define SIEVE_PROTO_REGISTER_PROOF_H_

#include <cstdint>
#include <string_view>

#include "proto/sieve.pb.h"
#include "proto/siphash.h"

namespace sieve {

// The key a job token gives (a SipHash of the token under a fixed key; domain-separated from
// JobDigest); the zero key for the empty token (a job without a token).
SipKey JobKey(std::string_view token);
inline bool IsZero(const SipKey& k) { return k.k0 == 0 && k.k1 == 0; }

// A fresh random key (std::random_device), the scheduler's challenge secret.
SipKey RandomSipKey();

// The challenge a scheduler with `secret` issues for `r` (over its instance, role, host, port).
// Never 0 (0 means "no challenge" in Register.challenge).
uint64_t RegisterChallenge(const SipKey& secret, const pb::Register& r);

// The proof for `r` (every field but `proof`, in a fixed order) under the job's key. Never 0.
uint64_t RegisterProof(const SipKey& job_key, const pb::Register& r);

}  // namespace sieve

#endif  // SIEVE_PROTO_REGISTER_PROOF_H_
