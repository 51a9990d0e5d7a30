#include "deploy/local/launch_options.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

using Args = std::vector<std::string>;

TEST(LauncherOptions, ConsumesOwnFlagsAndKeepsTheRestInOrder) {
  auto o = ParseLaunchArgs({"--num_servers=2", "--lr", "0.1", "--num_workers", "4", "--fast",
                            "--port=7000", "--bin_dir=/b", "--log_dir", "/l",
                            "--stop_timeout_ms=50", "--", "--port=9", "x"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->num_servers, 2);
  EXPECT_EQ(o->num_workers, 4);
  EXPECT_EQ(o->port, 7000);
  EXPECT_EQ(o->bin_dir, "/b");
  EXPECT_EQ(o->log_dir, "/l");
  EXPECT_EQ(o->stop_timeout.count(), 50);
  EXPECT_FALSE(o->help);
  EXPECT_EQ(o->pass_through, (Args{"--lr", "0.1", "--fast", "--port=9", "x"}));
}

TEST(LauncherOptions, DefaultsAndHelp) {
  auto o = ParseLaunchArgs({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->num_servers, 1);
  EXPECT_EQ(o->num_workers, 1);
  EXPECT_EQ(o->port, 0);
  EXPECT_TRUE(ParseLaunchArgs({"--num_workers=oops", "--help"}).ok() == false);
  auto help = ParseLaunchArgs({"--help", "--num_workers=oops"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
}

TEST(LauncherOptions, RejectsBadValuesNamingTheFlag) {
  for (const Args& args : {Args{"--num_workers=0"}, Args{"--port=70000"}, Args{"--num_servers"},
                           Args{"--num_servers=2x"}, Args{"--bin_dir="}}) {
    auto o = ParseLaunchArgs(args);
    ASSERT_FALSE(o.ok()) << args[0];
    EXPECT_NE(o.status().message().find(args[0].substr(0, args[0].find('='))), std::string::npos)
        << o.status().message();
  }
}

TEST(LauncherOptions, WorkerCommandIsSplitLikeAShellWithoutExpansions) {
  auto o = ParseLaunchArgs({"--worker_cmd=python3 'a b.py'  --x=\"q \\\" $HOME\" c\\ d", "--lr=1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->worker_cmd, (Args{"python3", "a b.py", "--x=q \" $HOME", "c d"}));
  EXPECT_EQ(o->pass_through, (Args{"--lr=1"}));
  EXPECT_TRUE(ParseLaunchArgs({})->worker_cmd.empty());
  for (const char* bad : {"--worker_cmd=python3 'open", "--worker_cmd=\"x", "--worker_cmd=x \\",
                          "--worker_cmd=   ", "--worker_cmd="}) {
    auto r = ParseLaunchArgs({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--worker_cmd"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace sieve
