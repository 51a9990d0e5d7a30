// `sieve keygen --out=DIR`: writes a CurveZMQ key directory for `--curve_dir` (net/curve.h):
// server.key (the job's server key pair), client.key (a client key pair) and allowed_clients
// (listing client.key's public key), files mode 0600. Every daemon of a job gets the same
// directory (in Kubernetes: one Secret). Existing files are kept unless --force is given.
#ifndef SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_
#define SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_

#include "deploy/local/subcommand.h"

namespace sieve {

const Subcommand& KeygenSubcommand();

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_KEYGEN_COMMAND_H_
