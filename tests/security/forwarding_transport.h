// Test helper: a Transport that hands every call to another one, for wrappers that watch what a
// node sends or receives (a recorder, a sniffer) and override only those calls. Owns `inner`.
// Thread-safety: as the inner transport's.
#ifndef SIEVE_TESTS_SECURITY_FORWARDING_TRANSPORT_H_
#define SIEVE_TESTS_SECURITY_FORWARDING_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "net/transport.h"

namespace sieve::testing {

class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  const std::string& host() const override { return inner_->host(); }
  uint16_t port() const override { return inner_->port(); }
  Status Connect(int peer, const std::string& host, uint16_t port) override {
    return inner_->Connect(peer, host, port);
  }
  void Disconnect(int peer) override { inner_->Disconnect(peer); }
  Status Send(int peer, Frames frames) override {
    OnSend(frames);
    return inner_->Send(peer, std::move(frames));
  }
  Status TrySend(int peer, Frames frames) override {
    OnSend(frames);
    return inner_->TrySend(peer, std::move(frames));
  }
  StatusOr<bool> Recv(Frames* frames, std::chrono::milliseconds timeout) override {
    return inner_->Recv(frames, timeout);
  }
  void SetJob(uint64_t job) override { inner_->SetJob(job); }
  void Close() override { inner_->Close(); }

 protected:
  // Sees each message sent (Send and TrySend) before the inner transport stamps and sends it.
  virtual void OnSend(const Frames& /*frames*/) {}
  Transport& inner() { return *inner_; }

 private:
  std::unique_ptr<Transport> inner_;
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_SECURITY_FORWARDING_TRANSPORT_H_
