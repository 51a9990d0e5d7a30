#include "metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "base/fd_reserve.h"

namespace sieve {
namespace {

constexpr int kPollMs = 100;               // how often the accept loop checks for Stop
constexpr int kRequestTimeoutMs = 2000;    // a client must send its request head within this
constexpr size_t kMaxRequestBytes = 8192;  // request head limit

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; nothing to do
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& bind_host, uint16_t port, std::map<std::string, Handler> handlers) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      ::getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return InvalidArgumentError("metrics: bad bind address '" + bind_host +
                                "': " + gai_strerror(rc));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return UnavailableError(std::string("metrics: socket: ") + std::strerror(errno));
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const std::string where = bind_host + ":" + service;
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::freeaddrinfo(res);
    ::close(fd);
    return UnavailableError("metrics: cannot listen on " + where + ": " + std::strerror(err));
  }
  ::freeaddrinfo(res);
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return std::unique_ptr<HttpEndpoint>(
      new HttpEndpoint(fd, ntohs(bound.sin_port), std::move(handlers)));
}

HttpEndpoint::HttpEndpoint(int fd, uint16_t port, std::map<std::string, Handler> handlers)
    : listen_fd_(fd), port_(port), handlers_(std::move(handlers)) {
  thread_ = std::thread([this] { Serve(); });
}

HttpEndpoint::~HttpEndpoint() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

void HttpEndpoint::Serve() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (ready <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      HandleConnection(fd);
      ::close(fd);
      continue;
    }
    if (!IsFdExhaustion(errno)) continue;  // e.g. the client gave up (ECONNABORTED)
    // Out of descriptors: answer this one request with the reserve, so that probes still see
    // the daemon; without a reserve, wait instead of spinning on a listener that stays readable.
    const bool served = reserve_.AcceptWith(listen_fd_, 0, [this](int conn) {
      accepted_at_limit_.fetch_add(1, std::memory_order_relaxed);
      HandleConnection(conn);
    });
    if (!served) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    }
  }
}

void HttpEndpoint::HandleConnection(int fd) {
  // Read the request head (up to the blank line), bounded in size and time.
  std::string head;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs);
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || head.size() > kMaxRequestBytes || stop_.load()) return;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return;
    char buf[1024];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }

  HttpResponse response;
  const std::string_view line(head.data(), head.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) {
    response = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else {
    const std::string_view method = line.substr(0, sp1);
    std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (const size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
    const auto it = handlers_.find(std::string(path));
    if (method != "GET" && method != "HEAD") {
      response = {405, "text/plain; charset=utf-8", "only GET\n"};
    } else if (it == handlers_.end()) {
      response = {404, "text/plain; charset=utf-8", "not found\n"};
    } else {
      response = it->second();
    }
    if (method == "HEAD") response.body.clear();
  }
  std::string out = "HTTP/1.0 " + std::to_string(response.status) + " " + Reason(response.status) +
                    "\r\nContent-Type: " + response.content_type +
                    "\r\nContent-Length: " + std::to_string(response.body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  SendAll(fd, out);
  SendAll(fd, response.body);
}

}  // namespace sieve
