// End-to-end training on real local clusters started through `sieve launch`: exactness against a
// single-process reference, bitwise replica agreement, SSP/ASP bounds and conservation, and a
// short convergence check. Uses the installed Fashion-MNIST (skips when it is absent).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/model/model_layout.h"
#include "kernels/model/param_init.h"
#include "tests/net/subprocess.h"
#include "tests/net/summary_line.h"
#include "tests/worker/cpu_reference/model.h"
#include "worker/data/dataset.h"
#include "worker/trainer/schedule.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using testing::KeyValues;
using testing::ParseSummary;

bool HaveData() {
  return fs::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

struct RunResult {
  bool ok = false;
  std::map<int, KeyValues> workers, servers;
  std::string log;
};

RunResult Launch(int servers, int workers, std::vector<std::string> flags) {
  std::vector<std::string> argv = {testing::SelfDir() + "/../../deploy/sieve", "launch",
                                   "--num_servers=" + std::to_string(servers),
                                   "--num_workers=" + std::to_string(workers), "--"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  testing::Subprocess p(argv);
  RunResult r;
  auto st = p.Wait(seconds(400));
  r.ok = st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
  for (const std::string& line : p.lines()) {
    r.log += line + "\n";
    if (line.find("sieve-worker summary: ") != std::string::npos) {
      KeyValues kv = ParseSummary(line, "sieve-worker summary: ");
      r.workers[std::stoi(kv["rank"])] = kv;
    }
    if (line.find("sieve-server summary: ") != std::string::npos) {
      KeyValues kv = ParseSummary(line, "sieve-server summary: ");
      r.servers[std::stoi(kv["rank"])] = kv;
    }
  }
  return r;
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

class TrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveData()) GTEST_SKIP() << "Fashion-MNIST not installed";
    dir_ = fs::temp_directory_path() /
           ("sieve-e2e-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<float> ServerWeights(int servers) const {
    std::vector<float> all;
    for (int s = 0; s < servers; ++s) {
      auto part = ReadFloats((dir_ / ("shard" + std::to_string(s) + ".bin")).string());
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }
  std::string ShardFlag() const { return "--dump_shard=" + (dir_ / "shard{rank}.bin").string(); }
  std::string ReplicaFlag() const {
    return "--dump_weights=" + (dir_ / "replica{rank}.bin").string();
  }
  fs::path dir_;
};

// Single-process momentum SGD on the average of the workers' gradients, over exactly the batches
// the workers use (the same order functions), in float like the system.
std::vector<float> ReferenceMomentumSgd(const TrainerOptions& o, int workers) {
  auto layout = MakeModelLayout(o.model);
  auto train = LoadFashionMnist("train");
  auto model = cpu_reference::MakeModel(o.model);  // the pre-NnOps CPU model: independent
  EXPECT_TRUE(layout.ok() && train.ok() && model.ok());
  std::vector<float> w = InitParams(*layout, o.seed);
  const size_t d = w.size();
  const int64_t spe = *StepsPerEpoch(train->n, workers, o.batch_size);
  std::vector<std::vector<int64_t>> order(workers);
  for (int r = 0; r < workers; ++r)
    order[r] = *EpochBatchOrder(train->n, r, workers, o.batch_size, o.seed, 0);
  std::vector<std::vector<float>> m(workers, std::vector<float>(d, 0.0f));
  std::vector<float> g(d), x(static_cast<size_t>(o.batch_size) * 784), acc(d);
  std::vector<uint8_t> y(o.batch_size);
  for (int64_t step = 0; step < spe; ++step) {
    const float lr = static_cast<float>(LearningRate(o, static_cast<uint64_t>(step), spe));
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int r = 0; r < workers; ++r) {
      for (int b = 0; b < o.batch_size; ++b) {
        const int64_t idx = order[r][step * o.batch_size + b];
        std::memcpy(&x[static_cast<size_t>(b) * 784], train->image(idx), 784 * sizeof(float));
        y[b] = train->labels[idx];
      }
      (*model)->ForwardBackward(w.data(), x.data(), y.data(), o.batch_size, g.data());
      const float wd = static_cast<float>(o.weight_decay), mu = static_cast<float>(o.momentum);
      for (size_t i = 0; i < d; ++i) {
        const float gi = g[i] + wd * w[i];
        m[r][i] = mu * m[r][i] + gi;
        acc[i] += lr * m[r][i];
      }
    }
    for (size_t i = 0; i < d; ++i) w[i] -= acc[i] / static_cast<float>(workers);
  }
  return w;
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST_F(TrainingTest, DenseBspEqualsSingleProcessMomentumSgd) {
  TrainerOptions o;
  o.model = "fnn3";
  o.batch_size = 256;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  o.seed = 5;
  RunResult run = Launch(2, 2,
                         {"--model=fnn3", "--compressor=none", "--batch_size=256", "--lr=0.05",
                          "--momentum=0.9", "--weight_decay=0.0001", "--seed=5", "--epochs=1",
                          "--eval_every=0", ShardFlag(), ReplicaFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  const std::vector<float> system = ServerWeights(2);
  const std::vector<float> ref = ReferenceMomentumSgd(o, 2);
  ASSERT_EQ(system.size(), ref.size());
  const double err = RelativeError(system, ref);
  RecordProperty("relative_error", std::to_string(err));
  std::printf("relative error vs reference: %.3g (initial distance %.3g)\n", err,
              RelativeError(InitParams(*MakeModelLayout("fnn3"), 5), ref));
  EXPECT_LE(err, 1e-5);
  EXPECT_EQ(ReadFloats((dir_ / "replica0.bin").string()), system);
  EXPECT_EQ(ReadFloats((dir_ / "replica1.bin").string()), system);
}

TEST_F(TrainingTest, TopkConvergesAndEveryReplicaEqualsTheServersBitwise) {
  RunResult run = Launch(2, 2,
                         {"--model=fnn3", "--compressor=topk", "--density=0.01", "--epochs=1",
                          ShardFlag(), ReplicaFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  ASSERT_TRUE(run.workers.count(0));
  EXPECT_GE(std::stod(run.workers[0]["test_acc"]), 0.80) << run.log;
  const std::vector<float> system = ServerWeights(2);
  ASSERT_EQ(system.size(), 199210u);
  EXPECT_EQ(ReadFloats((dir_ / "replica0.bin").string()), system);
  EXPECT_EQ(ReadFloats((dir_ / "replica1.bin").string()), system);
  // Sparse traffic: about 2·k pairs of 8 bytes per round instead of 4·D.
  EXPECT_LT(std::stod(run.workers[0]["ratio"]), 0.05);
}

// Replies split into parts (docs/protocol.md, "Split replies") change nothing a worker computes:
// with one worker the job is deterministic, so the weights equal those of whole replies bit for
// bit, and the replica equals the servers' weights (BSP parts made by the shard server, ASP parts
// made when the reply is sent).
TEST_F(TrainingTest, SplitRepliesGiveTheSameWeightsAsWholeReplies) {
  for (const std::string consistency : {"bsp", "asp"}) {
    const std::vector<std::string> common = {
        "--model=softmax", "--compressor=topk", "--density=0.05", "--batch_size=64",
        "--epochs=1",      "--eval_every=0",    ShardFlag(),      "--consistency=" + consistency};
    auto with = [&](std::string extra) {
      std::vector<std::string> f = common;
      f.push_back(extra);
      f.push_back(ReplicaFlag());
      return f;
    };
    RunResult whole = Launch(2, 1, with("--reply_part_pairs=0"));
    ASSERT_TRUE(whole.ok) << whole.log;
    const std::vector<float> reference = ServerWeights(2);
    RunResult split = Launch(2, 1, with("--reply_part_pairs=16"));  // ~200 pairs per shard
    ASSERT_TRUE(split.ok) << split.log;
    const std::vector<float> parts = ServerWeights(2);
    ASSERT_EQ(parts.size(), 7850u);
    EXPECT_EQ(parts, reference) << consistency;
    EXPECT_EQ(ReadFloats((dir_ / "replica0.bin").string()), parts) << consistency;
    EXPECT_EQ(split.workers[0]["rounds"], whole.workers[0]["rounds"]);
  }
}

// A learning rate far too large: the worker stops at the first non-finite loss with a message that
// names the round and the learning rate and says what to try, and the job fails (non-zero exit).
TEST_F(TrainingTest, DivergenceStopsTheJobWithAnExplanation) {
  RunResult run = Launch(1, 1,
                         {"--model=fnn3", "--compressor=topk", "--density=0.01", "--lr=1000",
                          "--epochs=1", "--eval_every=0"});
  EXPECT_FALSE(run.ok) << run.log;
  EXPECT_NE(run.log.find("training diverged at round "), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("--lr=1000"), std::string::npos) << run.log;
  EXPECT_NE(run.log.find("Try a smaller --lr"), std::string::npos) << run.log;
  EXPECT_TRUE(run.workers.empty()) << "a diverged worker prints no success summary";
}

// A run reproduced from given weights: the servers start from --init_weights (not the seeded
// init), --lr=0 keeps them, and --max_rounds stops the job mid-epoch, with rank 0 evaluating at
// the stop. A truncated weights file is a usage error naming the file.
TEST_F(TrainingTest, InitWeightsAndMaxRounds) {
  auto layout = MakeModelLayout("softmax");
  ASSERT_TRUE(layout.ok());
  const std::vector<float> init = InitParams(*layout, 77);  // not the job's --seed=1 init
  const std::string path = (dir_ / "init.bin").string();
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(init.data()), 4 * init.size());
  }
  RunResult run =
      Launch(2, 1,
             {"--model=softmax", "--compressor=topk", "--density=0.01", "--lr=0", "--epochs=2",
              "--max_rounds=7", "--init_weights=" + path, ReplicaFlag(), ShardFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  EXPECT_EQ(run.workers[0]["rounds"], "7");
  EXPECT_TRUE(run.workers[0].count("test_acc")) << "evaluated at the stop";
  EXPECT_EQ(ServerWeights(2), init);
  EXPECT_EQ(ReadFloats((dir_ / "replica0.bin").string()), init);

  std::filesystem::resize_file(path, 4 * init.size() - 2);
  RunResult bad = Launch(1, 1, {"--model=softmax", "--init_weights=" + path, "--epochs=1"});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.log.find("--init_weights: weights file " + path + " holds"), std::string::npos)
      << bad.log;
}

TEST_F(TrainingTest, WithoutMomentumTopkAtFullDensityEqualsDense) {
  const std::vector<std::string> common = {"--model=softmax", "--momentum=0", "--batch_size=256",
                                           "--epochs=1",      "--lr=0.1",     "--eval_every=0",
                                           ShardFlag()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = common;
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  };
  ASSERT_TRUE(Launch(1, 2, with({"--compressor=none"})).ok);
  const std::vector<float> dense = ServerWeights(1);
  ASSERT_TRUE(Launch(1, 2, with({"--compressor=topk", "--density=1"})).ok);
  const std::vector<float> topk = ServerWeights(1);
  ASSERT_EQ(dense.size(), 7850u);
  EXPECT_LE(RelativeError(topk, dense), 1e-6);
}

// Σ over the servers of what they applied equals Σ over the workers of what they pushed, each
// applied push moved the weights by exactly scale·value in total, and the staleness bound holds.
void CheckConservation(const RunResult& run, const std::vector<float>& final_w,
                       const std::vector<float>& init, double scale) {
  double pushed_by_workers = 0, applied_by_servers = 0;
  for (const auto& [rank, kv] : run.workers) pushed_by_workers += std::stod(kv.at("pushed_sum"));
  for (const auto& [rank, kv] : run.servers) applied_by_servers += std::stod(kv.at("pushed_sum"));
  double moved = 0, magnitude = 0;
  for (size_t i = 0; i < final_w.size(); ++i) {
    moved += static_cast<double>(init[i]) - final_w[i];
    magnitude += std::abs(static_cast<double>(final_w[i])) + std::abs(static_cast<double>(init[i]));
  }
  EXPECT_NEAR(applied_by_servers, pushed_by_workers, 1e-6 * (1 + std::abs(pushed_by_workers)));
  EXPECT_NEAR(moved, scale * applied_by_servers, 1e-4 * (1 + magnitude));
}

TEST_F(TrainingTest, SspNeverExceedsItsStalenessAndLosesNothing) {
  RunResult run =
      Launch(2, 3,
             {"--model=softmax", "--consistency=ssp", "--staleness=1", "--compressor=topk",
              "--density=0.05", "--batch_size=256", "--epochs=1", "--eval_every=0", ShardFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  ASSERT_EQ(run.servers.size(), 2u);
  const uint64_t rounds = std::stoull(run.workers[0]["rounds"]);
  for (const auto& [rank, kv] : run.servers) {
    EXPECT_LE(std::stoi(kv.at("max_staleness")), 1) << "server " << rank;
    EXPECT_EQ(std::stoull(kv.at("applied")), 3 * rounds) << "every push applied exactly once";
    EXPECT_EQ(kv.at("duplicates"), "0");
  }
  const std::vector<float> init = InitParams(*MakeModelLayout("softmax"), 1);
  CheckConservation(run, ServerWeights(2), init, 1.0 / 3.0);
}

TEST_F(TrainingTest, AspTrainsAndLosesNothing) {
  RunResult run = Launch(1, 2,
                         {"--model=softmax", "--consistency=asp", "--compressor=gaussiank",
                          "--density=0.05", "--batch_size=64", "--epochs=1", ShardFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  EXPECT_GE(std::stod(run.workers[0]["test_acc"]), 0.70);
  const uint64_t rounds = std::stoull(run.workers[0]["rounds"]);
  EXPECT_EQ(std::stoull(run.servers[0]["applied"]), 2 * rounds);
  const std::vector<float> init = InitParams(*MakeModelLayout("softmax"), 1);
  CheckConservation(run, ServerWeights(1), init, 0.5);
}

}  // namespace
}  // namespace sieve
