#include "base/fd_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace sieve {

StatusOr<uint64_t> RaiseFdLimit(uint64_t cap) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return InternalError(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  const rlim_t target = limit.rlim_max == RLIM_INFINITY
                            ? static_cast<rlim_t>(cap)
                            : std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(cap));
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return InternalError(std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace sieve
