#include "deploy/local/private_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace sieve {

StatusOr<std::unique_ptr<PrivateDir>> PrivateDir::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sieve-launch-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return UnavailableError("cannot create a private directory " + dir + ": " +
                            std::strerror(errno));
  }
  return std::unique_ptr<PrivateDir>(new PrivateDir(dir));
}

StatusOr<std::string> PrivateDir::Write(const std::string& name, const std::string& contents) {
  const std::string path = Path(name);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError("cannot create " + path + ": " + std::strerror(errno));
  const ssize_t n = write(fd, contents.data(), contents.size());
  const int write_errno = errno;
  close(fd);
  if (n != static_cast<ssize_t>(contents.size())) {
    return UnavailableError("cannot write " + path + ": " + std::strerror(write_errno));
  }
  return path;
}

PrivateDir::~PrivateDir() {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  for (const std::string& name : names) unlink(Path(name).c_str());
  rmdir(dir_.c_str());
}

}  // namespace sieve
