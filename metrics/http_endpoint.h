// HttpEndpoint: a minimal HTTP/1.0 server for GET requests on one thread, enough for Prometheus
// scrapes and Kubernetes probes. Each path maps to a handler returning (status, body); other
// paths get 404, other methods 405. One request per connection (Connection: close); a client
// that sends no full request head within 2 s is dropped. When the process is out of file
// descriptors the endpoint still answers, one request at a time, with a descriptor it holds back
// for that (base/fd_reserve.h): `/healthz` keeps telling the truth at the limit.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose Debian build starts threads with a
// fixed 100 KB stack. glibc carves static TLS out of each thread's stack, and OpenBLAS alone
// takes 60 KB of it, so in sieve-worker civetweb's threads overflowed their stacks at once.
// This server's thread has the default stack.
//
// Thread-safety: handlers run on the endpoint's thread. Start/Stop from one thread.
#ifndef SIEVE_METRICS_HTTP_ENDPOINT_H_
#define SIEVE_METRICS_HTTP_ENDPOINT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "base/fd_reserve.h"
#include "base/status.h"

namespace sieve {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpEndpoint {
 public:
  using Handler = std::function<HttpResponse()>;

  // Binds bind_host:port (IPv4 address or name; port 0 = any free port) and starts serving.
  // Errors: InvalidArgument (bad address), Unavailable (bind/listen failed).
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& bind_host, uint16_t port,
                                                       std::map<std::string, Handler> handlers);
  ~HttpEndpoint();  // stops the thread and closes the socket
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  uint16_t port() const { return port_; }
  // Requests answered with the held-back descriptor because the process was at its open-file
  // limit (any thread).
  uint64_t accepted_at_limit() const { return accepted_at_limit_.load(std::memory_order_relaxed); }

 private:
  HttpEndpoint(int fd, uint16_t port, std::map<std::string, Handler> handlers);
  void Serve();
  void HandleConnection(int fd);

  const int listen_fd_;
  const uint16_t port_;
  const std::map<std::string, Handler> handlers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_at_limit_{0};
  FdReserve reserve_;  // used only by the serving thread
  std::thread thread_;
};

}  // namespace sieve

#endif  // SIEVE_METRICS_HTTP_ENDPOINT_H_
