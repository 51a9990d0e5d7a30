#include "net/curve.h"

#include <sys/stat.h>
#include <zmq.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace sieve {
namespace {

constexpr char kSchedulerRole[] = "scheduler";

bool IsZ85Key(const std::string& k) {
  if (k.size() != 40) return false;
  static const std::string kZ85 =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
  return k.find_first_not_of(kZ85) == std::string::npos;
}

// One key per line, optionally followed by a role (and for a server or worker its rank); '#'
// comments and blank lines skipped.
struct KeyLine {
  std::string key;
  std::string role;
  int rank = -1;
};

StatusOr<std::vector<KeyLine>> ReadKeyLines(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("cannot read " + path);
  std::vector<KeyLine> keys;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream words(line);
    KeyLine k;
    if (!(words >> k.key) || k.key[0] == '#') continue;
    if (!IsZ85Key(k.key)) return InvalidArgumentError(path + ": not a 40-character Z85 key");
    std::string extra;
    if (words >> k.role) {
      if (k.role == "server" || k.role == "worker") {
        if (!(words >> k.rank) || k.rank < 0) {
          return InvalidArgumentError(path + ": '" + k.role + "' needs a rank >= 0 after it");
        }
      }
      if (words >> extra) {
        return InvalidArgumentError(path + ": more than a key, a role and a rank on one line");
      }
    }
    keys.push_back(k);
  }
  return keys;
}

// Writes `content` to `path` (replacing it) and makes it readable by its owner only.
Status WriteSecretFile(const std::string& path, const std::string& content) {
  {
    std::ofstream f(path, std::ios::trunc);
    f << content;
    if (!f) return UnavailableError("cannot write " + path);
  }
  if (::chmod(path.c_str(), 0600) != 0) return UnavailableError("cannot chmod " + path);
  return Status::Ok();
}

StatusOr<CurveKeyPair> ReadKeyPair(const std::string& path) {
  SIEVE_ASSIGN_OR_RETURN(std::vector<KeyLine> lines, ReadKeyLines(path));
  if (lines.size() != 2 || !lines[0].role.empty() || !lines[1].role.empty()) {
    return InvalidArgumentError(path + ": expected a public and a secret key");
  }
  return CurveKeyPair{lines[0].key, lines[1].key};
}

}  // namespace

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  if (!zmq_has("curve")) return UnimplementedError("libzmq was built without CURVE");
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) return InternalError("zmq_curve_keypair failed");
  return CurveKeyPair{pub, sec};
}

StatusOr<CurveOptions> LoadCurveDir(const std::string& dir, const std::string& client_key_file) {
  if (!zmq_has("curve")) return UnimplementedError("libzmq was built without CURVE");
  CurveOptions o;
  o.enabled = true;
  SIEVE_ASSIGN_OR_RETURN(o.server, ReadKeyPair(dir + "/server.key"));
  SIEVE_ASSIGN_OR_RETURN(
      o.client, ReadKeyPair(client_key_file.empty() ? dir + "/client.key" : client_key_file));
  const std::string allowed = dir + "/allowed_clients";
  SIEVE_ASSIGN_OR_RETURN(std::vector<KeyLine> lines, ReadKeyLines(allowed));
  for (const KeyLine& k : lines) {
    if (k.role == kSchedulerRole) {
      if (!o.scheduler_key.empty()) return InvalidArgumentError(allowed + ": two scheduler keys");
      o.scheduler_key = k.key;
    } else if (k.role == "server" || k.role == "worker") {
      for (const auto& [other, b] : o.bindings) {
        if (b.role == k.role && b.rank == k.rank) {
          return InvalidArgumentError(allowed + ": two keys bound to " + k.role + " " +
                                      std::to_string(k.rank));
        }
      }
      if (!o.bindings.emplace(k.key, KeyBinding{k.role, k.rank}).second) {
        return InvalidArgumentError(allowed + ": a key bound twice");
      }
    } else if (!k.role.empty()) {
      return InvalidArgumentError(allowed + ": unknown role '" + k.role + "' (only '" +
                                  kSchedulerRole + "', 'server R' or 'worker R')");
    }
    o.allowed_clients.push_back(k.key);
  }
  if (o.allowed_clients.empty()) return InvalidArgumentError(allowed + " lists no key");
  return o;
}

