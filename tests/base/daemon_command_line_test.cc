// The command line of every daemon (base/flags.h), run as subprocesses: an unknown flag and a typo
// in a flag file exit 2 naming the flag (and the file and line); --help exits 0 and starts with
// the program's own groups, without the glog/gflags flags, with readable defaults; --version
// prints the version CMake's project() declares (SIEVE_EXPECTED_VERSION, from CMake).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "tests/base/temp_dir.h"
#include "tests/net/daemon_paths.h"
#include "tests/net/subprocess.h"

namespace sieve {
namespace {

using sieve::testing::Subprocess;

constexpr std::chrono::seconds kDeadline{30};

struct Daemon {
  std::string name;      // "sieve-worker"
  std::string path;      // the binary
  std::string typo;      // a misspelt flag, e.g. "desnity"
  std::string intended;  // the flag it is close to, e.g. "density"
  std::string first_group;
  std::string readable;   // one `--name=default ` its help shows
  std::string rejected;   // a well-formed flag whose value only the program itself rejects
  std::string rejection;  // what the program then says
};

void PrintTo(const Daemon& d, std::ostream* os) { *os << d.name; }

std::vector<Daemon> Daemons() {
  return {{"sieve-scheduler", testing::SchedulerBinary(), "num_wrokers", "num_workers", "Cluster:",
           "--heartbeat_timeout_ms=10000 ", "--num_workers=0", "--num_workers must be >= 1"},
          {"sieve-server", testing::ServerBinary(), "consistncy", "consistency", "Cluster:",
           "--server_density=0.001 ", "--consistency=maybe", "sieve-server: --consistency: "},
          {"sieve-worker", testing::WorkerBinary(), "desnity", "density",
           "Cluster:", "--synthetic_pull=0.01 ", "--density=7", "--density must be in (0, 1]"}};
}

struct Output {
  int exit_code = -1;
  std::vector<std::string> lines;  // stdout and stderr
  std::string text;
};

Output RunDaemon(const Daemon& d, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {d.path};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p(argv);
  Output r;
  auto status = p.Wait(kDeadline);
  if (status && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
  r.lines = p.lines();
  for (const auto& l : r.lines) r.text += l + "\n";
  return r;
}

class DaemonCommandLine : public ::testing::TestWithParam<Daemon> {
 protected:
  sieve::testing::TempDir dir_{"sieve-daemon-flags"};
};

TEST_P(DaemonCommandLine, UnknownFlagExitsTwoNamingItWithASuggestion) {
  const Daemon& d = GetParam();
  Output r = RunDaemon(d, {"--" + d.typo + "=1"});
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_NE(
      r.text.find(d.name + ": unknown flag --" + d.typo + " (did you mean --" + d.intended + "?)"),
      std::string::npos)
      << r.text;
  Output far = RunDaemon(d, {"--no_such_flag_at_all"});
  EXPECT_EQ(far.exit_code, 2) << far.text;
  EXPECT_NE(far.text.find("unknown flag --no_such_flag_at_all"), std::string::npos) << far.text;
  Output positional = RunDaemon(d, {"stray"});
  EXPECT_EQ(positional.exit_code, 2) << positional.text;
  Output bad_value = RunDaemon(d, {"--" + d.intended + "=not-a-number"});
  EXPECT_EQ(bad_value.exit_code, 2) << bad_value.text;
  EXPECT_NE(bad_value.text.find("--" + d.intended), std::string::npos) << bad_value.text;
}

TEST_P(DaemonCommandLine, TypoInAFlagFileExitsTwoNamingFileAndLine) {
  const Daemon& d = GetParam();
  const std::string path = (dir_.path() / "typo.flags").string();
  std::ofstream(path) << "# from a ConfigMap\n--" << d.typo << "=1\n";
  Output r = RunDaemon(d, {"--flagfile=" + path});
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_NE(r.text.find(path + ":2: unknown flag --" + d.typo), std::string::npos) << r.text;
  // Nested, as the Kubernetes flag files include model.flags.
  const std::string outer = (dir_.path() / "outer.flags").string();
  std::ofstream(outer) << "--flagfile=" << path << "\n";
  Output nested = RunDaemon(d, {"--flagfile=" + outer});
  EXPECT_EQ(nested.exit_code, 2) << nested.text;
  EXPECT_NE(nested.text.find(path + ":2:"), std::string::npos) << nested.text;
}

// Flags that parse (on the command line and in a flag file) reach the program: it runs on to its
// own checks of their values (here one that it rejects, so nothing connects anywhere).
TEST_P(DaemonCommandLine, ParsedFlagsReachTheProgram) {
  const Daemon& d = GetParam();
  const std::string path = (dir_.path() / "ok.flags").string();
  std::ofstream(path) << "--bind=127.0.0.1\n" << d.rejected << "\n";
  for (const auto& args : {std::vector<std::string>{"--bind=127.0.0.1", d.rejected},
                           std::vector<std::string>{"--port", "0", "--flagfile=" + path}}) {
    Output r = RunDaemon(d, args);
    EXPECT_EQ(r.exit_code, 2) << r.text;
    EXPECT_NE(r.text.find(d.rejection), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find("unexpected argument"), std::string::npos) << r.text;
  }
}

TEST_P(DaemonCommandLine, HelpShowsTheProgramsOwnGroupsOnly) {
  const Daemon& d = GetParam();
  Output help = RunDaemon(d, {"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.text;
  ASSERT_GE(help.lines.size(), 5u) << help.text;
  EXPECT_EQ(help.lines[0].rfind(d.name + " " + SIEVE_EXPECTED_VERSION + ": ", 0), 0u) << help.text;
  // After the header (name, usage) comes the first group of the program's own flags.
  size_t first = 1;
  while (first < help.lines.size() && !help.lines[first].empty()) ++first;
  ASSERT_LT(first + 2, help.lines.size()) << help.text;
  EXPECT_EQ(help.lines[first + 1], d.first_group) << help.text;
  EXPECT_EQ(help.lines[first + 2].rfind("  --", 0), 0u) << help.text;
  EXPECT_NE(help.text.find(d.readable), std::string::npos) << help.text;
  for (const char* noise : {"--logtostderr", "--v=", "--vmodule", "--flagfile", "--helpxml",
                            "--minloglevel", "0000000000000"}) {
    EXPECT_EQ(help.text.find(noise), std::string::npos) << noise << "\n" << help.text;
  }
  for (const char* same : {"--helpshort", "-h", "--help=true"}) {
    Output again = RunDaemon(d, {same});
    EXPECT_EQ(again.exit_code, 0) << same;
    EXPECT_EQ(again.text, help.text) << same;
  }
  Output full = RunDaemon(d, {"--helpfull"});
  EXPECT_EQ(full.exit_code, 0);
  EXPECT_EQ(full.text.rfind(help.lines[0], 0), 0u);
  EXPECT_NE(full.text.find("--logtostderr"), std::string::npos) << full.text;
}

TEST_P(DaemonCommandLine, VersionIsTheCMakeProjectVersion) {
  const Daemon& d = GetParam();
  // `--version=true` is how `sieve launch` and flag files write it.
  for (const char* flag : {"--version", "-version", "--version=true"}) {
    Output r = RunDaemon(d, {"--bind=127.0.0.1", flag});
    EXPECT_EQ(r.exit_code, 0) << flag << "\n" << r.text;
    EXPECT_EQ(r.text, d.name + " " + SIEVE_EXPECTED_VERSION + "\n") << flag;
  }
}

// A worker told to compute on a GPU where there is none stops before connecting, naming the
// device: exit 75 (kExitDeviceUnavailable, retried by the manifests) when the binary has the
// CUDA backend but sees no GPU, 2 (a usage error) when the binary has no CUDA backend at all.
TEST(WorkerDevice, CudaWithoutAGpuExitsNamingTheDevice) {
  const Daemon worker = Daemons()[2];
  ASSERT_EQ(worker.name, "sieve-worker");
  Output r = RunDaemon(worker, {"--device=cuda", "--scheduler=127.0.0.1:1"});
  if (r.text.find("GPU is visible") == std::string::npos &&
      r.text.find("without the CUDA backend") == std::string::npos) {
    GTEST_SKIP() << "a GPU is visible: the worker may run on it\n" << r.text;
  }
  const bool no_backend = r.text.find("without the CUDA backend") != std::string::npos;
  EXPECT_EQ(r.exit_code, no_backend ? 2 : 75) << r.text;
  EXPECT_NE(r.text.find("--device: "), std::string::npos) << r.text;
  Output bad = RunDaemon(worker, {"--device=tpu"});
  EXPECT_EQ(bad.exit_code, 2) << bad.text;
  EXPECT_NE(bad.text.find("'tpu'"), std::string::npos) << bad.text;
}

INSTANTIATE_TEST_SUITE_P(Daemons, DaemonCommandLine, ::testing::ValuesIn(Daemons()),
                         [](const ::testing::TestParamInfo<Daemon>& info) {
                           std::string name = info.param.name.substr(6);  // drop "sieve-"
                           return name;
                         });

}  // namespace
}  // namespace sieve
