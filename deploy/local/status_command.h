// `sieve status`: a job's status (JobStatus, docs/protocol.md "Job status") for a person or a
// program, asked of the scheduler over the protocol (status_query.h), read from its metrics
// endpoint (GET /v1/job on its --metrics_port) or from its --status_file.
//
//   sieve status --scheduler=HOST:PORT [--job_token_file=PATH] [--host=HOST] [--json]
//                [--watch[=SECONDS]] [--timeout_ms=N]
//   sieve status --metrics=HOST:PORT [--json] [--watch[=SECONDS]] [--timeout_ms=N]
//   sieve status --status_file=PATH [--json] [--watch[=SECONDS]]
//
// Prints one screen (status_screen.h) or, with --json, the status as the scheduler serves it.
// --watch prints it again every SECONDS (default 1; redrawn in place on a terminal) until the job
// finishes or fails. Exit status: 0 the status was shown (with --watch: the job finished), 1 it
// could not be read (or, with --watch, the job failed or its scheduler went away before the end),
// 2 usage error.
#ifndef SIEVE_DEPLOY_LOCAL_STATUS_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_STATUS_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "status"; returns the exit status (subcommand.h).
int RunStatus(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_STATUS_COMMAND_H_
