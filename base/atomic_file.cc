#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sieve {
namespace {

Status Failed(const char* step, const std::string& path) {
  return UnavailableError(std::string(step) + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("cannot open", tmp);
  Status s;
  for (size_t done = 0; done < content.size() && s.ok();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      s = Failed("cannot write", tmp);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && s.ok()) s = Failed("cannot close", tmp);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) s = Failed("cannot rename to", path);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace sieve
