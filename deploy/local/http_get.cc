#include "deploy/local/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sieve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxResponse = 16u << 20;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status Await(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) return DeadlineExceededError(what + ": no answer in time");
    if (errno != EINTR) return UnavailableError(what + ": " + std::strerror(errno));
  }
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                              std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return InvalidArgumentError("'" + host_port + "' is not HOST:PORT");
  }
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  const std::string what = "http://" + host_port + path;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return UnavailableError(what + ": cannot resolve: " + gai_strerror(rc));
  }
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = fd.get() < 0 ? -1 : connect(fd.get(), found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  freeaddrinfo(found);
  if (fd.get() < 0) return UnavailableError(what + ": " + std::strerror(connect_errno));
  if (rc != 0 && connect_errno != EINPROGRESS) {
    return UnavailableError(what + ": " + std::strerror(connect_errno));
  }
  if (rc != 0) {
    SIEVE_RETURN_IF_ERROR(Await(fd.get(), POLLOUT, deadline, what));
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return UnavailableError(what + ": " + std::strerror(err));
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host_port + "\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    SIEVE_RETURN_IF_ERROR(Await(fd.get(), POLLOUT, deadline, what));
    const ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return UnavailableError(what + ": " + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[65536];
  for (;;) {
    SIEVE_RETURN_IF_ERROR(Await(fd.get(), POLLIN, deadline, what));
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return UnavailableError(what + ": " + std::strerror(errno));
    if (n == 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.size() > kMaxResponse) return DataLossError(what + ": answer over 16 MiB");
  }
  const size_t head_end = response.find("\r\n\r\n");
  if (!response.starts_with("HTTP/") || head_end == std::string::npos) {
    return DataLossError(what + ": not an HTTP answer");
  }
  const std::string status_line = response.substr(0, response.find("\r\n"));
  const size_t space = status_line.find(' ');
  if (space == std::string::npos || status_line.compare(space + 1, 3, "200") != 0) {
    return FailedPreconditionError(what + ": " + status_line);
  }
  return response.substr(head_end + 4);
}

}  // namespace sieve
