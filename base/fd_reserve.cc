#include "base/fd_reserve.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace sieve {

FdReserve::FdReserve(int count) : count_(count) { Refill(); }

FdReserve::~FdReserve() {
  for (int fd : fds_) ::close(fd);
}

bool FdReserve::Refill() {
  while (static_cast<int>(fds_.size()) < count_) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    fds_.push_back(fd);
  }
  return true;
}

bool FdReserve::AcceptWith(int listen_fd, int flags, const std::function<void(int fd)>& use) {
  Refill();
  if (fds_.empty()) return false;
  ::close(fds_.back());
  fds_.pop_back();
  const int conn = ::accept4(listen_fd, nullptr, nullptr, flags | SOCK_CLOEXEC);
  if (conn >= 0) {
    use(conn);
    ::close(conn);
  }
  Refill();
  return conn >= 0;
}

bool IsFdExhaustion(int err) { return err == EMFILE || err == ENFILE; }

}  // namespace sieve
