// The workers' environment (worker_env.h) and the shell quoting of SIEVE_WORKER_FLAGS.
#include "deploy/local/worker_env.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "deploy/local/launch_options.h"

namespace sieve {
namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(ShellQuote, SplitCommandWordsReadsEveryWordBack) {
  const std::vector<std::string> words = {
      "--lr=0.5", "--straggler=1:x2,exp:2ms",  "--tag=two words", "--q='quoted'", "--empty=",
      "",         "--all=$HOME `x` \"y\" \\z", "--nl=a\tb"};
  const std::string joined = JoinShellWords(words);
  auto back = SplitCommandWords(joined);
  ASSERT_TRUE(back.ok()) << joined;
  EXPECT_EQ(*back, words) << joined;
  EXPECT_EQ(ShellQuote("--density=0.01"), "--density=0.01");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(JoinShellWords({}), "");
}

TEST(WorkerEnvironment, SetsTheJobAndUnsetsTheRest) {
  WorkerJob job;
  job.scheduler = "127.0.0.1:9310";
  job.num_workers = 2;
  job.num_servers = 1;
  job.bind = "0.0.0.0";
  job.host = "10.0.0.5";
  job.job_token_file = "/tmp/x/job_token";
  job.worker_flags = {"--compressor=topk", "--tag=a b"};
  auto env = WorkerEnvironment(job, 1);
  for (const char* e :
       {"SIEVE_SCHEDULER=127.0.0.1:9310", "SIEVE_RANK=1", "SIEVE_NUM_WORKERS=2",
        "SIEVE_NUM_SERVERS=1", "SIEVE_BIND=0.0.0.0", "SIEVE_HOST=10.0.0.5",
        "SIEVE_JOB_TOKEN_FILE=/tmp/x/job_token", "SIEVE_WORKER_FLAGS=--compressor=topk '--tag=a b'",
        "SIEVE_CURVE_DIR", "SIEVE_CURVE_KEY", "SIEVE_METRICS_PORT"}) {
    EXPECT_TRUE(Has(env, e)) << e;
  }
  EXPECT_EQ(env.size(), std::size(kWorkerEnvNames));  // each name once

  job.curve_dir = "/keys";
  job.curve_keys = {"/keys/worker-0.key", "/keys/worker-1.key"};
  job.metrics_ports = {9503, 9504};
  env = WorkerEnvironment(job, 1);
  EXPECT_TRUE(Has(env, "SIEVE_CURVE_DIR=/keys"));
  EXPECT_TRUE(Has(env, "SIEVE_CURVE_KEY=/keys/worker-1.key"));
  EXPECT_TRUE(Has(env, "SIEVE_METRICS_PORT=9504"));
  EXPECT_EQ(env.size(), std::size(kWorkerEnvNames));

  // The build's Python module first on PYTHONPATH, when the launcher found one.
  job.python_path = "/b/worker/python:/mine";
  env = WorkerEnvironment(job, 1);
  EXPECT_TRUE(Has(env, "PYTHONPATH=/b/worker/python:/mine"));
  EXPECT_EQ(env.size(), std::size(kWorkerEnvNames) + 1);
}

}  // namespace
}  // namespace sieve
