// Message headers, built one way by every process: the type, the sender and the recipient, plus
// the shard and round of the data plane, or an ERROR's body. The payload sub-message (a node
// table, a barrier, ...) is the caller's to fill; proto/codec.h encodes the result.
// Pure functions, thread-safe.
#ifndef SIEVE_PROTO_MESSAGES_H_
#define SIEVE_PROTO_MESSAGES_H_

#include <cstdint>
#include <string>

#include "proto/sieve.pb.h"

namespace sieve {

// A recipient left unset (0 on the wire): broadcasts fill it in per peer.
inline constexpr int kNoRecipient = -1;

// A header of `type` from node `sender` (-1 before registration) to node `recipient`.
pb::Header MakeHeader(pb::MsgType type, int sender, int recipient = kNoRecipient);

// A data-plane header (PUSH, PULL_DENSE, UPDATE, DENSE, JOIN, JOIN_ACK): also the shard (the
// server's rank) and the round.
pb::Header MakeDataHeader(pb::MsgType type, int sender, int recipient, int shard, uint64_t round);

// A REGISTER (sender -1, to the scheduler) of a node of `role` whose receive socket is at
// host:port, asking for `rank` (-1 = any) as process `instance`, declaring D = num_params (0 =
// none), at this build's protocol version.
pb::Header MakeRegisterHeader(pb::Role role, const std::string& host, uint32_t port, int rank,
                              uint64_t instance, uint64_t num_params);

// An ERROR with `code` and `message`, answering a message of type `rejected` for `round`.
pb::Header MakeErrorHeader(int sender, int recipient, uint64_t round, pb::ErrorCode code,
                           const std::string& message, pb::MsgType rejected);

}  // namespace sieve

#endif  // SIEVE_PROTO_MESSAGES_H_
