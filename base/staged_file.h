// StagedFile: a file written under PATH.tmp and renamed over PATH once complete, so that a reader
// finds the previous PATH (or none) or the whole new one, never a part of it.
//
// Contract: Create opens PATH.tmp and holds an exclusive advisory lock (flock) on it until Commit
// or destruction. A second StagedFile of the same PATH, in this process or another, then fails
// to open (FailedPrecondition naming PATH.tmp) instead of writing into the first one's bytes; a
// PATH.tmp left unlocked by a process that died is taken over (emptied). Append writes through
// at once (no buffer of its own). Commit renames PATH.tmp over PATH while still holding the lock,
// then closes; after it, or after any error, the object accepts nothing more. Destroying an
// uncommitted StagedFile removes PATH.tmp and leaves PATH as it was. Nothing is fsync'ed: the
// promise is to readers while the machine runs, not durability through a power loss.
// Errors: Unavailable naming the step (open, write, rename), the path and the system's reason.
// Ownership: owns its descriptor. Thread-safety: none; the owner serializes calls.
#ifndef SIEVE_BASE_STAGED_FILE_H_
#define SIEVE_BASE_STAGED_FILE_H_

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

class StagedFile {
 public:
  static StatusOr<std::unique_ptr<StagedFile>> Create(const std::string& path);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  Status Append(std::string_view data);
  Status Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  StagedFile(std::string path, std::string temp_path, int fd);
  // Closes and removes PATH.tmp (an error path or an uncommitted end).
  void Discard();

  const std::string path_;
  const std::string temp_path_;
  int fd_;  // -1 once committed or discarded
};

}  // namespace sieve

#endif  // SIEVE_BASE_STAGED_FILE_H_
