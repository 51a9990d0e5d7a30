// SipHash-2-4 against the paper's test vectors, and the registration proof's coverage: every
// field of a REGISTER, and the key, change the proof; the challenge depends on the secret.
#include "proto/register_proof.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "proto/siphash.h"

namespace sieve {
namespace {

TEST(SipHashTest, PaperTestVectors) {
  // Key 00 01 .. 0f; messages of 0 and of 15 bytes 00 01 .. 0e (Aumasson & Bernstein, appendix A,
  // and the reference implementation's first vector).
  const SipKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  EXPECT_EQ(SipHash24(key, ""), 0x726fdb47dd0e0e31ull);
  std::string m;
  for (int i = 0; i < 15; ++i) m.push_back(static_cast<char>(i));
  EXPECT_EQ(SipHash24(key, m), 0xa129ca6149be45e5ull);
  // Every length from 0 to 64 differs from its neighbours (the length byte and tail handling).
  std::string prev_m;
  uint64_t prev = SipHash24(key, prev_m);
  for (int n = 1; n <= 64; ++n) {
    std::string cur(static_cast<size_t>(n), '\0');
    const uint64_t h = SipHash24(key, cur);
    EXPECT_NE(h, prev) << n;
    prev = h;
  }
}

pb::Register Sample() {
  pb::Register r;
  r.set_role(pb::ROLE_WORKER);
  r.set_host("10.0.0.7");
  r.set_port(9400);
  r.set_protocol_version(7);
  r.set_rank(3);
  r.set_instance(0x1234567890abcdefull);
  r.set_num_params(1000);
  r.set_challenge(0x5555aaaa5555aaaaull);
  return r;
}

TEST(RegisterProofTest, EveryFieldAndTheKeyChangeTheProof) {
  const SipKey key = JobKey("token");
  const uint64_t base = RegisterProof(key, Sample());
  EXPECT_NE(base, 0u);
  EXPECT_EQ(RegisterProof(key, Sample()), base);
  EXPECT_NE(RegisterProof(JobKey("token2"), Sample()), base);
  const std::vector<std::function<void(pb::Register*)>> changes = {
      [](pb::Register* r) { r->set_role(pb::ROLE_SERVER); },
      [](pb::Register* r) { r->set_host("10.0.0.8"); },
      [](pb::Register* r) { r->set_port(9401); },
      [](pb::Register* r) { r->set_protocol_version(6); },
      [](pb::Register* r) { r->set_rank(-1); },
      [](pb::Register* r) { r->set_instance(1); },
      [](pb::Register* r) { r->set_num_params(1001); },
      [](pb::Register* r) { r->set_challenge(1); },
      [](pb::Register* r) { r->set_rebuildable(true); },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    pb::Register r = Sample();
    changes[i](&r);
    EXPECT_NE(RegisterProof(key, r), base) << "change " << i;
  }
  // The proof field itself is not covered (it holds the proof).
  pb::Register r = Sample();
  r.set_proof(99);
  EXPECT_EQ(RegisterProof(key, r), base);
}

TEST(RegisterProofTest, KeysAndChallenges) {
  EXPECT_TRUE(IsZero(JobKey("")));
  EXPECT_FALSE(IsZero(JobKey("t")));
  EXPECT_NE(JobKey("t"), JobKey("u"));
  const SipKey a = RandomSipKey(), b = RandomSipKey();
  EXPECT_NE(a, b);
  pb::Register r = Sample();
  EXPECT_NE(RegisterChallenge(a, r), RegisterChallenge(b, r));
  EXPECT_EQ(RegisterChallenge(a, r), RegisterChallenge(a, r));
  const uint64_t c = RegisterChallenge(a, r);
  r.set_rank(0);  // the challenge binds instance, role and address only
  EXPECT_EQ(RegisterChallenge(a, r), c);
  r.set_port(1);
  EXPECT_NE(RegisterChallenge(a, r), c);
}

}  // namespace
}  // namespace sieve
