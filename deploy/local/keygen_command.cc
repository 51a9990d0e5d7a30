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
    "usage: sieve keygen --out=DIR [--nodes=N] [--force]\n"
    "  Writes a CurveZMQ key directory for the daemons' --curve_dir: server.key, scheduler.key,\n"
    "  client.key, with --nodes=N also node-0.key .. node-<N-1>.key (one per server and worker,\n"
    "  each given to its daemon with --curve_key), and allowed_clients (the scheduler's key\n"
    "  marked); mode 0600. --force overwrites existing files.\n";

int Run(const std::vector<std::string>& args) {
  std::string out;
  int nodes = 0;
  bool force = false;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--out=", 0) == 0) {
      out = a.substr(6);
    } else if (a.rfind("--nodes=", 0) == 0) {
      char* end = nullptr;
      const long n = std::strtol(a.c_str() + 8, &end, 10);
      if (a.size() == 8 || *end != '\0' || n < 0 || n > 100000) {
        std::fprintf(stderr, "sieve keygen: --nodes must be an integer in [0, 100000]\n%s", kUsage);
        return 2;
      }
      nodes = static_cast<int>(n);
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
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "sieve keygen: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  auto written = WriteCurveDir(out, nodes, force);
  if (!written.ok()) {
    const bool exists = written.status().code() == StatusCode::kAlreadyExists;
    std::fprintf(stderr, "sieve keygen: %s%s\n", written.status().message().c_str(),
                 exists ? " (use --force to replace it)" : "");
    return 1;
  }
  std::string names;
  for (const std::string& n : *written) names += (names.empty() ? "" : ",") + n;
  std::printf("sieve keygen: wrote %s/{%s}\n", out.c_str(), names.c_str());
  return 0;
}

}  // namespace

const Subcommand& KeygenSubcommand() {
  static const Subcommand kCommand{"keygen", "write CurveZMQ keys for --curve_dir", &Run};
  return kCommand;
}

}  // namespace sieve
