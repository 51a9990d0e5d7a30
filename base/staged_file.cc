#include "base/staged_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sieve {
namespace {

Status SystemError(const std::string& what, const std::string& path, int err) {
  return UnavailableError("cannot " + what + " " + path + ": " + std::strerror(err));
}

}  // namespace

StatusOr<std::unique_ptr<StagedFile>> StagedFile::Create(const std::string& path) {
  const std::string temp = path + ".tmp";
  // Not O_TRUNC: a file another process is writing must not be emptied before the lock says so.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return SystemError("create", temp, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPreconditionError(temp +
                                     " is being written by another process (or writer) already: "
                                     "give each one its own file");
    }
    return SystemError("lock", temp, err);
  }
  if (::ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    return SystemError("empty", temp, err);
  }
  return std::unique_ptr<StagedFile>(new StagedFile(path, temp, fd));
}

StagedFile::StagedFile(std::string path, std::string temp_path, int fd)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

StagedFile::~StagedFile() { Discard(); }

void StagedFile::Discard() {
  if (fd_ < 0) return;
  ::unlink(temp_path_.c_str());  // while locked: no other writer owns the name yet
  ::close(fd_);
  fd_ = -1;
}

Status StagedFile::Append(std::string_view data) {
  if (fd_ < 0) return FailedPreconditionError(temp_path_ + " is closed");
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      Discard();
      return SystemError("write", temp_path_, err);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status StagedFile::Commit() {
  if (fd_ < 0) return FailedPreconditionError(temp_path_ + " is closed");
  // Renamed while the lock is held, so no other writer can have taken PATH.tmp over meanwhile.
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    Discard();
    return SystemError("rename " + temp_path_ + " to", path_, err);
  }
  ::close(fd_);
  fd_ = -1;
  return Status::Ok();
}

}  // namespace sieve
