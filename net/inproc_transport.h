// InprocNetwork: Transports that reach each other inside one process, without sockets, so the
// node runtime, the scheduler and the push/pull client can be driven by unit tests (a test plays a
// server or the scheduler with a bare Transport or Node on the same network).
//
// Semantics, as close to the ZeroMQ transport as tests need: every transport binds a "port" on
// host "inproc" (the requested one, or a fresh one for 0; a taken port fails with Unavailable);
// Connect is asynchronous and never fails (the port is looked up at each Send, so a peer may bind
// later); a Send to a port nobody holds is dropped, as ZeroMQ drops messages to a peer that never
// comes up when the sender closes; queues are unbounded (Send never waits); a message with a frame
// larger than the receiver's max_message_bytes is dropped (ZeroMQ disconnects such a peer).
// Messages between two transports arrive in send order. Each message sent is stamped with the
// sender's TransportOptions::job, as by ZeroMQ's. CURVE options are ignored.
//
// Ownership and thread-safety: the network's state is shared by the factory, which may outlive
// the InprocNetwork object, and by every transport it made; all methods are thread-safe, with
// Transport's own rule that one thread at a time calls Recv.
#ifndef SIEVE_NET_INPROC_TRANSPORT_H_
#define SIEVE_NET_INPROC_TRANSPORT_H_

#include <memory>

#include "net/transport.h"

namespace sieve {

class InprocNetwork {
 public:
  InprocNetwork();

  // A factory for TransportOptions::factory that makes transports on this network.
  TransportFactory factory() const;

  // One transport bound on this network (what factory() calls).
  StatusOr<std::unique_ptr<Transport>> Create(const TransportOptions& options) const;

  // Messages dropped so far: sent to a port nobody held, or with a frame over the receiver's
  // max_message_bytes.
  uint64_t dropped() const;

  struct State;  // the ports and their queues (inproc_transport.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace sieve

#endif  // SIEVE_NET_INPROC_TRANSPORT_H_
