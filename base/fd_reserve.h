// FdReserve: one file descriptor held back (open on /dev/null) for the moment this process runs
// out of descriptors. At the open-file limit accept() fails with EMFILE (or ENFILE at the system's
// limit) and the connection stays in the listener's backlog, so the listener stays readable and a
// poll loop around accept() spins at 100 % CPU without ever making progress. AcceptWith frees the
// held descriptor for exactly one accept(), lets the caller use the connection (answer a probe,
// or close it at once), closes it and takes the descriptor back. Used by the HTTP endpoint
// (`/healthz` still answers at the limit) and by the ZeroMQ transport's accept guard (a flood
// of connections at the limit is closed instead of spinning libzmq's I/O thread).
//
// Thread-safety: not thread-safe; each listening thread owns its own reserve. Another thread of
// the process may take the freed slot between the close and the accept; AcceptWith then accepts
// nothing and returns false (the caller retries on the next readiness).
#ifndef SIEVE_BASE_FD_RESERVE_H_
#define SIEVE_BASE_FD_RESERVE_H_

#include <functional>
#include <vector>

namespace sieve {

class FdReserve {
 public:
  // Opens `count` descriptors (fewer if even that fails). More than one matters where other
  // threads of the process accept too: one of them may take a freed slot first (below).
  explicit FdReserve(int count = 1);
  ~FdReserve();  // closes them
  FdReserve(const FdReserve&) = delete;
  FdReserve& operator=(const FdReserve&) = delete;

  // Descriptors held now (AcceptWith re-opens the ones lost to other threads when it can).
  int held() const { return static_cast<int>(fds_.size()); }

  // Takes one pending connection off `listen_fd` with a held descriptor: closes it,
  // accept4(listen_fd, flags | SOCK_CLOEXEC), passes the new connection to `use` (which must not
  // keep or close it), closes the connection and re-opens the descriptor. Returns true when a
  // connection was accepted; false when none was held (after trying to re-open them), the
  // backlog was empty (EAGAIN on a non-blocking listener; a blocking one would wait) or the
  // accept failed, e.g. because another thread took the freed slot first (that descriptor is
  // then lost until one is free again).
  bool AcceptWith(int listen_fd, int flags, const std::function<void(int fd)>& use);

  // Re-opens the descriptors lost to other threads where it can. Returns whether all `count` are
  // held: false means the process has fewer free descriptors than the reserve wants.
  bool Refill();

  const int count_;
  std::vector<int> fds_;
};

// True for accept() errors that mean "out of descriptors" (EMFILE, ENFILE), for which a
// listener needs its FdReserve.
bool IsFdExhaustion(int err);

}  // namespace sieve

#endif  // SIEVE_BASE_FD_RESERVE_H_
