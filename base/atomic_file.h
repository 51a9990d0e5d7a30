// WriteFileAtomically: replaces a file's content as one step, so a reader sees the old content or
// the new, never a part: a StagedFile (base/staged_file.h) of PATH given `content` and committed.
// Not fsync'ed: the promise is to readers while the machine runs, not durability through a power
// loss. sieve-scheduler's status file and port file are written so.
//
// Errors: StagedFile's (Unavailable naming the step and the path; FailedPrecondition when another
// writer of PATH is at work); PATH is left as it was on an error. Thread-safety: as StagedFile.
#ifndef SIEVE_BASE_ATOMIC_FILE_H_
#define SIEVE_BASE_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

Status WriteFileAtomically(const std::string& path, std::string_view content);

}  // namespace sieve

#endif  // SIEVE_BASE_ATOMIC_FILE_H_
