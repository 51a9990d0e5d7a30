#include "deploy/local/keygen_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "net/curve.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve keygen --out=DIR [--servers=S --workers=W [--per_role] [--client_key]] "
    "[--force]\n"
    "  Writes a CurveZMQ key directory for the daemons' --curve_dir: server.key, scheduler.key,\n"
    "  allowed_clients (the scheduler's key marked), mode 0600, and the nodes' client keys:\n"
    "  without --servers/--workers one shared client.key; with them a key pair per node,\n"
    "  server-0.key .. server-<S-1>.key and worker-0.key .. worker-<W-1>.key, each bound to its\n"
    "  node in allowed_clients (a server or worker with --rank=r uses its own, and no other key\n"
    "  registers as that node). --client_key adds client.key, a key bound to no node: the\n"
    "  scheduler refuses it unless --allow_unbound_keys, and then admits it only for ranks bound\n"
    "  to no key (never a bound rank, a dead node's included). One directory serves the whole\n"
    "  job. --per_role also writes DIR/scheduler, DIR/servers and DIR/workers, each with only the\n"
    "  files that role reads (no other role's secret key): one Kubernetes Secret per role\n"
    "  (deploy/k8s/components/curve). --force overwrites existing files.\n";

// Parses "--NAME=N" with N in [0, 100000] into *value; false (after a usage error) otherwise.
bool ParseCount(const std::string& arg, const std::string& name, int* value) {
  const std::string prefix = "--" + name + "=";
  char* end = nullptr;
  const long n = std::strtol(arg.c_str() + prefix.size(), &end, 10);
  if (arg.size() == prefix.size() || *end != '\0' || n < 0 || n > 100000) {
    std::fprintf(stderr, "sieve keygen: --%s must be an integer in [0, 100000]\n%s", name.c_str(),
                 kUsage);
    return false;
  }
  *value = static_cast<int>(n);
  return true;
}

}  // namespace

int RunKeygen(const std::vector<std::string>& args) {
  std::string out;
  int servers = 0, workers = 0;
  bool force = false;
  bool per_role = false;
  bool client_key = false;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--out=", 0) == 0) {
      out = a.substr(6);
    } else if (a.rfind("--servers=", 0) == 0) {
      if (!ParseCount(a, "servers", &servers)) return 2;
    } else if (a.rfind("--workers=", 0) == 0) {
      if (!ParseCount(a, "workers", &workers)) return 2;
    } else if (a == "--per_role") {
      per_role = true;
    } else if (a == "--client_key") {
      client_key = true;
    } else if (a == "--force") {
      force = true;
    } else {
      std::fprintf(stderr, "sieve keygen: unexpected argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "sieve keygen: --out is required\n%s", kUsage);
    return 2;
  }
  if ((servers == 0) != (workers == 0)) {
    std::fprintf(stderr, "sieve keygen: --servers and --workers go together\n%s", kUsage);
    return 2;
  }
  if (client_key && servers == 0) {
    std::fprintf(stderr,
                 "sieve keygen: --client_key is for --servers/--workers (without them client.key "
                 "is always written)\n%s",
                 kUsage);
    return 2;
  }
  if (per_role && (servers == 0 || workers == 0)) {
    std::fprintf(stderr, "sieve keygen: --per_role needs --servers and --workers\n%s", kUsage);
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "sieve keygen: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  auto written = WriteCurveDir(out, servers, workers, force, client_key);
  if (!written.ok()) {
    const bool exists = written.status().code() == StatusCode::kAlreadyExists;
    std::fprintf(stderr, "sieve keygen: %s%s\n", written.status().message().c_str(),
                 exists ? " (use --force to replace it)" : "");
    return 1;
  }
  if (per_role) {
    auto roles = WriteRoleDirs(out, servers, workers, force);
    if (!roles.ok()) {
      std::fprintf(stderr, "sieve keygen: %s\n", roles.status().message().c_str());
      return 1;
    }
    written->insert(written->end(), roles->begin(), roles->end());
  }
  std::string names;
  for (const std::string& n : *written) names += (names.empty() ? "" : ",") + n;
  std::printf("sieve keygen: wrote %s/{%s}\n", out.c_str(), names.c_str());
  return 0;
}

}  // namespace sieve
