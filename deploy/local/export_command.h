// `sieve export --from=DIR --out=FILE --model=NAME [...]`: the trained weights of one job, the
// model's full flat vector of D float32 values, in one file, from the servers' final shards
// (`shard-<rank>.f32`, sieve-server --dump_shard) or their checkpoints (`server-<rank>.ckpt`,
// --checkpoint_dir) in DIR, one run's directory (weights_export.h: what is checked and refused).
// FILE is a NumPy .npy file (FILE ending in .npy, or --format=npy) or raw little-endian float32
// (otherwise, or --format=raw: what sieve-server --init_weights reads), written atomically.
// docs/deploy.md, "Exporting the trained weights".
//
// Exit status: 0 written (one line on stdout says what; notes go to stderr); 1 refused or
// failed (nothing written; the reason, naming the file, on stderr); 2 a usage error. `sieve
// export --help` prints the usage and exits 0.
#ifndef SIEVE_DEPLOY_LOCAL_EXPORT_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_EXPORT_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "export"; returns the exit status (subcommand.h).
int RunExport(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_EXPORT_COMMAND_H_
