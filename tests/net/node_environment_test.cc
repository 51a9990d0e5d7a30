// ApplyNodeEnvironment against the flags it sets: a variable fills a flag left at its default,
// never one given explicitly; a value that does not parse is an error naming the variable.
#include "net/node_environment.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "net/node_flags.h"

namespace sieve {
namespace {

class NodeEnvironmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const EnvironmentFlag& e : kNodeEnvironment) unsetenv(e.variable);
  }
};

TEST_F(NodeEnvironmentTest, VariablesFillDefaultsAndExplicitFlagsWin) {
  gflags::FlagSaver saver;
  setenv("SIEVE_SCHEDULER", "10.1.2.3:4567", 1);
  setenv("SIEVE_RANK", "3", 1);
  setenv("SIEVE_METRICS_PORT", "9555", 1);
  setenv("SIEVE_BIND", "192.0.2.7", 1);
  ASSERT_NE(gflags::SetCommandLineOption("bind", "127.0.0.1"), "");  // given explicitly
  ASSERT_TRUE(ApplyNodeEnvironment().ok());
  EXPECT_EQ(FLAGS_scheduler, "10.1.2.3:4567");
  EXPECT_EQ(FLAGS_rank, 3);
  EXPECT_EQ(FLAGS_metrics_port, 9555u);
  EXPECT_EQ(FLAGS_bind, "127.0.0.1");
  auto nf = ReadNodeFlags("worker");
  ASSERT_TRUE(nf.ok()) << nf.status().ToString();
  EXPECT_EQ(nf->scheduler, "10.1.2.3:4567");
  EXPECT_EQ(nf->rank, 3);
}

TEST_F(NodeEnvironmentTest, TokenFileYieldsToAnExplicitToken) {
  gflags::FlagSaver saver;
  ASSERT_NE(gflags::SetCommandLineOption("job_token", "abc"), "");
  setenv("SIEVE_JOB_TOKEN_FILE", "/nonexistent/token", 1);
  ASSERT_TRUE(ApplyNodeEnvironment().ok());
  EXPECT_EQ(FLAGS_job_token_file, "");
}

TEST_F(NodeEnvironmentTest, BadValueNamesTheVariableAndSetsNothing) {
  gflags::FlagSaver saver;
  setenv("SIEVE_RANK", "two", 1);
  Status s = ApplyNodeEnvironment();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("SIEVE_RANK=two"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("--rank"), std::string::npos) << s.ToString();
  EXPECT_EQ(FLAGS_rank, -1);
}

TEST_F(NodeEnvironmentTest, WorkerCommandLinePutsRoutedFlagsBeforeTheCommandLine) {
  std::string a0 = "sieve-worker", a1 = "--density=0.5";
  char* argv[] = {a0.data(), a1.data(), nullptr};
  setenv("SIEVE_WORKER_FLAGS", "--density=0.01 '--metrics_out=/tmp/a b.jsonl'", 1);
  auto words = WorkerCommandLine(2, argv);
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_EQ(*words, (std::vector<std::string>{"sieve-worker", "--density=0.01",
                                              "--metrics_out=/tmp/a b.jsonl", "--density=0.5"}));
  setenv("SIEVE_HELPXML", "1", 1);
  setenv("SIEVE_WORKER_FLAGS", "  ", 1);
  words = WorkerCommandLine(2, argv);
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(*words, (std::vector<std::string>{"sieve-worker", "--helpxml", "--density=0.5"}));
  unsetenv("SIEVE_HELPXML");
  setenv("SIEVE_WORKER_FLAGS", "--density='0.5", 1);
  words = WorkerCommandLine(2, argv);
  EXPECT_EQ(words.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(words.status().message().find("SIEVE_WORKER_FLAGS"), std::string::npos);
  unsetenv("SIEVE_WORKER_FLAGS");
}

}  // namespace
}  // namespace sieve
