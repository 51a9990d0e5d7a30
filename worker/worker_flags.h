// sieve-worker's command line: its flags (defined in worker_flags.cc, plus the node flags of
// net/node_flags.h), its --help groups and their conversion to the daemon's options.
//
// Contract: parse the command line (daemon/daemon_main.h's StartDaemon with WorkerProgram())
// before FlagsToWorkerOptions(), both on main()'s thread. FlagsToWorkerOptions reads the parsed
// flags; its one change to them is ApplyNodeEnvironment's (net/node_environment.h: the job's
// SIEVE_* variables become defaults of flags not given). An error is a usage error
// (kInvalidArgument, exit 2) with the message the daemon prints between "sieve-worker: " and
// " (see --help)", except --device=cuda in a build with the CUDA backend that finds no usable GPU
// (kUnavailable, exit kExitDeviceUnavailable): a fault of the machine, not of the command line.
#ifndef SIEVE_WORKER_WORKER_FLAGS_H_
#define SIEVE_WORKER_WORKER_FLAGS_H_

#include <gflags/gflags.h>

#include <chrono>

#include "base/flags.h"
#include "base/status.h"
#include "kernels/device.h"
#include "net/node_flags.h"
#include "proto/codec.h"
#include "worker/trainer/trainer_options.h"

DECLARE_string(model);
DECLARE_uint64(num_params);
DECLARE_string(grad_dist);
DECLARE_string(synthetic_noise);
DECLARE_double(synthetic_scale);
DECLARE_double(synthetic_pull);
DECLARE_string(data_dir);
DECLARE_int32(batch_size);
DECLARE_int32(epochs);
DECLARE_int64(max_rounds);
DECLARE_int32(rounds_per_epoch);
DECLARE_string(straggler);
DECLARE_double(lr);
DECLARE_double(momentum);
DECLARE_bool(momentum_masking);
DECLARE_double(weight_decay);
DECLARE_double(lr_warmup_epochs);
DECLARE_string(lr_steps);
DECLARE_double(lr_gamma);
DECLARE_string(compressor);
DECLARE_double(density);
DECLARE_string(density_warmup);
DECLARE_string(device);
DECLARE_bool(fp16);
DECLARE_bool(checksum);
DECLARE_uint64(seed);
DECLARE_int32(eval_every);
DECLARE_uint64(eval_every_rounds);
DECLARE_bool(eval_deferred);
DECLARE_string(metrics_out);
DECLARE_int32(metrics_every);
DECLARE_int32(contraction_every);
DECLARE_string(histogram_rounds);
DECLARE_string(dump_weights);
DECLARE_string(progress);
DECLARE_string(trace_out);
DECLARE_string(summary_out);
DECLARE_string(trace_rounds);
DECLARE_int32(round_timeout_ms);
DECLARE_int32(shutdown_timeout_ms);
DECLARE_int32(barrier_probe);
DECLARE_int32(blas_threads);
DECLARE_int32(kernel_threads);

namespace sieve {

// What sieve-worker runs with, before it joins the job (worker/worker_daemon.h).
struct WorkerDaemonOptions {
  TrainerOptions trainer;  // validated (ValidateTrainerOptions); on_round is the run's
  NodeFlags node;          // the cluster flags, after the job's environment
  ValueType push_values = ValueType::kFp32;  // --wire_values, or fp16 under --fp16
  Device device = Device::kCpu;              // --device resolved (auto: cuda when visible)
  uint64_t num_params = 0;                   // D of --model (with --num_params)
  bool checksum = true;
  std::chrono::milliseconds shutdown_timeout{600000};  // >= 1 ms
  int blas_threads = 1;                                // >= 1
  int kernel_threads = 1;                              // >= 1
  std::string summary_out;  // --summary_out ({role} and {rank} not yet expanded); empty = none
};

// sieve-worker's name, summary, usage and --help groups (base/flags.h).
ProgramInfo WorkerProgram();

// sieve-worker's exit status when --device=cuda finds no usable GPU (none visible, or the CUDA
// runtime cannot reach it): EX_TEMPFAIL of sysexits.h. Unlike a usage error (2), another try
// may succeed (another node, a reset device): the Kubernetes manifests retry the pod under its
// index (docs/deploy.md, "Exit codes").
inline constexpr int kExitDeviceUnavailable = 75;

// The options of the parsed flags. Errors, checked in this order: the trainer's flags (each list
// and name parsed, then ValidateTrainerOptions), the job's environment, the node flags
// (ReadNodeFlags("worker")), --fp16 against --wire_values, --shutdown_timeout_ms,
// --blas_threads, --kernel_threads, --device=cuda in a build without the CUDA backend, --model,
// then whether --device=cuda finds a GPU (last, so that any usage error wins over a missing GPU).
// Every error is kInvalidArgument (a usage error, an unknown device name included) except that
// last one, kUnavailable.
StatusOr<WorkerDaemonOptions> FlagsToWorkerOptions();

}  // namespace sieve

#endif  // SIEVE_WORKER_WORKER_FLAGS_H_
