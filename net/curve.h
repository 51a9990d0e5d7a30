// CurveZMQ settings of a node (docs/security.md): key pairs in Z85 text (40 characters each), as
// written by `sieve keygen`, and the allow-list of client public keys.
//
// A key directory (--curve_dir) holds three files:
//   server.key       the job's server key pair: line 1 public, line 2 secret. Every node's
//                    receive socket is a CURVE server with it; every sender needs its public half.
//   client.key       this node's client key pair (same layout), used by its sending sockets.
//   allowed_clients  one client public key per line ('#' comments); only these may send.
#ifndef SIEVE_NET_CURVE_H_
#define SIEVE_NET_CURVE_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace sieve {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

struct CurveOptions {
  bool enabled = false;
  CurveKeyPair server;
  CurveKeyPair client;
  std::vector<std::string> allowed_clients;
};

// A fresh key pair (libzmq's zmq_curve_keypair). Errors: Unimplemented (libzmq without CURVE).
StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// Reads a key directory (layout above) into enabled options. Errors: NotFound (missing file),
// InvalidArgument (a key that is not 40 Z85 characters, an empty allow-list), Unimplemented
// (libzmq without CURVE).
StatusOr<CurveOptions> LoadCurveDir(const std::string& dir);

// Writes a key pair file (public line, secret line) with mode 0600. Errors: Unavailable.
Status WriteCurveKeyPair(const std::string& path, const CurveKeyPair& keys);

}  // namespace sieve

#endif  // SIEVE_NET_CURVE_H_
