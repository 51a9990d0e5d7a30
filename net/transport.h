// Transport: how a node moves multipart messages, seen through a narrow interface so that the
// node runtime, scheduler, server and worker never touch sockets. Each node binds exactly one
// receive endpoint and opens one outgoing connection per peer it talks to (ZeroMQ PULL/PUSH).
//
// Thread-safety: Send, Connect and Disconnect may be called from any thread (each peer's socket
// has its own lock); Recv must only be called from one thread at a time (the node's I/O thread).
#ifndef SIEVE_NET_TRANSPORT_H_
#define SIEVE_NET_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/duration.h"
#include "base/status.h"
#include "net/curve.h"
#include "proto/codec.h"

namespace sieve {

class Transport;
struct TransportOptions;

// Makes a node's transport from its options (see CreateTransport).
using TransportFactory =
    std::function<StatusOr<std::unique_ptr<Transport>>(const TransportOptions&)>;

struct TransportOptions {
  std::string bind_host = "0.0.0.0";  // interface to bind the receive socket on
  uint16_t port = 0;                  // 0 = pick a free port (reported by port())
  std::string advertise_host;         // what peers connect to; empty = detect (see DetectHost)
  std::chrono::milliseconds send_timeout{30000};  // a send that cannot be queued within this fails
  int send_hwm = 1000;                            // messages queued per peer before Send waits
  // A connection that has not completed its ZeroMQ (and CURVE) handshake within this is closed,
  // so a peer that opens connections and sends nothing cannot hold them (and their file
  // descriptors) open; 0 = never (libzmq's default is 30 s).
  std::chrono::milliseconds handshake_timeout{10000};
  // A connection to the receive socket that completed its handshake but whose peer then answers
  // no ZeroMQ heartbeat (ZMTP PING, sent every quarter of this) for this long is closed, so a peer
  // that goes silent cannot hold a connection open; 0 = never. A live sieve node answers PINGs
  // from libzmq's I/O thread whatever its own threads are doing, so only a frozen or vanished
  // peer is cut (its sender reconnects by itself when it comes back).
  std::chrono::milliseconds idle_timeout{60000};
  // The largest message frame the receive socket accepts (0 = no limit); a peer sending a larger
  // one is disconnected by ZeroMQ before the frame is buffered. Size it from D: a dense shard is
  // the largest frame a job sends (MaxFrameBytes).
  int64_t max_message_bytes = 0;
  // CurveZMQ on every socket (docs/security.md): the receive socket is a CURVE server admitting
  // only allow-listed client keys; every outgoing socket a CURVE client.
  CurveOptions curve;
  // The job identity (proto/job_identity.h, JobDigest of the job token; 0 = no token): stamped
  // into the header of every message this transport sends (StampJob). Receivers compare it with
  // their own when they decode (DecodeLimits::job); the transport itself filters nothing.
  uint64_t job = 0;
  // Empty: ZeroMQ (CreateZmqTransport). Tests plug in an in-process network here
  // (net/inproc_transport.h) to drive nodes, the scheduler and the client without sockets.
  TransportFactory factory;
};

// A max_message_bytes for a job of D parameters: 4·D bytes (a dense frame of the whole vector)
// plus 1 MiB for headers and node tables.
inline int64_t MaxFrameBytes(uint64_t num_params) {
  return static_cast<int64_t>(4 * num_params) + (int64_t{1} << 20);
}

class Transport {
 public:
  virtual ~Transport() = default;

  // The address peers use to reach this node's receive socket.
  virtual const std::string& host() const = 0;
  virtual uint16_t port() const = 0;

  // Opens (or re-opens, replacing the old connection) the outgoing connection to `peer`.
  // Asynchronous: succeeds before the peer is up; messages queue until it is.
  virtual Status Connect(int peer, const std::string& host, uint16_t port) = 0;
  virtual void Disconnect(int peer) = 0;

  // Queues `frames` to `peer`, stamped with options.job. Errors: NotFound (never connected),
  // DeadlineExceeded (queue full for send_timeout), Unavailable (transport closed). Frames are
  // consumed either way.
  virtual Status Send(int peer, Frames frames) = 0;
  // The same without waiting for queue space: when the peer's queue is full (or another sender
  // on the connection waits for space) the message is dropped at once with Unavailable; a send
  // in progress that is only handing its frames over is waited for (up to 250 ms, then dropped).
  // For replies the I/O thread sends to peers it does not trust to read (ERRORs): a full queue
  // must never stall it, and an ERROR must not be lost to a reply sent at the same moment.
  virtual Status TrySend(int peer, Frames frames) = 0;

  // Waits up to `timeout` (kForever, base/duration.h: no deadline) for the next message. Returns
  // true with *frames filled, false on timeout, or Aborted once Close() was called.
  virtual StatusOr<bool> Recv(Frames* frames, std::chrono::milliseconds timeout) = 0;

  // From now on stamps `job` instead of options.job (a node that learned its job instance from
  // the node table: proto/job_identity.h). Thread-safe; sends in flight get either.
  virtual void SetJob(uint64_t job) = 0;

  // Stops the transport: pending and future Recv/Send fail with Aborted/Unavailable.
  virtual void Close() = 0;

  // CURVE handshakes of peers admitted / refused by the allow-list (0 without CURVE).
  virtual uint64_t auth_accepted() const { return 0; }
  virtual uint64_t auth_denied() const { return 0; }
  // Connections closed at once because the process was out of file descriptors
  // (net/accept_guard.h); 0 for transports without sockets.
  virtual uint64_t refused_at_fd_limit() const { return 0; }
};

// The client public key (Z85) CurveZMQ authenticated for the connection `frames` arrived over:
// the ZAP User-Id ZeroMQ attaches to each received message. Empty without CURVE, for frames not
// received from a socket (copies, the in-process transport) and for an empty message.
std::string PeerKey(const Frames& frames);

// Creates the ZeroMQ implementation and binds its receive socket. Errors: Unavailable with the
// address when the bind fails (e.g. port already in use), InvalidArgument for a bad host.
StatusOr<std::unique_ptr<Transport>> CreateZmqTransport(const TransportOptions& options);

// options.factory(options) when a factory is set, else CreateZmqTransport(options): what the node
// runtime and the scheduler call.
StatusOr<std::unique_ptr<Transport>> CreateTransport(const TransportOptions& options);

}  // namespace sieve

#endif  // SIEVE_NET_TRANSPORT_H_
