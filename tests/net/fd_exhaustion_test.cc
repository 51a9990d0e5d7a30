// A daemon at its open-file limit: new connections to its ZeroMQ receive socket are closed at
// once instead of spinning libzmq's I/O thread (net/accept_guard.h), the connections it already
// has keep working, and its HTTP endpoint still answers /healthz (base/fd_reserve.h). Each test
// lowers this process's soft limit and fills every free descriptor, then puts both back.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "metrics/http_endpoint.h"
#include "net/transport.h"

namespace sieve {
namespace {

// Bounds a wait for the process under test; a loaded machine stays well within.
constexpr std::chrono::milliseconds kWait{20000};

// While alive, this process has no free file descriptor: the soft limit is lowered to just
// above the descriptors in use and the rest are opened on /dev/null.
class FdExhaustion {
 public:
  FdExhaustion() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (fcntl(fd, F_GETFD) != -1) highest = fd;
    }
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(highest + 64);
    setrlimit(RLIMIT_NOFILE, &low);
    for (;;) {
      const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        exhausted_ = errno == EMFILE;
        break;
      }
      filler_.push_back(fd);
    }
  }
  ~FdExhaustion() {
    for (int fd : filler_) close(fd);
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool exhausted() const { return exhausted_; }

 private:
  rlimit saved_{};
  std::vector<int> filler_;
  bool exhausted_ = false;
};

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// `n` TCP sockets, opened before the descriptors run out (so that they can connect after).
std::vector<int> OpenSockets(int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) fds.push_back(socket(AF_INET, SOCK_STREAM, 0));
  return fds;
}

bool ConnectTo(int fd, uint16_t port) {
  const sockaddr_in addr = Loopback(port);
  return connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

// Whether the peer closed `fd` within kWait (end of stream or reset), reading past any data.
bool ClosedByPeer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Over one second the process uses less than half a core: a listener retrying a failed accept
// burns a whole one.
void ExpectNoBusyLoop() {
  const double cpu_before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_LT(ProcessCpuSeconds() - cpu_before, 0.5) << "busy loop at the fd limit";
}

TEST(FdExhaustion, NewZeroMqConnectionsAreClosedAndTheListenerDoesNotSpin) {
  TransportOptions options;
  options.bind_host = "127.0.0.1";
  auto receiver = CreateZmqTransport(options);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  const uint16_t port = (*receiver)->port();

  constexpr int kClients = 64;  // more than the guard holds in reserve
  const std::vector<int> clients = OpenSockets(kClients);
  {
    FdExhaustion full;
    ASSERT_TRUE(full.exhausted());
    // The kernel completes these from the listener's backlog; libzmq cannot accept them.
    for (int fd : clients) ASSERT_TRUE(ConnectTo(fd, port)) << strerror(errno);
    for (int fd : clients) EXPECT_TRUE(ClosedByPeer(fd)) << "a connection was left pending";
    // Every one was the guard's to close: taken off the backlog by it, or accepted by libzmq's
    // own retry with a descriptor the guard had freed and then shut down by it. Without the
    // guard none is closed: they wait in the backlog.
    EXPECT_EQ((*receiver)->refused_at_fd_limit(), static_cast<uint64_t>(kClients));
    // Still at the limit, with nothing pending: the process sleeps.
    ExpectNoBusyLoop();
  }
  for (int fd : clients) close(fd);

  // Descriptors are free again: an honest peer connects and its message arrives.
  TransportOptions sender_options;
  sender_options.bind_host = "127.0.0.1";
  auto sender = CreateZmqTransport(sender_options);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  ASSERT_TRUE((*sender)->Connect(1, "127.0.0.1", port).ok());
  Frames frames;
  frames.emplace_back(std::string("after the limit"));
  ASSERT_TRUE((*sender)->Send(1, std::move(frames)).ok());
  Frames got;
  auto r = (*receiver)->Recv(&got, kWait);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(*r);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to_string(), "after the limit");
}

TEST(FdExhaustion, HealthzAnswersAtTheLimit) {
  auto endpoint =
      HttpEndpoint::Start("127.0.0.1", 0, {{"/healthz", [] {
                                              return HttpResponse{200, "text/plain", "ok\n"};
                                            }}});
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  const uint16_t port = (*endpoint)->port();
  constexpr int kProbes = 3;  // the reserve is taken back after each
  const std::vector<int> probes = OpenSockets(kProbes);
  {
    FdExhaustion full;
    ASSERT_TRUE(full.exhausted());
    for (int fd : probes) {
      ASSERT_TRUE(ConnectTo(fd, port)) << strerror(errno);
      const std::string request = "GET /healthz HTTP/1.0\r\n\r\n";
      ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(request.size()));
      std::string response;
      const auto deadline = std::chrono::steady_clock::now() + kWait;
      while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        char buf[512];
        const ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        response.append(buf, static_cast<size_t>(n));
      }
      EXPECT_EQ(response.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << response;
      EXPECT_NE(response.find("\r\n\r\nok\n"), std::string::npos) << response;
    }
    ExpectNoBusyLoop();
  }
  for (int fd : probes) close(fd);
  EXPECT_EQ((*endpoint)->accepted_at_limit(), static_cast<uint64_t>(kProbes));
}

}  // namespace
}  // namespace sieve
