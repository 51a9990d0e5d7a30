// Launch(): run a local sieve cluster to completion.
//
// Contract, in order:
// 1. Find sieve-scheduler, sieve-server and sieve-worker (daemon_locator.h) and ask each for its
//    flags (--helpxml, once per daemon per launch). Route the pass-through flags
//    (flag_routing.h; --flagfile is read here, every line checked); a flag no daemon defines, or
//    one the launcher sets itself (--scheduler, --rank), is a usage error: nothing is started,
//    exit 2.
// 2. Start the scheduler with --port, --num_workers, --num_servers (the last two also go to any
//    other daemon defining them) and its routed flags; wait (bounded by listen_timeout) for its
//    line "sieve-scheduler listening on HOST:PORT".
// 3. Start servers 0..S-1 and workers 0..W-1 with --scheduler=127.0.0.1:PORT --rank=i and their
//    routed flags. Output is relayed with [scheduler] / [server i] / [worker i] prefixes.
// 4. Exit 0 once every process has exited 0. If a server or worker exits non-zero or by a
//    signal while the scheduler runs and fewer than max_restarts restarts were made in this job,
//    print "restarting worker 1 (killed by signal 9 (Killed)), restart 1 of 3" and start it
//    again with the same command line (same --rank: a server restores its checkpoint, and is not
//    restarted without --checkpoint_dir; a worker rejoins the running job). Otherwise a failed
//    process stops all others (SIGTERM, then SIGKILL after stop_timeout): print which one failed
//    and how, exit 1
//    (2 when it exited 2, a daemon's usage error such as a bad flag: never restarted either).
//    The scheduler is never restarted. If the scheduler exits 0 and others are still running
//    after finish_grace, stop them and exit 1. SIGINT/SIGTERM/SIGHUP to the launcher stops
//    everyone and exits 128 + signal. Every child dies with the launcher (child_process.h).
// 5. Progress (options.progress): the workers' progress lines (base/progress_line.h) are not
//    relayed but summed up by JobProgress (job_progress.h), with the scheduler's registration
//    lines while the job forms. Live: one status line on out_fd, redrawn in place (out_fd should
//    be a terminal); lines: the same text as a launcher message every 10 s; off: the workers'
//    progress lines are relayed like any other line.
// Launcher messages go to err_fd prefixed "sieve launch: ". Nothing is left running on return.
#ifndef SIEVE_DEPLOY_LOCAL_LAUNCHER_H_
#define SIEVE_DEPLOY_LOCAL_LAUNCHER_H_

#include "deploy/local/launch_options.h"

namespace sieve {

int Launch(const LaunchOptions& options, int out_fd = 1, int err_fd = 2);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_LAUNCHER_H_
