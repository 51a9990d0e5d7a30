// A TCP port for a test daemon's --port: free a moment ago (bound to port 0 on loopback, then
// released). Pure function of the machine's state; thread-safe.
#ifndef SIEVE_TESTS_SECURITY_FREE_PORT_H_
#define SIEVE_TESTS_SECURITY_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sieve::testing {

// 0 when no port could be had.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_SECURITY_FREE_PORT_H_
