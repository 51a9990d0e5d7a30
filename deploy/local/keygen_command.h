// `sieve keygen --out=DIR [--servers=S --workers=W [--client_key]]`: writes a CurveZMQ key
// directory for `--curve_dir` (net/curve.h, WriteCurveDir): server.key (the job's server key
// pair), scheduler.key (the scheduler's client key pair), server-<r>.key for r < S and
// worker-<r>.key for r < W (a key pair per node, found by the node of that role and rank, bound
// to it in allowed_clients), client.key (a shared key bound to no node) only without
// --servers/--workers or with --client_key, and allowed_clients (every client public key, the
// scheduler's marked), files mode 0600. Every daemon of a job gets the same directory (in
// Kubernetes: one Secret). Existing files are kept unless --force is given.
#ifndef SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_

#include <string>
#include <vector>

namespace sieve {

// The subcommand: `args` are the words after "keygen"; returns the exit status (subcommand.h).
int RunKeygen(const std::vector<std::string>& args);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_
