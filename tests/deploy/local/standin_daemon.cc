// Stand-in for sieve-scheduler / sieve-server / sieve-worker in the launcher tests. The role is
// the basename of argv[0] (tests symlink this binary under the three daemon names).
//
// --helpxml: prints gflags-style XML listing the role's flags and exits 1 (as gflags does).
// Otherwise: writes its pid to $STANDIN_DIR/<role>[-<rank>].pid and its arguments (one a line)
// to .args, prints "argv: ..." to stdout and a line to stderr (the scheduler first writes
// "127.0.0.1:<port>", 41234 for --port=0, to its --port_file), then "ready", then:
//   STANDIN_FAIL=<name>:exit:<code> | <name>:signal:<sig>  that process ends so;
//   STANDIN_HANG=all | comma list of names                  those block until signalled;
//   STANDIN_IGNORE_TERM=1                                   SIGTERM is ignored;
//   STANDIN_NO_LISTEN=1                                     the scheduler never listens, blocks;
//   STANDIN_FAIL_ONCE=1     STANDIN_FAIL applies to the first process of that name only (a
//                           restarted one runs normally);
//   STANDIN_SCHEDULER_WAITS=1  the scheduler exits 0 only once --num_workers workers exited 0
//                           (each writes <name>.done), within 20 s (else exits 1);
//   STANDIN_PROGRESS=1      workers print a progress line (proto/progress_line.h) before "ready";
//   STANDIN_STATUS=1        the scheduler waits as STANDIN_SCHEDULER_WAITS, then writes its
//                           --status_file: a finished job whose finished workers (the .done files)
//                           each report rounds=8+rank, bytes_pushed=1000*(rank+1), rank 0
//                           test_accuracy 0.8512 (JobStatus JSON, docs/protocol.md);
// and otherwise exits 0. <name> is "scheduler", "server-1", "worker-2", ... (the rank from --rank,
// else from SIEVE_RANK). Its SIEVE_* environment goes to <name>.env (sorted, one a line), with
// `token=<contents>` and `token_mode=<octal>` of the file SIEVE_JOB_TOKEN_FILE names.
// With --min_workers=M, STANDIN_SCHEDULER_WAITS waits for M workers instead.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

extern char** environ;

namespace {

struct FlagDef {
  const char* name;
  const char* type;
};

std::vector<FlagDef> FlagsOf(const std::string& role) {
  std::vector<FlagDef> common = {
      {"v", "int32"},      {"logtostderr", "bool"}, {"helpxml", "bool"},      {"helpshort", "bool"},
      {"version", "bool"}, {"curve_dir", "string"}, {"metrics_port", "int32"}};
  std::vector<FlagDef> own;
  if (role == "scheduler") {
    own = {{"port", "int32"},        {"num_workers", "int32"}, {"num_servers", "int32"},
           {"num_params", "int64"},  {"sched_only", "string"}, {"heartbeat_interval_ms", "int32"},
           {"min_workers", "uint32"}};
  } else if (role == "server") {
    own = {{"scheduler", "string"},      {"rank", "int32"},       {"consistency", "string"},
           {"num_params", "int64"},      {"fast", "bool"},        {"shared", "string"},
           {"checkpoint_dir", "string"}, {"curve_key", "string"}, {"job_token", "string"}};
  } else {
    own = {{"scheduler", "string"}, {"rank", "int32"},       {"lr", "double"},
           {"num_params", "int64"}, {"fast", "bool"},        {"shared", "string"},
           {"curve_key", "string"}, {"straggler", "string"}, {"job_token", "string"},
           {"density", "double"}};
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

// The finished job's status file (STANDIN_STATUS): one row per worker that wrote <name>.done.
void WriteStatus(const std::string& dir, const std::string& path) {
  if (path.empty()) return;
  std::vector<int> ranks;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("worker-", 0) == 0 && entry.path().extension() == ".done") {
      ranks.push_back(std::atoi(file.c_str() + 7));
    }
  }
  std::sort(ranks.begin(), ranks.end());
  uint64_t pushed = 0;
  std::string nodes;
  for (int r : ranks) {
    pushed += 1000 * (r + 1);
    nodes += std::string(nodes.empty() ? "" : ",") +
             "{\"role\": \"ROLE_WORKER\", \"rank\": " + std::to_string(r) +
             ", \"state\": \"NODE_FINISHED\", \"worker\": {\"round\": \"" + std::to_string(8 + r) +
             "\", \"bytes_pushed\": \"" + std::to_string(1000 * (r + 1)) + "\"" +
             (r == 0 ? ", \"test_accuracy\": 0.8512" : "") + "}}";
  }
  std::ofstream(path + ".tmp") << "{\"phase\": \"JOB_FINISHED\", \"workers_finished\": "
                               << ranks.size() << ", \"progress\": {\"bytes_pushed\": \"" << pushed
                               << "\""
                               << (!ranks.empty() && ranks[0] == 0 ? ", \"test_accuracy\": 0.8512"
                                                                   : "")
                               << "}, \"nodes\": [" << nodes << "]}\n";
  std::filesystem::rename(path + ".tmp", path);
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
  std::string rank = FlagValue(argc, argv, "rank");
  if (rank.empty()) rank = Env("SIEVE_RANK");
  const std::string name = role == "scheduler" ? role : role + "-" + rank;
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
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "SIEVE_", 6) == 0) env.push_back(*e);
    }
    if (const std::string token = Env("SIEVE_JOB_TOKEN_FILE"); !token.empty()) {
      std::ifstream in(token);
      std::string contents;
      std::getline(in, contents);
      struct stat st {};
      stat(token.c_str(), &st);
      char mode[16];
      std::snprintf(mode, sizeof(mode), "%o", static_cast<unsigned>(st.st_mode & 0777));
      env.push_back("token=" + contents);
      env.push_back(std::string("token_mode=") + mode);
    }
    std::sort(env.begin(), env.end());
    std::ofstream out(dir + "/" + name + ".env");
    for (const std::string& e : env) out << e << "\n";
  }

  if (role == "scheduler") {
    if (Env("STANDIN_NO_LISTEN") == "1") {
      Say(stdout, "not listening\n");
      BlockForever();
    }
    std::string port = FlagValue(argc, argv, "port");
    if (port.empty() || port == "0") port = "41234";
    if (const std::string file = FlagValue(argc, argv, "port_file"); !file.empty()) {
      std::ofstream(file + ".tmp") << "127.0.0.1:" << port << "\n";
      std::filesystem::rename(file + ".tmp", file);
    }
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
  const bool writes_status = role == "scheduler" && Env("STANDIN_STATUS") == "1";
  if (role == "scheduler" && (Env("STANDIN_SCHEDULER_WAITS") == "1" || writes_status)) {
    const std::string min_workers = FlagValue(argc, argv, "min_workers");
    const int workers = std::atoi(
        (min_workers.empty() ? FlagValue(argc, argv, "num_workers") : min_workers).c_str());
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
  if (writes_status) WriteStatus(dir, FlagValue(argc, argv, "status_file"));
  return 0;
}
