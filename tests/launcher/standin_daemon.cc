// Stand-in for sieve-scheduler / sieve-server / sieve-worker in the launcher tests. The role is
// the basename of argv[0] (tests symlink this binary under the three daemon names).
//
// --helpxml: prints gflags-style XML listing the role's flags and exits 1 (as gflags does).
// Otherwise: writes its pid to $STANDIN_DIR/<role>[-<rank>].pid and its arguments (one a line)
// to .args, prints "argv: ..." to stdout and a line to stderr (the scheduler first prints
// "sieve-scheduler listening on 127.0.0.1:<port>", 41234 for --port=0), then "ready", then:
//   STANDIN_FAIL=<name>:exit:<code> | <name>:signal:<sig>  that process ends so;
//   STANDIN_HANG=all | comma list of names                  those block until signalled;
//   STANDIN_IGNORE_TERM=1                                   SIGTERM is ignored;
//   STANDIN_NO_LISTEN=1                                     the scheduler never listens, blocks;
//   STANDIN_FAIL_ONCE=1     STANDIN_FAIL applies to the first process of that name only (a
//                           restarted one runs normally);
//   STANDIN_SCHEDULER_WAITS=1  the scheduler exits 0 only once --num_workers workers exited 0
//                           (each writes <name>.done), within 20 s (else exits 1);
//   STANDIN_PROGRESS=1      workers print a progress line (base/progress_line.h) before "ready";
// and otherwise exits 0. <name> is "scheduler", "server-1", "worker-2", ...
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct FlagDef {
  const char* name;
  const char* type;
};

std::vector<FlagDef> FlagsOf(const std::string& role) {
  std::vector<FlagDef> common = {{"v", "int32"},      {"logtostderr", "bool"},
                                 {"helpxml", "bool"}, {"helpshort", "bool"},
                                 {"version", "bool"}, {"curve_dir", "string"}};
  std::vector<FlagDef> own;
  if (role == "scheduler") {
    own = {{"port", "int32"},       {"num_workers", "int32"}, {"num_servers", "int32"},
           {"num_params", "int64"}, {"sched_only", "string"}, {"heartbeat_interval_ms", "int32"}};
  } else if (role == "server") {
    own = {{"scheduler", "string"},      {"rank", "int32"},      {"consistency", "string"},
           {"num_params", "int64"},      {"fast", "bool"},       {"shared", "string"},
           {"checkpoint_dir", "string"}, {"curve_key", "string"}};
  } else {
    own = {{"scheduler", "string"}, {"rank", "int32"}, {"lr", "double"},
           {"num_params", "int64"}, {"fast", "bool"},  {"shared", "string"},
           {"curve_key", "string"}};
  }
  own.insert(own.end(), common.begin(), common.end());
  return own;
}

std::string FlagValue(int argc, char** argv, const std::string& name) {
  const std::string key = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], key.c_str(), key.size()) == 0) return argv[i] + key.size();
  }
  return "";
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool Listed(const std::string& list, const std::string& name) {
  if (list == "all") return true;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == name) return true;
  }
  return false;
}

void Say(FILE* f, const std::string& line) {
  std::fputs(line.c_str(), f);
  std::fflush(f);
}

[[noreturn]] void BlockForever() {
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  std::string role = argv[0];
  if (size_t slash = role.rfind('/'); slash != std::string::npos) role = role.substr(slash + 1);
  if (role.rfind("sieve-", 0) == 0) role = role.substr(6);

  if (argc == 2 && std::strcmp(argv[1], "--helpxml") == 0) {
    std::printf("<?xml version=\"1.0\"?>\n<AllFlags>\n<program>sieve-%s</program>\n", role.c_str());
    std::printf("<usage>stand-in</usage>\n");
    for (const FlagDef& f : FlagsOf(role)) {
      std::printf(
          "<flag><file>standin.cc</file><name>%s</name><meaning>m &lt;x&gt;</meaning>"
          "<default>0</default><current>0</current><type>%s</type></flag>\n",
          f.name, f.type);
    }
    std::printf("</AllFlags>\n");
    return 1;
  }

  if (Env("STANDIN_IGNORE_TERM") == "1") signal(SIGTERM, SIG_IGN);
  const std::string name = role == "scheduler" ? role : role + "-" + FlagValue(argc, argv, "rank");
  const std::string dir = Env("STANDIN_DIR");
  if (!dir.empty()) {
    std::ofstream(dir + "/" + name + ".args.tmp") << [&] {
      std::string all;
      for (int i = 1; i < argc; ++i) all += std::string(argv[i]) + "\n";
      return all;
    }();
    std::rename((dir + "/" + name + ".args.tmp").c_str(), (dir + "/" + name + ".args").c_str());
    // Written then renamed, like the args: a stand-in killed mid-write leaves no empty pid file.
    std::ofstream(dir + "/" + name + ".pid.tmp") << getpid() << "\n";
    std::rename((dir + "/" + name + ".pid.tmp").c_str(), (dir + "/" + name + ".pid").c_str());
  }

  if (role == "scheduler") {
    if (Env("STANDIN_NO_LISTEN") == "1") {
      Say(stdout, "not listening\n");
      BlockForever();
    }
    std::string port = FlagValue(argc, argv, "port");
    if (port.empty() || port == "0") port = "41234";
    Say(stdout, "sieve-scheduler listening on 127.0.0.1:" + port + "\n");
  }
  std::string joined;
  for (int i = 1; i < argc; ++i) joined += std::string(" ") + argv[i];
  Say(stdout, "argv:" + joined + "\n");
  Say(stderr, "part-");  // a line written in two pieces
  Say(stderr, "ial line on stderr\n");
  if (role == "worker" && Env("STANDIN_PROGRESS") == "1") {
    Say(stdout, "progress: epoch 1/2 round 3/8 loss 0.5000 bytes_up 1234\n");
  }
  Say(stdout, "ready\n");

  const std::string fail = Env("STANDIN_FAIL");
  const std::string failed_marker = dir + "/" + name + ".failed";
  const bool failed_before = std::filesystem::exists(failed_marker);
  if (fail.rfind(name + ":", 0) == 0 && !(Env("STANDIN_FAIL_ONCE") == "1" && failed_before)) {
    std::ofstream(failed_marker) << "1\n";
    std::string how = fail.substr(name.size() + 1);
    int value = std::atoi(how.substr(how.find(':') + 1).c_str());
    if (how.rfind("signal:", 0) == 0) {
      signal(value, SIG_DFL);
      raise(value);
    }
    return value;
  }
  if (Listed(Env("STANDIN_HANG"), name)) BlockForever();
  if (role == "worker") std::ofstream(dir + "/" + name + ".done") << "1\n";
  if (role == "scheduler" && Env("STANDIN_SCHEDULER_WAITS") == "1") {
    const int workers = std::atoi(FlagValue(argc, argv, "num_workers").c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      int done = 0;
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        done += entry.path().extension() == ".done";
      }
      if (done >= workers) break;
      if (std::chrono::steady_clock::now() > deadline) return 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polls; bounded above
    }
  }
  return 0;
}
