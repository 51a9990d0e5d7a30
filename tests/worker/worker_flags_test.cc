// FlagsToWorkerOptions (worker/worker_flags.h): sieve-worker's flags to its options, in process;
// each test sets flags under a gflags::FlagSaver.
#include "worker/worker_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernels/compressor.h"
#include "kernels/model/model_layout.h"
#include "net/node_flags.h"

namespace sieve {
namespace {

// The error message of FlagsToWorkerOptions() with the flags as set (empty: it succeeded).
std::string ErrorOf() {
  auto o = FlagsToWorkerOptions();
  return o.ok() ? "" : o.status().message();
}

TEST(WorkerFlagsTest, DefaultsTrainFnn3WithTopk) {
  gflags::FlagSaver saver;
  FLAGS_device = "cpu";
  auto o = FlagsToWorkerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->trainer.model, "fnn3");
  EXPECT_EQ(o->num_params, MakeModelLayout("fnn3")->num_params);
  EXPECT_EQ(o->trainer.compressor, Compressor::kTopk);
  EXPECT_DOUBLE_EQ(o->trainer.density, 0.001);
  EXPECT_DOUBLE_EQ(o->trainer.lr, 0.05);
  EXPECT_EQ(o->trainer.batch_size, 32);
  EXPECT_EQ(o->trainer.epochs, 1);
  EXPECT_EQ(o->device, Device::kCpu);
  EXPECT_EQ(o->push_values, ValueType::kFp32);
  EXPECT_TRUE(o->checksum);
  EXPECT_EQ(o->shutdown_timeout, std::chrono::milliseconds(600000));
  EXPECT_EQ(o->blas_threads, 1);
  EXPECT_EQ(o->kernel_threads, 1);
  EXPECT_EQ(o->node.rank, -1);
}

TEST(WorkerFlagsTest, FlagsReachTheOptions) {
  gflags::FlagSaver saver;
  FLAGS_model = "synthetic";
  FLAGS_num_params = 5000;
  FLAGS_grad_dist = "laplace";
  FLAGS_epochs = 3;
  FLAGS_max_rounds = 40;
  FLAGS_rounds_per_epoch = 20;
  gflags::SetCommandLineOption("lr", "0.2");
  FLAGS_momentum = 0.5;
  FLAGS_lr_steps = "1,2";
  FLAGS_compressor = "gaussiank";
  FLAGS_density = 0.01;
  FLAGS_density_warmup = "0.1,0.05";
  FLAGS_device = "cpu";
  FLAGS_histogram_rounds = "0,10";
  FLAGS_progress = "bar";
  FLAGS_checksum = false;
  FLAGS_shutdown_timeout_ms = 1234;
  FLAGS_blas_threads = 2;
  FLAGS_kernel_threads = 3;
  FLAGS_rank = 2;
  FLAGS_wire_values = "bf16";
  FLAGS_wire = "v4";
  auto o = FlagsToWorkerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const TrainerOptions& t = o->trainer;
  EXPECT_EQ(t.model, "synthetic");
  EXPECT_EQ(o->num_params, 5000u);
  EXPECT_EQ(t.grad_dist, GradDist::kLaplace);
  EXPECT_EQ(t.epochs, 3);
  EXPECT_EQ(t.max_rounds, 40);
  EXPECT_EQ(t.rounds_per_epoch, 20);
  EXPECT_DOUBLE_EQ(t.lr, 0.2);
  EXPECT_DOUBLE_EQ(t.momentum, 0.5);
  EXPECT_EQ(t.lr_steps, (std::vector<int>{1, 2}));
  EXPECT_EQ(t.compressor, Compressor::kGaussiank);
  EXPECT_DOUBLE_EQ(t.density, 0.01);
  EXPECT_EQ(t.density_warmup, (std::vector<double>{0.1, 0.05}));
  EXPECT_EQ(t.histogram_rounds, (std::vector<int>{0, 10}));
  EXPECT_TRUE(t.progress_bar);
  EXPECT_FALSE(o->checksum);
  EXPECT_EQ(o->shutdown_timeout, std::chrono::milliseconds(1234));
  EXPECT_EQ(o->blas_threads, 2);
  EXPECT_EQ(o->kernel_threads, 3);
  EXPECT_EQ(o->node.rank, 2);
  EXPECT_EQ(o->push_values, ValueType::kBf16);
  EXPECT_FALSE(o->node.compact_indices);
}

TEST(WorkerFlagsTest, RandomkWithoutLrTakesTheSmallerStep) {
  gflags::FlagSaver saver;
  FLAGS_device = "cpu";
  FLAGS_compressor = "randomk";
  FLAGS_density = 0.04;
  auto o = FlagsToWorkerOptions();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_DOUBLE_EQ(o->trainer.lr, DefaultLearningRate(Compressor::kRandomk, 0.04));
  EXPECT_NE(o->trainer.lr, 0.05);
}

TEST(WorkerFlagsTest, Fp16PushesBinary16UnlessWireValuesSaysOtherwise) {
  {
    gflags::FlagSaver saver;
    FLAGS_device = "cpu";
    FLAGS_fp16 = true;
    auto o = FlagsToWorkerOptions();
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->push_values, ValueType::kFp16);
  }
  {
    gflags::FlagSaver saver;
    FLAGS_fp16 = true;
    gflags::SetCommandLineOption("wire_values", "bf16");
    EXPECT_EQ(ErrorOf(),
              "--fp16 (deprecated: --wire_values=fp16) conflicts with --wire_values=bf16");
  }
}

TEST(WorkerFlagsTest, BadValuesAreUsageErrorsNamingTheFlag) {
  struct Case {
    const char* flag;
    const char* value;
    std::string error_prefix;
  };
  const Case cases[] = {
      {"grad_dist", "cauchy", "--grad_dist: "},
      {"synthetic_noise", "white", "--synthetic_noise: "},
      {"lr_steps", "a", "--lr_steps: "},
      {"compressor", "best", "--compressor: "},
      {"density_warmup", "x", "--density_warmup: "},
      {"straggler", "slow", "--straggler: "},
      {"histogram_rounds", "1,,", "--histogram_rounds: "},
      {"progress", "fancy", "--progress must be auto, bar or log"},
      {"shutdown_timeout_ms", "0", "--shutdown_timeout_ms must be >= 1"},
      {"blas_threads", "0", "--blas_threads must be >= 1"},
      {"kernel_threads", "0", "--kernel_threads must be >= 1"},
      {"device", "tpu", "--device"},
      {"model", "resnet", "--model"},
      {"wire", "v3", "--wire must be v5 or v4"},
  };
  for (const Case& c : cases) {
    gflags::FlagSaver saver;
    ASSERT_FALSE(gflags::SetCommandLineOption(c.flag, c.value).empty()) << c.flag;
    const std::string error = ErrorOf();
    EXPECT_EQ(error.rfind(c.error_prefix, 0), 0u)
        << "--" << c.flag << "=" << c.value << ": " << error;
  }
}

}  // namespace
}  // namespace sieve
