#include "proto/messages.h"

#include "proto/codec.h"  // kProtocolVersion

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

pb::Header MakeRegisterHeader(pb::Role role, const std::string& host, uint32_t port, int rank,
                              uint64_t instance, uint64_t num_params) {
  pb::Header h = MakeHeader(pb::MSG_REGISTER, -1, kSchedulerId);
  pb::Register* r = h.mutable_register_();
  r->set_role(role);
  r->set_host(host);
  r->set_port(port);
  r->set_protocol_version(kProtocolVersion);
  r->set_rank(rank);
  r->set_instance(instance);
  r->set_num_params(num_params);
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
