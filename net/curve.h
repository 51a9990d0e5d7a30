// CurveZMQ settings of a node (docs/security.md): key pairs in Z85 text (40 characters each), as
// written by `sieve keygen`, and the allow-list of client public keys.
//
// A key directory (--curve_dir) holds:
//   server.key       the job's server key pair: line 1 public, line 2 secret. Every node's
//                    receive socket is a CURVE server with it; every sender needs its public half.
//   scheduler.key    the scheduler's client key pair (same layout): the key of the control plane.
//   client.key       a client key pair for nodes without a key of their own (bound to no node;
//                    `sieve keygen --servers --workers` writes it only with --client_key).
//   server-<r>.key   (`sieve keygen --servers=S --workers=W`) one client key pair per node, named
//   worker-<r>.key   after its role and rank (NodeKeyName): a server or worker with --rank=r uses
//                    its own without being told (or the file given with --curve_key).
//   allowed_clients  one client public key per line ('#' comments); only these may send. A key
//                    followed by the word `scheduler` is the scheduler's: nodes accept control
//                    messages (and anything claiming node id 0) only from it. A key followed by
//                    `server R` or `worker R` is bound to that rank in advance: it registers only
//                    as that node, and that rank registers only with it (CheckKeyBinding).
// A node's client key is bound to its node id when it registers (docs/security.md).
#ifndef SIEVE_NET_CURVE_H_
#define SIEVE_NET_CURVE_H_

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// The node a client key is bound to by the allow-list (`KEY server 3`).
struct KeyBinding {
  std::string role;  // "server" or "worker"
  int rank = 0;
};

struct CurveOptions {
  bool enabled = false;
  CurveKeyPair server;
  CurveKeyPair client;  // this daemon's own key pair, used by its sending sockets
  std::vector<std::string> allowed_clients;
  // The scheduler's client public key (the allow-list's `scheduler` line); empty when the list
  // names none (a key directory of an older keygen): control messages are then not checked by key.
  std::string scheduler_key;
  // Client public key -> the node it is bound to (allow-list lines with a role and a rank).
  std::map<std::string, KeyBinding> bindings;
};

// Whether a node registering as `role` (server/worker) `rank` (-1 = any) with client key `key`
// (empty without CURVE) respects the allow-list's bindings: a bound key registers only as its
// own node (else InvalidArgument), and a bound rank only with its key (else AlreadyExists).
// Without bindings everything passes. Pure function.
Status CheckKeyBinding(const CurveOptions& curve, const std::string& key, const std::string& role,
                       int rank);

// A fresh key pair (libzmq's zmq_curve_keypair). Errors: Unimplemented (libzmq without CURVE).
StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// Reads a key directory (layout above) into enabled options, with this daemon's client key pair
// from `client_key_file` (empty = DIR/client.key). Errors: NotFound (missing file),
// InvalidArgument (a key that is not 40 Z85 characters, an empty allow-list, a word other than
// `scheduler` after a key, two scheduler keys), Unimplemented (libzmq without CURVE).
StatusOr<CurveOptions> LoadCurveDir(const std::string& dir,
                                    const std::string& client_key_file = "");

// Writes a key pair file (public line, secret line) with mode 0600. Errors: Unavailable.
Status WriteCurveKeyPair(const std::string& path, const CurveKeyPair& keys);

// The file name of a node's own key pair in a key directory: "<role>-<rank>.key" (role "server"
// or "worker").
std::string NodeKeyName(const std::string& role, int rank);

// Writes a whole key directory (layout above) with fresh keys, a key pair per server rank
// < `servers` and per worker rank < `workers`, into the existing directory `dir`, every file
// mode 0600. client.key, a key bound to no node, is written only for a directory without node
// keys (servers = workers = 0: every node shares it) or when `unbound_client_key` asks for it (a
// job's scheduler then refuses it unless --allow_unbound_keys, and admits it only for ranks bound
// to no key). Refuses (AlreadyExists, nothing written) when one of the files exists, unless
// `force`. Errors: Unavailable, Unimplemented. Returns the names of the files written.
StatusOr<std::vector<std::string>> WriteCurveDir(const std::string& dir, int servers, int workers,
                                                 bool force, bool unbound_client_key);

// After WriteCurveDir(dir, servers, workers, ...): one key directory per role, each holding only
// what that role's daemons read, so that (in Kubernetes, one Secret per role) a pod never holds
// another role's secret key:
//   dir/scheduler/  server.key, scheduler.key, allowed_clients
//   dir/servers/    server.key, server-0.key .. server-<S-1>.key, allowed_clients
//   dir/workers/    server.key, worker-0.key .. worker-<W-1>.key, allowed_clients
// (server.key, the job's one server key pair, is in all three: every node's receive socket needs
// it.) Directories mode 0700, files 0600; existing files are replaced only with `force`
// (AlreadyExists otherwise, nothing written). Errors: NotFound (a file of the flat directory is
// missing), Unavailable. Returns the paths written, relative to `dir`.
StatusOr<std::vector<std::string>> WriteRoleDirs(const std::string& dir, int servers, int workers,
                                                 bool force);

}  // namespace sieve

#endif  // SIEVE_NET_CURVE_H_
