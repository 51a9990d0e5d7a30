// PrivateFile: a file only this user can read (0600) in a fresh private directory (mkdtemp, 0700),
// both removed when the object goes. `sieve launch` keeps the job token there for the workers
// (SIEVE_JOB_TOKEN_FILE, worker_env.h).
//
// Contract: Create(name, contents) makes $TMPDIR (or /tmp)/sieve-launch-XXXXXX/<name> holding
// `contents`; errors (Unavailable) name the path. The destructor removes the file and the
// directory (best effort). A launcher killed by SIGKILL leaves them behind, readable only by its
// user.
#ifndef SIEVE_DEPLOY_LOCAL_PRIVATE_FILE_H_
#define SIEVE_DEPLOY_LOCAL_PRIVATE_FILE_H_

#include <memory>
#include <string>

#include "base/status.h"

namespace sieve {

class PrivateFile {
 public:
  static StatusOr<std::unique_ptr<PrivateFile>> Create(const std::string& name,
                                                       const std::string& contents);
  ~PrivateFile();
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  PrivateFile(std::string dir, std::string path) : dir_(std::move(dir)), path_(std::move(path)) {}

  std::string dir_;
  std::string path_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_PRIVATE_FILE_H_
