// `sieve compare CONFIG`: runs a grid of training jobs (consistency x compressor x density x
// workers x link, repeated over seeds) described by a YAML file and writes
// results/<name>/summary.csv, runs.csv, summary.md and PNG plots; finished runs are reused only
// while their cache key (flags and programs) is unchanged. The grid runner is
// deploy/local/compare_command.py with its package deploy/local/compare/ (config, runner, table,
// plots; Python 3 with python3-yaml and python3-matplotlib, installed by scripts/setup); this
// subcommand finds it and the build tree and hands over. `sieve compare --help` prints the
// config format.
#ifndef SIEVE_DEPLOY_LOCAL_COMPARE_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_COMPARE_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "compare"; returns the exit status (subcommand.h).
int RunCompare(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_COMPARE_COMMAND_H_
