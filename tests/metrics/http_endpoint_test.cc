// HttpEndpoint and DaemonMetrics in one process: status codes, the text the probes and Prometheus
// read, a client that never sends its request, and metrics switched off by port 0.
#include "metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "metrics/daemon_metrics.h"

namespace sieve {
namespace {

// Reads may wait this long for the server; it only bounds a hang (a loaded machine stays within).
constexpr timeval kReadDeadline{60, 0};

// Sends `request` to 127.0.0.1:port and returns the whole response ("" if no connection).
std::string Fetch(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &kReadDeadline, sizeof(kReadDeadline));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string Get(uint16_t port, const std::string& path) {
  return Fetch(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

TEST(HttpEndpoint, StatusCodes) {
  auto ep = HttpEndpoint::Start("127.0.0.1", 0, {{"/a", [] {
                                                    HttpResponse r;
                                                    r.body = "hello\n";
                                                    return r;
                                                  }}});
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  const uint16_t port = (*ep)->port();
  ASSERT_NE(port, 0);
  const std::string ok = Get(port, "/a?x=1");
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Length: 6\r\n"), std::string::npos);
  EXPECT_EQ(ok.substr(ok.size() - 6), "hello\n");
  EXPECT_EQ(Get(port, "/b").rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(Fetch(port, "POST /a HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 405", 0), 0u);
  EXPECT_EQ(Fetch(port, "garbage\r\n\r\n").rfind("HTTP/1.0 400", 0), 0u);
}

TEST(HttpEndpoint, SilentClientIsDroppedAndOthersAreServed) {
  auto ep = HttpEndpoint::Start("127.0.0.1", 0, {{"/a", [] { return HttpResponse{}; }}});
  ASSERT_TRUE(ep.ok());
  const uint16_t port = (*ep)->port();
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // One thread serves connections in turn: the request behind the silent client is answered
  // only because the endpoint drops the silent one (after 2 s; no wall-clock bound here).
  EXPECT_EQ(Get(port, "/a").rfind("HTTP/1.0 200", 0), 0u);
  // Dropped: the server closed the silent connection without a reply.
  ::setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &kReadDeadline, sizeof(kReadDeadline));
  char byte;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0) << "the silent client's connection is still open";
  ::close(silent);
}

TEST(HttpEndpoint, BindErrors) {
  auto first = HttpEndpoint::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(first.ok());
  auto second = HttpEndpoint::Start("127.0.0.1", (*first)->port(), {});
  EXPECT_FALSE(second.ok());
  EXPECT_FALSE(HttpEndpoint::Start("not an address", 0, {}).ok());
}

TEST(DaemonMetrics, PortZeroIsOff) {
  auto m = DaemonMetrics::Start({"worker", "127.0.0.1", 0});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE((*m)->enabled());
  (*m)->AddRounds(3);  // no-ops
  (*m)->SetDeadNodesSource([] { return 1.0; });
  EXPECT_FALSE(DaemonMetrics::Start({"worker", "127.0.0.1", 70000}).ok());
}

TEST(DaemonMetrics, SeriesAndHealth) {
  // A free port: bind one, release it, hand it to the metrics server.
  uint16_t port;
  {
    auto probe = HttpEndpoint::Start("127.0.0.1", 0, {});
    ASSERT_TRUE(probe.ok());
    port = (*probe)->port();
  }
  auto m = DaemonMetrics::Start({"server", "127.0.0.1", port});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  DaemonMetrics& d = **m;
  d.SetRank(3);
  d.SetRoundsTotal(5);
  d.SetRoundsTotal(4);  // lower totals are ignored
  d.AddBytes(100, 40);
  d.ObservePushLatency(0.0002);
  d.ObserveUpdateLatency(20.0);
  d.SetStaleness(2);
  double dead = 1;
  {
    ScopedDeadNodesSource source(&d, [&dead] { return dead; });
    EXPECT_NE(Get(port, "/metrics").find("sieve_dead_nodes{role=\"server\"} 1"), std::string::npos);
    dead = 2;
    EXPECT_NE(Get(port, "/metrics").find("sieve_dead_nodes{role=\"server\"} 2"), std::string::npos);
  }
  dead = 7;  // the source is gone: the last value read stays
  const std::string text = Get(port, "/metrics");
  EXPECT_NE(text.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(text.find("sieve_dead_nodes{role=\"server\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("sieve_info{rank=\"3\",role=\"server\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("sieve_rounds_total{role=\"server\"} 5"), std::string::npos);
  EXPECT_NE(text.find("sieve_bytes_received_total{role=\"server\"} 100"), std::string::npos);
  EXPECT_NE(text.find("sieve_bytes_sent_total{role=\"server\"} 40"), std::string::npos);
  EXPECT_NE(text.find("sieve_push_latency_seconds_bucket{role=\"server\",le=\"0.00025\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sieve_update_latency_seconds_bucket{role=\"server\",le=\"10\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("sieve_update_latency_seconds_count{role=\"server\"} 1"), std::string::npos);
  EXPECT_NE(text.find("sieve_staleness_max{role=\"server\"} 2"), std::string::npos);
  const std::string health = Get(port, "/healthz");
  EXPECT_EQ(health.rfind("HTTP/1.0 200", 0), 0u);
  EXPECT_NE(health.find("sieve_healthy{role=\"server\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace sieve
