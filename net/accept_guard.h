// AcceptGuard: keeps a ZeroMQ socket's TCP listener from spinning when this process is out of
// file descriptors. libzmq accepts a connection when the listener is readable; at the open-file
// limit accept() fails with EMFILE, libzmq reports ZMQ_EVENT_ACCEPT_FAILED and returns, the
// connection stays in the backlog and the listener stays readable, so libzmq's I/O thread loops
// at 100 % CPU until a descriptor frees up. The guard watches the socket's monitor events and,
// on an accept that failed for lack of descriptors, takes the pending connections off the
// backlog itself with descriptors it holds back (base/fd_reserve.h) and closes them at once:
// the peer sees its connection closed (and reconnects later, as ZeroMQ peers do), the listener
// goes quiet, and the connections already open are not touched. Connections refused this way
// are counted (refused()). Now and then libzmq's thread, still retrying, takes a descriptor the
// guard freed and accepts the connection itself; every connection libzmq accepts while the
// guard cannot hold its full reserve is shut down as soon as its ACCEPTED event arrives, so those
// descriptors come back at once too (only a socket whose local port is the listener's is ever
// touched).
//
// Thread-safety: owns one thread, blocked on the monitor socket until an event comes (an idle
// daemon's guard never wakes); refused() may be read from any thread. Create it before the socket
// binds (the listener's descriptor comes with the LISTENING event) and while descriptors are
// still free: Start() opens the reserve. Stop() (also the destructor) only after the context was
// shut down (zmq::context_t::shutdown), which ends the thread's wait.
#ifndef SIEVE_NET_ACCEPT_GUARD_H_
#define SIEVE_NET_ACCEPT_GUARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <zmq.hpp>

#include "base/fd_reserve.h"
#include "base/status.h"

namespace sieve {

class AcceptGuard {
 public:
  // Starts monitoring `socket` (which must not be bound yet) of `ctx`. Errors: Unavailable when
  // the monitor cannot be set up.
  static StatusOr<std::unique_ptr<AcceptGuard>> Start(zmq::context_t& ctx, zmq::socket_t& socket);
  ~AcceptGuard();
  void Stop();

  // Connections closed at once because the process was out of descriptors.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  explicit AcceptGuard(zmq::context_t& ctx);
  void Loop();

  zmq::socket_t monitor_;  // PAIR connected to the monitored socket's event stream
  // The descriptors held back, opened when Start() constructs the guard (the caller's thread),
  // before the socket binds and before anything can exhaust the process: opened by the guard's own
  // thread instead, a thread scheduled late (a loaded machine) found the process already at its
  // limit, held nothing, and left every connection in the backlog. Used by the guard's thread only.
  FdReserve reserve_;
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_NET_ACCEPT_GUARD_H_
