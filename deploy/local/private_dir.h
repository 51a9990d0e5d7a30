// PrivateDir: a fresh directory only this user can enter (mkdtemp, 0700), removed with every file
// in it when the object goes. `sieve launch` keeps there the job token for the workers
// (SIEVE_JOB_TOKEN_FILE, worker_env.h) and the files the scheduler writes for it (its port file
// and status file).
//
// Contract: Create() makes $TMPDIR (or /tmp)/sieve-launch-XXXXXX; Write(name, contents) creates
// the file `name` in it, mode 0600, and returns its path; Path(name) is where a file of that name
// goes. Errors (Unavailable) name the path. The destructor removes the directory's files and the
// directory (best effort). A launcher killed by SIGKILL leaves them behind, readable only by its
// user. Thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_PRIVATE_DIR_H_
#define SIEVE_DEPLOY_LOCAL_PRIVATE_DIR_H_

#include <memory>
#include <string>

#include "base/status.h"

namespace sieve {

class PrivateDir {
 public:
  static StatusOr<std::unique_ptr<PrivateDir>> Create();
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  StatusOr<std::string> Write(const std::string& name, const std::string& contents);
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  explicit PrivateDir(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_PRIVATE_DIR_H_
