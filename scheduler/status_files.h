// StatusFiles: sieve-scheduler's job status on disk, for readers that cannot ask it over HTTP
// (`sieve launch`, a Kubernetes termination message, a script after the job).
// - status_file (--status_file): the whole JobStatus as JSON (proto/job_status_text.h), written
//   atomically (base/atomic_file.h) when the phase changes, at most once per `interval` (1 s by
//   default, --status_file_interval_ms) while it does not, and last with the final status. The
//   final file equals the last GET /v1/job.
// - termination_file (--termination_message_file): JobStatusBrief of the first status and then of
//   the final one (a Kubernetes pod's terminationMessagePath: "how did the job end" after the pod
//   is gone), written in place (truncated, then written: Kubernetes mounts that one file, so it
//   cannot be replaced by a rename; it is read once the process exited).
// Take() is the Scheduler's on_status hook. A write that fails is logged (at most once per file)
// and the job goes on; Check() writes the first status before the job so that an unwritable path
// is a startup error. Thread-compatible: Take() on the scheduler's Run() thread only.
#ifndef SIEVE_SCHEDULER_STATUS_FILES_H_
#define SIEVE_SCHEDULER_STATUS_FILES_H_

#include <chrono>
#include <string>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

class StatusFiles {
 public:
  StatusFiles(std::string status_file, std::string termination_file,
              std::chrono::milliseconds interval = std::chrono::seconds(1))
      : status_file_(std::move(status_file)),
        termination_file_(std::move(termination_file)),
        interval_(interval) {}

  // Writes `initial` to both files (the termination message too: a scheduler killed before the
  // end leaves its last known state). Errors: WriteFileAtomically's.
  Status Check(const pb::JobStatus& initial);
  void Take(const pb::JobStatus& status);

 private:
  using Clock = std::chrono::steady_clock;
  const std::string status_file_;
  const std::string termination_file_;
  const std::chrono::milliseconds interval_;
  pb::JobPhase last_phase_ = pb::JOB_PHASE_UNSPECIFIED;
  Clock::time_point last_write_{};
  bool warned_ = false;
};

}  // namespace sieve

#endif  // SIEVE_SCHEDULER_STATUS_FILES_H_
