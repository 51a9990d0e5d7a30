#include "scheduler/status_files.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/atomic_file.h"
#include "proto/job_status_text.h"

namespace sieve {
namespace {

// The termination message is written in place: Kubernetes bind-mounts that one file (into a
// directory the container may not write), so a rename over it fails. It is read after the
// process exited, never while it is written.
Status WriteInPlace(const std::string& path, std::string_view content) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return UnavailableError("cannot open " + path + ": " + std::strerror(errno));
  const bool wrote = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) return UnavailableError("cannot write " + path);
  return Status::Ok();
}

}  // namespace

Status StatusFiles::Check(const pb::JobStatus& initial) {
  if (!status_file_.empty()) {
    SIEVE_RETURN_IF_ERROR(WriteFileAtomically(status_file_, JobStatusToJson(initial)));
  }
  if (!termination_file_.empty()) {
    SIEVE_RETURN_IF_ERROR(WriteInPlace(termination_file_, JobStatusBrief(initial)));
  }
  last_phase_ = initial.phase();
  last_write_ = Clock::now();
  return Status::Ok();
}

void StatusFiles::Take(const pb::JobStatus& status) {
  const bool final = status.phase() == pb::JOB_FINISHED || status.phase() == pb::JOB_FAILED;
  const auto now = Clock::now();
  if (!final && status.phase() == last_phase_ && now - last_write_ < interval_) {
    return;
  }
  last_phase_ = status.phase();
  last_write_ = now;
  Status s;
  if (!status_file_.empty()) s = WriteFileAtomically(status_file_, JobStatusToJson(status));
  if (s.ok() && final && !termination_file_.empty()) {
    s = WriteInPlace(termination_file_, JobStatusBrief(status));
  }
  if (!s.ok() && !warned_) {
    warned_ = true;
    LOG(WARNING) << "job status not written (later failures are not logged): " << s.ToString();
  }
}

}  // namespace sieve
