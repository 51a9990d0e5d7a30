#include "net/accept_guard.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>
#include <zmq_addon.hpp>

#include "base/fd_reserve.h"
#include "base/log_limiter.h"

namespace sieve {
namespace {

// One monitor endpoint per context: each transport has its own context.
constexpr char kMonitorEndpoint[] = "inproc://sieve-accept-guard";
constexpr uint64_t kMaxPerEvent = 4096;  // connections closed per failed-accept event
constexpr int kReserve = 16;             // descriptors held back

// The local TCP port of socket `fd` (0 if it is not a bound IPv4/IPv6 socket).
uint16_t LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

}  // namespace

AcceptGuard::AcceptGuard(zmq::context_t& ctx)
    : monitor_(ctx, zmq::socket_type::pair), reserve_(kReserve) {}

StatusOr<std::unique_ptr<AcceptGuard>> AcceptGuard::Start(zmq::context_t& ctx,
                                                          zmq::socket_t& socket) {
  std::unique_ptr<AcceptGuard> guard(new AcceptGuard(ctx));
  if (zmq_socket_monitor(socket.handle(), kMonitorEndpoint,
                         ZMQ_EVENT_LISTENING | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED) != 0) {
    return UnavailableError(std::string("accept guard: monitor: ") + zmq_strerror(zmq_errno()));
  }
  try {
    guard->monitor_.set(zmq::sockopt::linger, 0);
    guard->monitor_.connect(kMonitorEndpoint);
  } catch (const zmq::error_t& e) {
    return UnavailableError(std::string("accept guard: ") + e.what());
  }
  guard->thread_ = std::thread([p = guard.get()] { p->Loop(); });
  return guard;
}

AcceptGuard::~AcceptGuard() { Stop(); }

void AcceptGuard::Stop() {
  if (thread_.joinable()) thread_.join();
  monitor_.close();
}

void AcceptGuard::Loop() {
  // libzmq's I/O thread retries its accept while this thread drains, and now and then takes a
  // freed descriptor first and accepts that connection itself; its ACCEPTED event (below) gets
  // it shut down, so the descriptor comes back at once.
  FdReserve& reserve = reserve_;
  LogLimiter log_limit(1, std::chrono::seconds(10));
  int listen_fd = -1;
  uint16_t listen_port = 0;
  for (;;) {
    std::vector<zmq::message_t> event;
    try {
      // Blocks: an idle daemon's guard never wakes; the context's shutdown ends the wait.
      if (!zmq::recv_multipart(monitor_, std::back_inserter(event))) continue;
    } catch (const zmq::error_t&) {
      return;  // context shut down
    }
    // Event frame: uint16 event id, uint32 value (native byte order); then the endpoint.
    if (event.empty() || event[0].size() < 6) continue;
    uint16_t id = 0;
    uint32_t value = 0;
    std::memcpy(&id, event[0].data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event[0].data()) + 2, sizeof(value));
    if (id == ZMQ_EVENT_LISTENING) {
      listen_fd = static_cast<int>(value);
      // libzmq accepts only when its poller says the listener is readable, and takes EAGAIN
      // in its stride; this thread must never block in accept() when the backlog is empty.
      const int fl = fcntl(listen_fd, F_GETFL);
      if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) listen_fd = -1;
      listen_port = LocalPort(listen_fd);
      continue;
    }
    if (id == ZMQ_EVENT_ACCEPTED) {
      // A connection libzmq accepted while the reserve cannot be made whole: the process is at
      // its limit (or libzmq took a descriptor the guard had freed). Shut it down like the ones
      // the guard accepts itself; libzmq then closes it as a connection its peer ended. The check
      // of the local port keeps this off any descriptor that is no longer that connection (the
      // event is read a little later than it happened): only a connection accepted on this
      // listener has the listener's port, every outgoing one has another.
      const int fd = static_cast<int>(value);
      if (!reserve.Refill() && listen_port != 0 && LocalPort(fd) == listen_port) {
        // Counted first, so whoever sees it closed sees it counted.
        refused_.fetch_add(1, std::memory_order_relaxed);
        ::shutdown(fd, SHUT_RDWR);
      }
      continue;
    }
    if (id != ZMQ_EVENT_ACCEPT_FAILED || !IsFdExhaustion(static_cast<int>(value)) ||
        listen_fd < 0) {
      continue;
    }
    // Drain the backlog: the listener is non-blocking (above), so this ends at EAGAIN (or
    // after a bound, so that a stream of connections cannot keep this thread to itself; the next
    // failed accept brings it back).
    uint64_t closed = 0;
    // Counted before the connection is closed, so whoever sees it closed sees it counted.
    const auto count = [this](int) { refused_.fetch_add(1, std::memory_order_relaxed); };
    while (closed < kMaxPerEvent && reserve.AcceptWith(listen_fd, 0, count)) ++closed;
    uint64_t held_back = 0;
    if (closed > 0 && log_limit.Allow(LogLimiter::Clock::now(), &held_back)) {
      LOG(WARNING) << "out of file descriptors: closed " << closed << " new connection(s) at once ("
                   << refused() << " in all); open connections are kept";
    }
  }
}

}  // namespace sieve
