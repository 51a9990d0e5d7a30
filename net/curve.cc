#include "net/curve.h"

#include <sys/stat.h>
#include <zmq.h>

#include <fstream>

namespace sieve {
namespace {

bool IsZ85Key(const std::string& k) {
  if (k.size() != 40) return false;
  static const std::string kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return k.find_first_not_of(kZ85) == std::string::npos;
}

StatusOr<std::vector<std::string>> ReadKeyLines(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("cannot read " + path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(f, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!IsZ85Key(line)) return InvalidArgumentError(path + ": not a 40-character Z85 key");
    keys.push_back(line);
  }
  return keys;
}

StatusOr<CurveKeyPair> ReadKeyPair(const std::string& path) {
  SIEVE_ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadKeyLines(path));
  if (lines.size() != 2) return InvalidArgumentError(path + ": expected a public and a secret key");
  return CurveKeyPair{lines[0], lines[1]};
}

}  // namespace

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  if (!zmq_has("curve")) return UnimplementedError("libzmq was built without CURVE");
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) return InternalError("zmq_curve_keypair failed");
  return CurveKeyPair{pub, sec};
}

StatusOr<CurveOptions> LoadCurveDir(const std::string& dir) {
  if (!zmq_has("curve")) return UnimplementedError("libzmq was built without CURVE");
  CurveOptions o;
  o.enabled = true;
  SIEVE_ASSIGN_OR_RETURN(o.server, ReadKeyPair(dir + "/server.key"));
  SIEVE_ASSIGN_OR_RETURN(o.client, ReadKeyPair(dir + "/client.key"));
  SIEVE_ASSIGN_OR_RETURN(o.allowed_clients, ReadKeyLines(dir + "/allowed_clients"));
  if (o.allowed_clients.empty()) return InvalidArgumentError(dir + "/allowed_clients lists no key");
  return o;
}

Status WriteCurveKeyPair(const std::string& path, const CurveKeyPair& keys) {
  {
    std::ofstream f(path, std::ios::trunc);
    f << keys.public_key << "\n" << keys.secret_key << "\n";
    if (!f) return UnavailableError("cannot write " + path);
  }
  if (::chmod(path.c_str(), 0600) != 0) return UnavailableError("cannot chmod " + path);
  return Status::Ok();
}

}  // namespace sieve
