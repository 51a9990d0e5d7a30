// Child processes for the launcher: fork/exec with captured stdout and stderr.
//
// Contract:
// - SpawnChild() starts `argv[0]` (a path; no PATH search) with `argv` and the launcher's
//   environment changed by `extra_env`: an entry "NAME=value" sets NAME (replacing the launcher's
//   NAME), a bare "NAME" removes it. Stdin from /dev/null, and stdout/stderr connected to fresh
//   pipes whose read ends (close-on-exec, non-blocking) are returned. The child runs in its own
//   process group (pgid == pid) so one signal reaches it and anything it starts, and Ctrl-C on
//   the terminal reaches only the launcher. The child gets SIGKILL when the launcher dies
//   (PR_SET_PDEATHSIG: a killed launcher leaves no daemon behind; the launcher must not spawn
//   from a thread that exits before the child should). Signal dispositions and the signal mask are
//   reset to defaults in the child. A failed exec makes the child exit with 127 after writing the
//   reason to its stderr.
// - RunAndCapture() runs a program (environment as SpawnChild's) to completion with a bounded
//   wait, returning its stdout and wait status; on timeout the child's group is killed, reaped, and
//   DeadlineExceeded returned.
// - DescribeWaitStatus() renders a waitpid() status: "exited with code 3",
//   "killed by signal 9 (Killed)".
#ifndef SIEVE_DEPLOY_LOCAL_CHILD_PROCESS_H_
#define SIEVE_DEPLOY_LOCAL_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

struct SpawnedChild {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

StatusOr<SpawnedChild> SpawnChild(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& extra_env = {});

struct CapturedRun {
  std::string stdout_text;
  int wait_status = 0;
};

StatusOr<CapturedRun> RunAndCapture(const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout,
                                    const std::vector<std::string>& extra_env = {});

std::string DescribeWaitStatus(int wait_status);

// Closes `fd` if it is open and sets it to -1.
void CloseFd(int& fd);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_CHILD_PROCESS_H_
