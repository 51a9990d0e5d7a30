// `sieve trace merge DIR [--out=FILE]`: merges the timelines sieve-server and sieve-worker wrote
// with --trace_out (trace/trace_writer.h) into one Chrome trace-event file for Perfetto /
// chrome://tracing (trace/trace_merge.h: one process each, aligned on the workers' start
// barrier); FILE defaults to DIR/merged.json, written atomically. docs/tracing.md.
//
// Exit status: 0 merged (notes on skipped or unfinished files go to stderr); 1 the merge failed
// (DIR unreadable, no sieve trace in it, a malformed or truncated file, named in the message, or
// FILE not written); 2 a usage error. `sieve trace --help` and `sieve trace merge --help` print
// the usage and exit 0.
#ifndef SIEVE_DEPLOY_LOCAL_TRACE_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_TRACE_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "trace"; returns the exit status (subcommand.h).
int RunTrace(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_TRACE_COMMAND_H_
