#include "proto/messages.h"

namespace sieve {

pb::Header MakeHeader(pb::MsgType type, int sender, int recipient) {
  pb::Header h;
  h.set_type(type);
  h.set_sender(sender);
  if (recipient != kNoRecipient) h.set_recipient(recipient);
  return h;
}

pb::Header MakeDataHeader(pb::MsgType type, int sender, int recipient, int shard, uint64_t round) {
  pb::Header h = MakeHeader(type, sender, recipient);
  h.set_shard(shard);
  h.set_round(round);
  return h;
}

pb::Header MakeErrorHeader(int sender, int recipient, uint64_t round, pb::ErrorCode code,
                           const std::string& message, pb::MsgType rejected) {
  pb::Header h = MakeHeader(pb::MSG_ERROR, sender, recipient);
  h.set_round(round);
  h.mutable_error()->set_code(code);
  h.mutable_error()->set_message(message);
  h.mutable_error()->set_rejected_type(rejected);
  return h;
}

}  // namespace sieve
