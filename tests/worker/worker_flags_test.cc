// FlagsToWorkerOptions (worker/worker_flags.h): sieve-worker's flags to its options, in process;
// each test sets flags under a gflags::FlagSaver. And sieve-worker's exit status for a missing GPU,
// run as a subprocess.
#include "worker/worker_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/compressor.h"
#include "kernels/device.h"
#include "kernels/model/model_layout.h"
#include "net/node_flags.h"
#include "tests/net/daemon_paths.h"
#include "tests/net/subprocess.h"

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
  EXPECT_TRUE(o->trainer.momentum_masking);
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
  FLAGS_momentum_masking = false;
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
  EXPECT_FALSE(t.momentum_masking);
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

// FlagsToWorkerOptions() with the flags as set fails with a usage error (kInvalidArgument) whose
// message starts with `prefix`.
void ExpectUsageError(const std::string& prefix) {
  auto o = FlagsToWorkerOptions();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << o.status().ToString();
  EXPECT_EQ(o.status().message().rfind(prefix, 0), 0u) << o.status().message();
}

// --device=cuda without a usable GPU is the machine's fault (kUnavailable, retried elsewhere);
// every other error is the command line's (kInvalidArgument), also when both are wrong.
TEST(WorkerFlagsTest, ANoGpuIsUnavailableEverythingElseAUsageError) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a GPU is visible here";
  {
    gflags::FlagSaver saver;
    FLAGS_device = "cuda";
    if (CudaBackendCompiled()) {
      auto o = FlagsToWorkerOptions();
      ASSERT_FALSE(o.ok());
      EXPECT_EQ(o.status().code(), StatusCode::kUnavailable) << o.status().ToString();
      EXPECT_EQ(o.status().message(), "--device: device 'cuda' requested but no GPU is visible");
    } else {  // a binary that can never use a GPU: retrying cannot help
      ExpectUsageError("--device: ");
    }
  }
  {
    gflags::FlagSaver saver;
    FLAGS_device = "cuda";
    FLAGS_model = "resnet";
    ExpectUsageError("--model");
  }
  {
    // A token file that cannot be read (NotFound where it is read) is a usage error too.
    gflags::FlagSaver saver;
    FLAGS_device = "cuda";
    FLAGS_job_token_file = "/nonexistent/sieve-token";
    ExpectUsageError("--job_token_file: ");
  }
}

struct Exit {
  int code = -1;
  std::string output;
};

Exit RunSieveWorker(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {sieve::testing::WorkerBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  sieve::testing::Subprocess p(argv);
  Exit e;
  auto status = p.Wait(std::chrono::seconds(30));
  if (status && WIFEXITED(*status)) e.code = WEXITSTATUS(*status);
  for (const auto& line : p.lines()) e.output += line + "\n";
  return e;
}

// sieve-worker itself: 75 (kExitDeviceUnavailable, which the Kubernetes manifests retry) for
// --device=cuda where no GPU is visible, before connecting to anything; 2 when a flag is wrong too.
TEST(WorkerFlagsTest, SieveWorkerWithoutAGpuExitsTempfail) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "a GPU is visible here";
  ASSERT_EQ(kExitDeviceUnavailable, 75);
  Exit no_gpu = RunSieveWorker({"--device=cuda"});
  if (CudaBackendCompiled()) {
    EXPECT_EQ(no_gpu.code, 75) << no_gpu.output;
    EXPECT_EQ(no_gpu.output,
              "sieve-worker: --device: device 'cuda' requested but no GPU is visible\n");
  } else {
    EXPECT_EQ(no_gpu.code, 2) << no_gpu.output;
  }
  Exit usage = RunSieveWorker({"--device=cuda", "--model=resnet"});
  EXPECT_EQ(usage.code, 2) << usage.output;
  EXPECT_NE(usage.output.find("sieve-worker: --model"), std::string::npos) << usage.output;
}

}  // namespace
}  // namespace sieve
