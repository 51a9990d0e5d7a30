// sieve-worker's run, once its flags are options (worker/worker_flags.h): serve /healthz, join the
// job through the push/pull client, train the data partition (worker/trainer/trainer.h), print the
// `sieve-worker summary:` line, then finish and wait for the scheduler's shutdown.
//
// Contract: call RunWorker once, from main()'s thread, before any other thread is started (it
// installs the SIGINT/SIGTERM stop, daemon/daemon_main.h: before the worker has joined, a signal
// exits 128 + signo at once). It sets the OpenBLAS and OpenMP thread counts of the process.
// Returns the exit code: 0 the job ended well; 1 the worker could not join it, training failed or
// the job did not end cleanly.
#ifndef SIEVE_WORKER_WORKER_DAEMON_H_
#define SIEVE_WORKER_WORKER_DAEMON_H_

#include "worker/worker_flags.h"

namespace sieve {

int RunWorker(WorkerDaemonOptions options);

}  // namespace sieve

#endif  // SIEVE_WORKER_WORKER_DAEMON_H_
