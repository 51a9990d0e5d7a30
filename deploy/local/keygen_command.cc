#include "deploy/local/keygen_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "net/curve.h"

namespace sieve {
namespace {

constexpr char kUsage[] =
    "usage: sieve keygen --out=DIR [--force]\n"
    "  Writes a CurveZMQ key directory for the daemons' --curve_dir: server.key, client.key and\n"
    "  allowed_clients (mode 0600). --force overwrites existing files.\n";

int Run(const std::vector<std::string>& args) {
  std::string out;
  bool force = false;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--out=", 0) == 0) {
      out = a.substr(6);
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
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "sieve keygen: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  for (const char* name : {"server.key", "client.key", "allowed_clients"}) {
    if (!force && fs::exists(fs::path(out) / name)) {
      std::fprintf(stderr, "sieve keygen: %s/%s exists (use --force to replace it)\n", out.c_str(),
                   name);
      return 1;
    }
  }
  auto server = GenerateCurveKeyPair();
  auto client = GenerateCurveKeyPair();
  if (!server.ok() || !client.ok()) {
    std::fprintf(stderr, "sieve keygen: %s\n",
                 (server.ok() ? client.status() : server.status()).ToString().c_str());
    return 1;
  }
  Status s = WriteCurveKeyPair(out + "/server.key", *server);
  if (s.ok()) s = WriteCurveKeyPair(out + "/client.key", *client);
  if (s.ok()) {
    const std::string allowed = out + "/allowed_clients";
    std::ofstream f(allowed, std::ios::trunc);
    f << "# client public keys admitted by the daemons (one per line)\n"
      << client->public_key << "\n";
    f.close();
    if (!f || ::chmod(allowed.c_str(), 0600) != 0) s = UnavailableError("cannot write " + allowed);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "sieve keygen: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("sieve keygen: wrote %s/{server.key,client.key,allowed_clients}\n", out.c_str());
  return 0;
}

}  // namespace

const Subcommand& KeygenSubcommand() {
  static const Subcommand kCommand{"keygen", "write CurveZMQ keys for --curve_dir", &Run};
  return kCommand;
}

}  // namespace sieve
