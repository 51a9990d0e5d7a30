// ZapHandler: the ZeroMQ authentication (ZAP, RFC 27) handler of one ZeroMQ context. It admits a
// CURVE client only if its public key is on the allow-list; everything else is refused (the
// handshake fails, so the peer can send nothing). Counts both outcomes. An admitted connection's
// ZAP User-Id is the client's public key (Z85), which ZeroMQ attaches to every message received
// over it (PeerKey, net/transport.h).
//
// Thread-safety: owns one thread serving inproc://zeromq.zap.01; the counters may be read from
// any thread. Stop() (also the destructor) must run before the context is closed.
#ifndef SIEVE_NET_ZAP_HANDLER_H_
#define SIEVE_NET_ZAP_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/status.h"

namespace sieve {

class ZapHandler {
 public:
  // Binds the handler in `ctx` and starts its thread. Errors: Unavailable (bind failed).
  static StatusOr<std::unique_ptr<ZapHandler>> Start(zmq::context_t& ctx,
                                                     const std::vector<std::string>& allowed_z85);
  ~ZapHandler();
  void Stop();

  uint64_t accepted() const { return accepted_.load(); }
  uint64_t denied() const { return denied_.load(); }

 private:
  ZapHandler(zmq::context_t& ctx, std::set<std::string> allowed);
  void Loop();

  zmq::socket_t socket_;
  std::set<std::string> allowed_;  // Z85 public keys
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> denied_{0};
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_NET_ZAP_HANDLER_H_
