// Launch(): run a local sieve cluster to completion.
//
// Contract, in order:
// 1. Find sieve-scheduler, sieve-server and sieve-worker (daemon_locator.h) and ask each for its
//    flags (--helpxml, once per daemon per launch). Route the pass-through flags
//    (flag_routing.h; --flagfile is read here, every line checked); a flag no daemon defines, or
//    one the launcher sets itself (--scheduler, --rank), is a usage error: nothing is started,
//    exit 2. --metrics_port=P is not routed as is: each daemon that defines it gets its own port,
//    the scheduler P, servers P+1..P+S, workers P+S+1..P+S+W (past 65535: usage error), printed
//    once ("metrics on scheduler :P, server 0 :P+1, ..."). With --worker_cmd and worker flags,
//    the command is asked which it implements (QueryWorkerCommandFlags); a flag only sieve-worker
//    defines that it does not implement, or any when it cannot say, is a usage error naming the
//    flag and the command (exit 2, nothing started).
// 2. Start the scheduler with --port, --num_workers, --num_servers (the last two also go to any
//    other daemon defining them), --port_file and --status_file (files in the launcher's private
//    directory; a --status_file of the user's own is used instead) and its routed flags; wait
//    (bounded by listen_timeout) for its port file.
// 3. Start servers 0..S-1 and sieve-workers 0..W-1 with --scheduler=127.0.0.1:PORT --rank=i and
//    their routed flags; a --worker_cmd gets its own words as argv, nothing more. Every worker
//    process gets WorkerEnvironment() (worker_env.h): the job in SIEVE_* variables, the token
//    in a private 0600 file (private_dir.h) removed on return. Output is relayed with
//    [scheduler] / [server i] / [worker i] prefixes.
// 4. Exit 0 once every process has exited 0 (workers let go below aside). If a server or worker
//    exits non-zero or by a signal while the scheduler runs and fewer than max_restarts restarts
//    were made in this job, print "restarting worker 1 (killed by signal 9 (Killed)), restart 1
//    of 3" and start it again with the same command line (same --rank: a server restores its
//    checkpoint, and is not restarted without --checkpoint_dir; a worker rejoins the running
//    job). A process that failed less than 10 s after its start waits for its restart
//    (restart_backoff.h: 0.5 s doubling per such failure in a row, at most 8 s; "server 1 failed
//    0.1 s after it started; restarting it in 500 ms" first, the "restarting" line when it
//    starts); the restart is counted when decided, and none is started once the scheduler has
//    exited. A worker that is not restarted (or dies once the scheduler has exited), when the
//    scheduler has --min_workers=M and at least M workers still run or exited 0, is let go:
//    "lost worker 1 (...)"; the scheduler decides the job (its exit is the launcher's). Otherwise a
//    failed process stops all others (SIGTERM, then SIGKILL after stop_timeout): print which one
//    failed and how, exit 1 (2 when it exited 2, a daemon's usage error such as a bad flag: never
//    restarted or let go either). The scheduler is never restarted. If the scheduler exits 0 and
//    others are still running after finish_grace, stop them and exit 1. SIGINT/SIGTERM/SIGHUP to
//    the launcher stops everyone and exits 128 + signal. Every child dies with the launcher
//    (child_process.h).
// 5. Progress (options.progress): the scheduler's status file (JobStatus as JSON, read at most
//    once a second) shown as one line (JobProgressText, job_progress.h). Live: one status line on
//    out_fd, redrawn in place (out_fd should be a terminal); lines: the same text as a launcher
//    message every 10 s. Unless progress is off, the workers' own progress lines
//    (proto/progress_line.h) are not relayed: the status line says the same for the whole job.
// 6. Once anything was started, the last launcher message is the job's result (job_result.h,
//    from the scheduler's final status file): "job finished: ..." with exit 0, or "job FAILED:
//    <reason>" with the non-zero exit.
// Launcher messages go to err_fd prefixed "sieve launch: ". Nothing is left running on return.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCHER_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCHER_H_

#include "deploy/local/launch_options.h"

namespace sieve {

int Launch(const LaunchOptions& options, int out_fd = 1, int err_fd = 2);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCHER_H_