Status CheckKeyBinding(const CurveOptions& curve, const std::string& key, const std::string& role,
                       int rank) {
  if (curve.bindings.empty()) return Status::Ok();
  if (auto it = curve.bindings.find(key); it != curve.bindings.end()) {
    if (it->second.role != role || it->second.rank != rank) {
      return InvalidArgumentError("this client key is bound to " + it->second.role + " " +
                                  std::to_string(it->second.rank) + " (allowed_clients)");
    }
    return Status::Ok();
  }
  for (const auto& [bound_key, b] : curve.bindings) {
    if (b.role == role && b.rank == rank) {
      return AlreadyExistsError(role + " rank " + std::to_string(rank) +
                                " is bound to another client key (allowed_clients)");
    }
  }
  return Status::Ok();
}

Status WriteCurveKeyPair(const std::string& path, const CurveKeyPair& keys) {
  return WriteSecretFile(path, keys.public_key + "\n" + keys.secret_key + "\n");
}

std::string NodeKeyName(const std::string& role, int rank) {
  return role + "-" + std::to_string(rank) + ".key";
}

StatusOr<std::vector<std::string>> WriteCurveDir(const std::string& dir, int servers, int workers,
                                                 bool force, bool unbound_client_key) {
  std::vector<std::string> pairs = {"server.key", "scheduler.key"};
  if (unbound_client_key || (servers == 0 && workers == 0)) pairs.push_back("client.key");
  for (int r = 0; r < servers; ++r) pairs.push_back(NodeKeyName("server", r));
  for (int r = 0; r < workers; ++r) pairs.push_back(NodeKeyName("worker", r));
  std::vector<std::string> names = pairs;
  names.push_back("allowed_clients");
  for (const std::string& name : names) {
    if (!force && std::filesystem::exists(dir + "/" + name)) {
      return AlreadyExistsError(dir + "/" + name + " exists");
    }
  }
  std::ostringstream allowed;
  allowed << "# client public keys admitted by the daemons (one per line; the scheduler's is "
             "marked)\n";
  for (const std::string& name : pairs) {
    SIEVE_ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
    SIEVE_RETURN_IF_ERROR(WriteCurveKeyPair(dir + "/" + name, keys));
    if (name == "server.key") continue;
    allowed << keys.public_key;
    if (name == "scheduler.key") {
      allowed << " scheduler";
    } else if (name != "client.key") {  // <role>-<rank>.key: bound to that node
      const size_t dash = name.find('-');
      allowed << " " << name.substr(0, dash) << " "
              << name.substr(dash + 1, name.size() - dash - 1 - 4);
    }
    allowed << "\n";
  }
  SIEVE_RETURN_IF_ERROR(WriteSecretFile(dir + "/allowed_clients", allowed.str()));
  return names;
}

StatusOr<std::vector<std::string>> WriteRoleDirs(const std::string& dir, int servers, int workers,
                                                 bool force) {
  const std::vector<std::string> shared = {"server.key", "allowed_clients"};
  std::vector<std::pair<std::string, std::vector<std::string>>> roles = {
      {"scheduler", {"scheduler.key"}}, {"servers", {}}, {"workers", {}}};
  for (int r = 0; r < servers; ++r) roles[1].second.push_back(NodeKeyName("server", r));
  for (int r = 0; r < workers; ++r) roles[2].second.push_back(NodeKeyName("worker", r));
  std::vector<std::string> written;
  for (auto& [role, own] : roles) {
    own.insert(own.end(), shared.begin(), shared.end());
    for (const std::string& name : own) {
      if (!std::filesystem::exists(dir + "/" + name)) {
        return NotFoundError(dir + "/" + name + " is missing");
      }
      if (!force && std::filesystem::exists(dir + "/" + role + "/" + name)) {
        return AlreadyExistsError(dir + "/" + role + "/" + name + " exists");
      }
    }
  }
  for (const auto& [role, own] : roles) {
    const std::string sub = dir + "/" + role;
    std::error_code ec;
    std::filesystem::create_directories(sub, ec);
    if (ec || ::chmod(sub.c_str(), 0700) != 0) return UnavailableError("cannot create " + sub);
    for (const std::string& name : own) {
      std::ifstream in(dir + "/" + name, std::ios::binary);
      std::ostringstream content;
      content << in.rdbuf();
      if (!in) return UnavailableError("cannot read " + dir + "/" + name);
      SIEVE_RETURN_IF_ERROR(WriteSecretFile(sub + "/" + name, content.str()));
      written.push_back(role + "/" + name);
    }
  }
  return written;
}

}  // namespace sieve
