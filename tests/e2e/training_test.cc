// End-to-end training on real local clusters started through `sieve launch`: exactness against a
// single-process reference, bitwise replica agreement, SSP/ASP bounds and conservation, a short
// convergence check, and emulated stragglers (--straggler) under BSP, SSP and ASP. Uses the
// installed Fashion-MNIST (skips when it is absent).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "kernels/model/param_init.h"
#include "kernels/sparse_ops.h"
#include "tests/base/temp_dir.h"
#include "tests/net/daemon_paths.h"
#include "tests/net/subprocess.h"
#include "tests/net/summary_file.h"
#include "tests/worker/cpu_reference/model.h"
#include "worker/data/dataset.h"
#include "worker/trainer/schedule.h"
#include "worker/trainer/trainer_options.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using testing::KeyValues;

bool HaveData() {
  return fs::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

struct RunResult {
  bool ok = false;
  std::map<int, KeyValues> workers, servers;
  std::string log;
};

// Runs `sieve launch` with `flags`; the daemons' summaries come from their --summary_out files (in
// a directory of the run's own).
RunResult Launch(int servers, int workers, std::vector<std::string> flags) {
  testing::TempDir summaries("sieve-e2e-summaries");
  const fs::path& dir = summaries.path();
  std::vector<std::string> argv = {testing::SieveBinary(),
                                   "launch",
                                   "--num_servers=" + std::to_string(servers),
                                   "--num_workers=" + std::to_string(workers),
                                   "--summary_out=" + (dir / "{role}-{rank}.json").string(),
                                   "--"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  testing::Subprocess p(argv);
  RunResult r;
  auto st = p.Wait(seconds(400));
  r.ok = st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
  for (const std::string& line : p.lines()) r.log += line + "\n";
  for (int w = 0; w < workers; ++w) {
    KeyValues kv =
        testing::ReadSummaryFile((dir / ("worker-" + std::to_string(w) + ".json")).string());
    if (!kv.empty()) r.workers[w] = std::move(kv);
  }
  for (int s = 0; s < servers; ++s) {
    KeyValues kv =
        testing::ReadSummaryFile((dir / ("server-" + std::to_string(s) + ".json")).string());
    if (!kv.empty()) r.servers[s] = std::move(kv);
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

// Value precision (--wire_values, --wire, sieve-server's --reply_values): 4-worker FNN-3 jobs on
// the compact wire with bf16 pushes and fp16 replies end within 0.3 pp of the same jobs on the
// raw-index fp32 wire, and with bf16 pushes and replies they train like the same jobs (same seeds
// and epochs) on the raw-index fp32 wire, averaged over two seeds; every worker's replica is the
// same bits, and each replica value is the servers' fp32 weight rounded to bf16 (the replica
// invariant of 16-bit replies). Every job runs with --ordered_rounds, so each repeats bit for bit:
// without it the servers sum fp32 pushes in arrival order and the fp32 jobs varied by up to
// 0.35 pp run to run at one seed, which once failed the 0.3 pp bound by 0.01 pp in CI. Measured
// on the Xeon 2-core machine with ordered rounds: fp32 88.84 / 88.21 %, bf16 -0.05 / +0.02 pp,
// bf16 pushes + fp16 replies -0.20 pp on the mean. The bf16 bound stays 0.5 pp, not the
// target's 0.3 pp: the workers' gradients are computed at bf16-rounded weights, and other machine
// types (other BLAS kernels) measured up to 0.35 pp below fp32 at one seed.
TEST_F(TrainingTest, Bf16WireTrainsLikeFp32AndReplicasAreTheServersWeightsRounded) {
  auto job = [&](int seed, std::vector<std::string> wire) {
    std::vector<std::string> f = {"--model=fnn3",     "--compressor=topk",
                                  "--density=0.001",  "--density_warmup=0.015625,0.004",
                                  "--epochs=8",       "--batch_size=64",
                                  "--lr=0.1",         "--lr_steps=5,7",
                                  "--eval_every=0",   "--seed=" + std::to_string(seed),
                                  "--ordered_rounds", ShardFlag(),
                                  ReplicaFlag()};
    f.insert(f.end(), wire.begin(), wire.end());
    return Launch(2, 4, f);
  };
  double sum32 = 0, sum16 = 0, sum_mixed = 0;
  RunResult fp32, bf16;
  for (int seed : {1, 2}) {
    fp32 = job(seed, {"--wire=v4", "--wire_values=fp32"});
    ASSERT_TRUE(fp32.ok) << fp32.log;
    // bf16 pushes, fp16 replies (the weights the workers compute at get 3 more significand bits).
    RunResult mixed = job(seed, {"--wire=v5", "--wire_values=bf16", "--reply_values=fp16"});
    ASSERT_TRUE(mixed.ok) << mixed.log;
    sum_mixed += std::stod(mixed.workers[0]["test_acc"]);
    bf16 = job(seed, {"--wire=v5", "--wire_values=bf16"});  // its dumps are checked below
    ASSERT_TRUE(bf16.ok) << bf16.log;
    const double acc32 = std::stod(fp32.workers[0]["test_acc"]);
    const double acc16 = std::stod(bf16.workers[0]["test_acc"]);
    std::printf("seed %d: test accuracy v4 fp32 %.4f, v5 bf16 %.4f (%+.2f pp)\n", seed, acc32,
                acc16, 100 * (acc16 - acc32));
    RecordProperty("acc_fp32_seed" + std::to_string(seed), std::to_string(acc32));
    RecordProperty("acc_bf16_seed" + std::to_string(seed), std::to_string(acc16));
    EXPECT_GE(acc32, 0.86) << fp32.log;
    sum32 += acc32;
    sum16 += acc16;
  }
  std::printf("mean: fp32 %.4f, bf16 %.4f (%+.2f pp); bytes pushed / dense: %s, %s\n", sum32 / 2,
              sum16 / 2, 50 * (sum16 - sum32), fp32.workers[0]["ratio"].c_str(),
              bf16.workers[0]["ratio"].c_str());
  std::printf("mean: bf16 pushes + fp16 replies %.4f (%+.2f pp)\n", sum_mixed / 2,
              50 * (sum_mixed - sum32));
  // Bounds on the loss (one-sided: a 16-bit job that trains better than fp32 passes).
  EXPECT_GE(sum16 / 2, sum32 / 2 - 0.005);
  // The 0.3 pp target's bound, with the replies' weights in fp16.
  EXPECT_GE(sum_mixed / 2, sum32 / 2 - 0.003);
  // Compact indices and 2-byte values: well under the fp32 wire's bytes.
  EXPECT_LT(std::stod(bf16.workers[0]["ratio"]), 0.6 * std::stod(fp32.workers[0]["ratio"]));

  const std::vector<float> server = ServerWeights(2);  // the bf16 job's
  ASSERT_EQ(server.size(), 199210u);
  const std::vector<float> replica0 = ReadFloats((dir_ / "replica0.bin").string());
  ASSERT_EQ(replica0.size(), server.size());
  size_t inexact = 0;
  for (size_t i = 0; i < server.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(replica0[i]),
              std::bit_cast<uint32_t>(Bf16ToFloat(FloatToBf16(server[i]))))
        << "index " << i;
    inexact += replica0[i] != server[i];
  }
  EXPECT_GT(inexact, server.size() / 2) << "the servers' weights are not all bf16 values";
  for (int r = 1; r < 4; ++r) {
    const std::vector<float> replica =
        ReadFloats((dir_ / ("replica" + std::to_string(r) + ".bin")).string());
    ASSERT_EQ(replica.size(), replica0.size());
    EXPECT_EQ(std::memcmp(replica.data(), replica0.data(), 4 * replica0.size()), 0)
        << "replica " << r << " differs from replica 0";
  }
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

// randomk with every flag but the compressor at its default trains (its default learning rate
// is scaled to the density: 0.025·√ρ, 0.00079 at its default density 0.001, the weights of a run
// given that --lr explicitly bitwise), and the same job at the rate the other compressors use (an
// explicit --lr, which is taken as given) diverges: the scaled default is what makes the
// difference.
TEST_F(TrainingTest, RandomkTrainsAtItsDefaultsAndDivergesAtTheOthersRate) {
  RunResult deflt = Launch(1, 1, {"--compressor=randomk", "--max_rounds=600", ReplicaFlag()});
  ASSERT_TRUE(deflt.ok) << deflt.log;
  EXPECT_GE(std::stod(deflt.workers[0]["test_acc"]), 0.4) << deflt.log;  // chance is 0.1
  EXPECT_EQ(deflt.workers[0].count("near_chance"), 0u) << deflt.log;
  const std::vector<float> by_default = ReadFloats((dir_ / "replica0.bin").string());
  ASSERT_FALSE(by_default.empty());

  const double scaled = DefaultLearningRate(Compressor::kRandomk, 0.001);
  EXPECT_NEAR(scaled, 0.00079, 0.000005);
  char lr[64];
  std::snprintf(lr, sizeof lr, "--lr=%.17g", scaled);  // the same double, parsed back
  RunResult given = Launch(1, 1, {"--compressor=randomk", "--max_rounds=600", lr, ReplicaFlag()});
  ASSERT_TRUE(given.ok) << given.log;
  EXPECT_TRUE(ReadFloats((dir_ / "replica0.bin").string()) == by_default)
      << "the default --lr of randomk is not " << lr;

  RunResult fast = Launch(1, 1, {"--compressor=randomk", "--max_rounds=600", "--lr=0.05"});
  EXPECT_FALSE(fast.ok) << fast.log;
  EXPECT_NE(fast.log.find("training diverged at round "), std::string::npos) << fast.log;
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

// A GPU worker trains like a CPU one: 2-epoch FNN-3 and CNN jobs on --device=cuda end within
// 0.5 pp of test accuracy of the same jobs on --device=cpu (skipped, never passed, without a GPU).
TEST_F(TrainingTest, CudaRunsMatchCpuRuns) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no GPU visible";
  for (const char* model : {"fnn3", "cnn"}) {
    std::map<std::string, double> acc;
    for (const char* device : {"cpu", "cuda"}) {
      RunResult run =
          Launch(1, 2,
                 {std::string("--model=") + model, "--compressor=topk", "--density=0.01",
                  "--epochs=2", "--eval_every=0", std::string("--device=") + device});
      ASSERT_TRUE(run.ok) << run.log;
      acc[device] = std::stod(run.workers[0]["test_acc"]);
    }
    EXPECT_NEAR(acc["cuda"], acc["cpu"], 0.005) << model;
  }
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

// ASP's interleaving differs run to run. At the default lr (0.05, momentum 0.9) softmax's final
// accuracy swings between 0.68 and 0.83 with it; at lr 0.01 it stays within 0.81-0.83, so the
// floor below tests that ASP trains, not the luck of the last rounds.
TEST_F(TrainingTest, AspTrainsAndLosesNothing) {
  RunResult run =
      Launch(1, 2,
             {"--model=softmax", "--consistency=asp", "--compressor=gaussiank", "--density=0.05",
              "--batch_size=64", "--lr=0.01", "--epochs=1", ShardFlag()});
  ASSERT_TRUE(run.ok) << run.log;
  EXPECT_GE(std::stod(run.workers[0]["test_acc"]), 0.70);
  const uint64_t rounds = std::stoull(run.workers[0]["rounds"]);
  EXPECT_EQ(std::stoull(run.servers[0]["applied"]), 2 * rounds);
  const std::vector<float> init = InitParams(*MakeModelLayout("softmax"), 1);
  CheckConservation(run, ServerWeights(1), init, 0.5);
}

// The values of "key" in the metrics lines of `path` (a --metrics_out file), in order.
std::vector<double> MetricValues(const fs::path& path, const std::string& key) {
  std::ifstream f(path);
  std::vector<double> out;
  const std::string needle = "\"" + key + "\":";
  for (std::string line; std::getline(f, line);) {
    const size_t pos = line.find(needle);
    if (pos != std::string::npos) out.push_back(std::stod(line.substr(pos + needle.size())));
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// A short synthetic job: 3 workers, 30 rounds, one server.
RunResult StragglerJob(const std::string& consistency, const std::string& straggler,
                       const std::string& metrics_out) {
  return Launch(1, 3,
                {"--model=synthetic", "--num_params=200000", "--rounds_per_epoch=30",
                 "--compressor=topk", "--density=0.01", "--consistency=" + consistency,
                 "--staleness=2", "--straggler=" + straggler, "--metrics_out=" + metrics_out});
}

// Emulated stragglers slow the named ranks only, by the stated amount: a fixed delay adds its time
// to every round's compute, x3 triples the measured compute time (ASP: nobody waits for anybody).
TEST_F(TrainingTest, StragglerSlowsTheNamedRanksByTheStatedAmount) {
  const std::string metrics = (dir_ / "metrics-{rank}.jsonl").string();
  RunResult run = StragglerJob("asp", "1:delay:20ms,2:x3", metrics);
  ASSERT_TRUE(run.ok) << run.log;
  auto file = [&](int rank) { return dir_ / ("metrics-" + std::to_string(rank) + ".jsonl"); };
  const std::vector<double> straggle0 = MetricValues(file(0), "t_straggle");
  ASSERT_EQ(straggle0.size(), 30u);
  for (double t : straggle0) EXPECT_EQ(t, 0.0) << "rank 0 has no straggler";
  EXPECT_EQ(run.workers[0].at("straggler"), "");

  // delay:20ms: 20 ms more compute per round than rank 0 (sleeps never end early; the upper
  // tolerance only bounds a busy machine's oversleeping).
  const double extra1 = Median(MetricValues(file(1), "t_straggle"));
  EXPECT_GE(extra1, 0.020);
  EXPECT_LE(extra1, 0.030);
  EXPECT_GE(Median(MetricValues(file(1), "t_compute")) - Median(MetricValues(file(0), "t_compute")),
            0.018);
  EXPECT_EQ(run.workers[1].at("straggler"), "delay:20ms");
  EXPECT_NEAR(std::stod(run.workers[1].at("straggle_s")), 30 * extra1, 30 * 0.01);

  // x3: the added time is twice the round's own compute time.
  const std::vector<double> compute2 = MetricValues(file(2), "t_compute");
  const std::vector<double> straggle2 = MetricValues(file(2), "t_straggle");
  ASSERT_EQ(compute2.size(), straggle2.size());
  std::vector<double> ratio;
  for (size_t i = 0; i < compute2.size(); ++i) {
    ratio.push_back(straggle2[i] / (compute2[i] - straggle2[i]));
  }
  EXPECT_GE(Median(ratio), 1.8);
  EXPECT_LE(Median(ratio), 3.0);
  EXPECT_EQ(run.workers[2].at("straggler"), "x3");
}

// One slow worker under BSP makes every worker's round as slow as its own; under ASP the fast
// workers' rounds do not wait for it (ratios of the workers' mean round times).
TEST_F(TrainingTest, BspFollowsTheStragglerAspDoesNot) {
  const std::string metrics = (dir_ / "m-{rank}.jsonl").string();
  RunResult bsp = StragglerJob("bsp", "2:delay:20ms", metrics);
  ASSERT_TRUE(bsp.ok) << bsp.log;
  RunResult asp = StragglerJob("asp", "2:delay:20ms", metrics);
  ASSERT_TRUE(asp.ok) << asp.log;
  auto round_s = [](RunResult& r, int rank) {
    return std::stod(r.workers[rank].at("mean_round_s"));
  };
  for (int rank : {0, 1}) {
    EXPECT_GE(round_s(bsp, rank), 0.8 * round_s(bsp, 2)) << "BSP rank " << rank;
    EXPECT_LE(round_s(asp, rank), 0.5 * round_s(asp, 2)) << "ASP rank " << rank;
  }
}

// SSP with a slow worker: the fast workers run ahead up to the bound and never past it, so over
// the job they keep pace with the straggler.
TEST_F(TrainingTest, SspKeepsItsBoundUnderAStraggler) {
  RunResult run = StragglerJob("ssp", "2:delay:20ms", (dir_ / "m-{rank}.jsonl").string());
  ASSERT_TRUE(run.ok) << run.log;
  for (const auto& [rank, kv] : run.servers) {
    EXPECT_LE(std::stoi(kv.at("max_staleness")), 2) << "server " << rank;
    EXPECT_GE(std::stoi(kv.at("max_staleness")), 1) << "the fast workers never ran ahead";
  }
  const double slow = std::stod(run.workers[2].at("mean_round_s"));
  for (int rank : {0, 1}) {
    EXPECT_GE(std::stod(run.workers[rank].at("mean_round_s")), 0.8 * slow) << "rank " << rank;
  }
}

// A straggler named for a rank the job does not have stops the job, naming it.
TEST_F(TrainingTest, StragglerForAMissingRankIsRejected) {
  RunResult run = StragglerJob("bsp", "5:x3", (dir_ / "m-{rank}.jsonl").string());
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.log.find("--straggler names worker 5 (5:x3) but the job has 3 workers"),
            std::string::npos)
      << run.log;
}

// BSP with one backup worker: 4 workers, 2 servers, every worker's compute emulated as 5 ms a
// round and worker 3's as 25 ms (5x). The fast workers' rounds close without it: their mean round
// time stays within 1.3x of the same job without the straggler (and with no backups); it skips
// rounds; and nothing pushed is lost or doubled: --late_pushes=apply merges its late pushes into
// later rounds (what the workers pushed = what the servers aggregated, each server's fp64 Σ),
// --late_pushes=return refuses them and the worker returns them to its residual (pushed -
// returned = aggregated). Every replica equals the servers' weights bitwise, and the servers name
// the straggler.
RunResult BackupJob(const std::vector<std::string>& extra, const std::vector<std::string>& dumps) {
  std::vector<std::string> flags = {"--model=synthetic", "--num_params=100000",
                                    "--rounds_per_epoch=40", "--compressor=topk", "--density=0.01"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  flags.insert(flags.end(), dumps.begin(), dumps.end());
  return Launch(2, 4, flags);
}

TEST_F(TrainingTest, BackupWorkerClosesRoundsAtTheFastWorkersPaceAndLosesNothing) {
  const std::vector<std::string> dumps = {ShardFlag(), ReplicaFlag()};
  RunResult base = BackupJob({"--straggler=delay:5ms"}, {});
  ASSERT_TRUE(base.ok) << base.log;
  for (const std::string mode : {"apply", "return"}) {
    SCOPED_TRACE("--late_pushes=" + mode);
    RunResult run = BackupJob({"--backup_workers=1", "--late_pushes=" + mode,
                               "--straggler=0:delay:5ms,1:delay:5ms,2:delay:5ms,3:delay:25ms"},
                              dumps);
    ASSERT_TRUE(run.ok) << run.log;
    ASSERT_EQ(run.workers.size(), 4u);
    ASSERT_EQ(run.servers.size(), 2u);

    double fast = 0, fast_base = 0;
    for (int rank : {0, 1, 2}) {
      fast += std::stod(run.workers[rank].at("mean_round_s")) / 3;
      fast_base += std::stod(base.workers[rank].at("mean_round_s")) / 3;
      EXPECT_EQ(run.workers[rank].at("skipped_rounds"), "0") << "fast rank " << rank;
    }
    std::printf(
        "--late_pushes=%s: fast workers' mean round %.4f s with the straggler and 1 backup, "
        "%.4f s without either (%.2fx)\n",
        mode.c_str(), fast, fast_base, fast / fast_base);
    EXPECT_LE(fast, 1.3 * fast_base);
    const KeyValues& slow = run.workers[3];
    ASSERT_EQ(slow.count("skipped_rounds"), 1u) << run.log;
    EXPECT_GT(std::stoull(slow.at("skipped_rounds")), 10u);
    EXPECT_EQ(slow.at("rounds"), "40");
    EXPECT_EQ(std::stoull(slow.at("missed_slices")) > 0, mode == "return");

    double pushed = 0, returned = 0, applied = 0;
    for (const auto& [rank, kv] : run.workers) {
      pushed += std::stod(kv.at("pushed_sum"));
      if (kv.count("returned_sum")) returned += std::stod(kv.at("returned_sum"));
    }
    for (const auto& [rank, kv] : run.servers) {
      applied += std::stod(kv.at("pushed_sum"));
      EXPECT_GT(std::stoull(kv.at("missed")), 10u) << "server " << rank;
      EXPECT_GT(std::stoull(kv.at("late_pushes")), 0u) << "server " << rank;
      EXPECT_NE(kv.at("late_workers").find("3:"), std::string::npos) << "server " << rank;
      EXPECT_EQ(kv.at("rounds"), "40");
    }
    EXPECT_EQ(std::abs(returned) > 0, mode == "return");
    EXPECT_NEAR(pushed - returned, applied, 1e-6 * (1 + std::abs(pushed)));
    const std::vector<float> servers = ServerWeights(2);
    for (int rank = 0; rank < 4; ++rank) {
      const std::vector<float> replica =
          ReadFloats((dir_ / ("replica" + std::to_string(rank) + ".bin")).string());
      EXPECT_TRUE(replica == servers) << "replica of worker " << rank << " differs";
    }
  }
}

// --eval_every_rounds: rank 0 evaluates after every n-th round as well as at the end (softmax,
// one epoch of 234 rounds at batch 256: rounds 99, 199 and 233).
TEST_F(TrainingTest, EvalEveryRoundsEvaluatesInsideTheEpoch) {
  const fs::path metrics = dir_ / "m.jsonl";
  RunResult run = Launch(1, 1,
                         {"--model=softmax", "--batch_size=256", "--epochs=1", "--eval_every=0",
                          "--eval_every_rounds=100", "--metrics_out=" + metrics.string()});
  ASSERT_TRUE(run.ok) << run.log;
  std::ifstream f(metrics);
  std::vector<uint64_t> evaluated;
  for (std::string line; std::getline(f, line);) {
    if (line.find("\"test_acc\":") == std::string::npos ||
        line.find("\"test_acc\":null") != std::string::npos) {
      continue;  // not an evaluation round
    }
    const size_t at = line.find("\"round\":");
    ASSERT_NE(at, std::string::npos) << line;
    evaluated.push_back(std::stoull(line.substr(at + 8)));
  }
  EXPECT_EQ(evaluated, (std::vector<uint64_t>{99, 199, 233}));
}

// --eval_deferred: the same job (one worker, so bitwise reproducible) evaluated at rounds 99, 199
// and 233 gives the same accuracies whether the replica is evaluated at once or copied and
// evaluated after the last round; the deferred lines come last, each with its round's own t_wall
// (a deferred line's t_wall is earlier than the last round's).
TEST_F(TrainingTest, DeferredEvaluationsMatchTheImmediateOnes) {
  struct Eval {
    uint64_t round;
    std::string test_acc, train_acc;  // as written: the same bits print the same text
    double t_wall;
    bool operator==(const Eval& o) const {
      return round == o.round && test_acc == o.test_acc && train_acc == o.train_acc;
    }
  };
  const auto field = [](const std::string& line, const std::string& key) {
    const size_t at = line.find("\"" + key + "\":");
    EXPECT_NE(at, std::string::npos) << key << " in " << line;
    if (at == std::string::npos) return std::string();
    const size_t from = at + key.size() + 3;
    return line.substr(from, line.find_first_of(",}", from) - from);
  };
  const auto run = [&](const std::string& name, const std::vector<std::string>& extra) {
    const fs::path metrics = dir_ / name;
    std::vector<std::string> flags = {
        "--model=softmax", "--batch_size=256",        "--epochs=1",
        "--eval_every=0",  "--eval_every_rounds=100", "--metrics_out=" + metrics.string()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    RunResult r = Launch(1, 1, flags);
    EXPECT_TRUE(r.ok) << r.log;
    std::vector<Eval> evals;
    std::ifstream f(metrics);
    for (std::string line; std::getline(f, line);) {
      if (field(line, "test_acc") == "null") continue;
      evals.push_back({std::stoull(field(line, "round")), field(line, "test_acc"),
                       field(line, "train_acc"), std::stod(field(line, "t_wall"))});
    }
    return evals;
  };
  const std::vector<Eval> now = run("now.jsonl", {});
  const std::vector<Eval> later = run("later.jsonl", {"--eval_deferred"});
  ASSERT_EQ(now.size(), 3u);
  EXPECT_EQ(now[0].round, 99u);
  EXPECT_EQ(now[2].round, 233u);
  // Deferred: the last round's evaluation is done at once, the two before it are written after.
  ASSERT_EQ(later.size(), 3u);
  EXPECT_EQ(later[0].round, 233u);
  EXPECT_EQ(later[1].round, 99u);
  EXPECT_EQ(later[2].round, 199u);
  EXPECT_LT(later[1].t_wall, later[2].t_wall);
  EXPECT_LT(later[2].t_wall, later[0].t_wall);
  std::vector<Eval> sorted = later;
  std::sort(sorted.begin(), sorted.end(),
            [](const Eval& a, const Eval& b) { return a.round < b.round; });
  EXPECT_TRUE(sorted == now) << "deferred accuracies differ from the immediate ones";
  for (size_t i = 0; i < now.size() && i < sorted.size(); ++i) {
    EXPECT_EQ(sorted[i].test_acc, now[i].test_acc) << "round " << now[i].round;
    EXPECT_EQ(sorted[i].train_acc, now[i].train_acc) << "round " << now[i].round;
  }
}

// A job cannot have as many backup workers as workers: refused before anything starts.
TEST_F(TrainingTest, AsManyBackupWorkersAsWorkersIsRefused) {
  RunResult run = BackupJob({"--backup_workers=4"}, {});
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.log.find("--backup_workers must be an integer in [0, 3]"), std::string::npos)
      << run.log;
}

}  // namespace
}  // namespace sieve
