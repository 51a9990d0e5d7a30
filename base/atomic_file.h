// WriteFileAtomically: replaces a file's content as one step, so a reader sees the old content or
// the new, never a part. The content goes to PATH.tmp first, is flushed to disk, then renamed over
// PATH (same directory, so the rename is atomic on POSIX file systems). Not fsync'ed: the promise
// is to readers while the machine runs, not durability through a power loss. sieve-scheduler's
// status file, port file and termination message are written so.
//
// Errors: Unavailable naming the step and the path (open, write, close, rename); PATH.tmp is
// removed on an error. Thread-safety: concurrent writers of one PATH share PATH.tmp: don't.
#ifndef SIEVE_BASE_ATOMIC_FILE_H_
#define SIEVE_BASE_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

Status WriteFileAtomically(const std::string& path, std::string_view content);

}  // namespace sieve

#endif  // SIEVE_BASE_ATOMIC_FILE_H_
