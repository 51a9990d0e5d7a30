#include "deploy/local/private_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sieve {

StatusOr<std::unique_ptr<PrivateFile>> PrivateFile::Create(const std::string& name,
                                                           const std::string& contents) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sieve-launch-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return UnavailableError("cannot create a private directory " + dir + ": " +
                            std::strerror(errno));
  }
  std::unique_ptr<PrivateFile> file(new PrivateFile(dir, dir + "/" + name));
  const int fd = open(file->path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UnavailableError("cannot create " + file->path_ + ": " + std::strerror(errno));
  }
  const ssize_t n = write(fd, contents.data(), contents.size());
  const int write_errno = errno;
  close(fd);
  if (n != static_cast<ssize_t>(contents.size())) {
    return UnavailableError("cannot write " + file->path_ + ": " + std::strerror(write_errno));
  }
  return file;
}

PrivateFile::~PrivateFile() {
  unlink(path_.c_str());
  rmdir(dir_.c_str());
}

}  // namespace sieve
