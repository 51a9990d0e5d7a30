#!/usr/bin/python3
"""Scale harness: jobs of W workers and S servers as processes on this machine
(loopback), synthetic model of D parameters, small per-worker compute, and what each cell costs.

For each cell (W, S, D) it starts the real daemons the way `sieve launch` does (sieve-scheduler,
then the port in its --port_file, then S sieve-server and W sieve-worker processes), samples every
process from /proc while the job runs, reaps each one with wait4() (its rusage), reads the
scheduler's job status (its --status_file, docs/protocol.md "Job status"), and reports:

  formed_s           first process start -> the harness first read a job status of phase
                     JOB_RUNNING (every node registered, the node table sent: the scheduler
                     rewrites its status file at once on that change; the file is polled every
                     STATUS_POLL_S)
  start_barrier_s    first process start -> the last worker past the start barrier: each worker
                     writes its summary (--summary_out, a file in the job's directory) at T, the
                     file's mtime, as its training loop ends, and its `seconds` is that loop's
                     time, whose clock starts right after the start barrier
                     (worker/trainer/trainer.cc), so the worker passed it at
                     T - seconds - barrier_probe_s; start_barrier_min_s: the first worker
  barrier_p50_ms     --barrier_probe=N (default 100) more workers' barriers right after the start
  barrier_p99_ms     barrier, each timed on every worker from its Barrier() call to its return
                     (sieve-worker --barrier_probe, worker/trainer/barrier_probe.h): the largest
                     over the workers of each worker's nearest-rank p50 and p99 (the worker that
                     waited longest: the first to enter waits for the last); barrier_p50_ms_median
                     the median over the workers of their p50; barrier_probes: N, checked on every
                     worker
  round_s            median over workers of seconds / rounds (summary); mean_round_s: median
                     of the workers' own mean_round_s
  per process        exit status; peak RSS: ru_maxrss of wait4 where it exceeds the harness's own
                     RSS at the fork (ru_maxrss survives exec, so below that it is the harness's),
                     else the largest VmHWM sample of /proc/<pid>/status; the largest Pss and
                     Anonymous samples of /proc/<pid>/smaps_rollup (Pss shares the pages of the
                     libraries every process maps); CPU seconds (ru_utime + ru_stime); file
                     descriptors and sockets (/proc/<pid>/fd entries, `socket:` links) at steady
                     state (the sample nearest the middle of the steady window) and their maximum
                     over the run
  steady state       from the last worker's start barrier plus 10 % of the training time to the
                     first worker's summary; scheduler_cpu_per_s = the scheduler's CPU time
                     (ns, /proc/<pid>/task/*/schedstat) gained over the window / its wall time;
                     server_cpu_per_round_s likewise for each server, times round_s (max over
                     servers)
  heartbeats_per_s_nominal  (W + S) * 1000 / --heartbeat_interval_ms: what the nodes send;
                     heartbeats_received / heartbeats_per_s: the scheduler's count (`heartbeats`
                     of its final job status) and that over the scheduler's lifetime

Checks (a failed one fails the cell, and the script exits 1): every daemon exited 0; every worker
and server wrote its summary; every worker ran --rounds rounds (and --barrier_probe
barriers) and every server completed --rounds rounds; every server applied exactly W * rounds
pushes (each worker pushes to every shard every round); the servers' pushed_sum adds up to the
workers' pushed_sum (float sums of the same values in another order: relative difference <= 1e-5).

Results: results/bench/scale-<timestamp>.json (or --out) and a table on stdout.

--netns (root, iproute2; cells of W + S + 1 <= 41 nodes, i.e. up to 32 x 8): every process of a
cell in its own network namespace with its own address on one bridge (bench/scale/netns.py,
deploy/local/netns/run's topology), daemons given --bind/--host of their namespace's address and
the scheduler's; --link=RATE shapes each node's link in both directions (tbf on its eth0 and on its
bridge port: a full-duplex RATE per node; the download's queue --link_queue, 100 ms as at a switch
port, the upload's --upload_queue, by default a real host's 1000 frames, see netns.py). The
namespaces and veths are created per cell and removed after it, also on a failure, Ctrl-C or
SIGTERM. The cell records "netns" (the topology and shaping) and, per process, its address and the
local and peer addresses of its established TCP sockets (from /proc/<pid>/net/tcp, which shows the
process's own namespace).

usage: run.py [--build=build] [--cells=4x1,16x4] [--d=1e6[,1e8]] [--rounds=200]
              [--compute=2ms] [--density=0.001] [--barrier_probe=100] [--sample_s=0.1]
              [--out=FILE] [--timeout_s=600] [--netns [--link=1gbit]]
"""
import argparse
import json
import math
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
STATUS_POLL_S = 0.005  # the job status file while the job forms (a stat() each)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402 (bench/scale/netns.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import daemon_ports  # noqa: E402 (bench/common/daemon_ports.py)


def proc_cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)
    except (OSError, IndexError, ValueError):
        return None


def proc_run_ns(pid):
    """CPU time of the live threads in ns (/proc/<pid>/task/*/schedstat), finer than the ticks of
    /proc/<pid>/stat; a thread that exited takes its time with it, so it is for rates over a
    window in which no thread comes or goes (steady state)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total


def status_kb(pid, field):
    """A kB field of /proc/<pid>/status (VmHWM, VmRSS), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith(field + ":")), None)
    except (OSError, ValueError, IndexError):
        return None


def proc_pss_anon_kb(pid):
    """(Pss, Anonymous) of /proc/<pid>/smaps_rollup in kB: shared library pages (the CUDA
    libraries every worker maps) count once across the processes in Pss, per process in RSS."""
    pss = anon = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Anonymous:"):
                    anon = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None, None
    return pss, anon


def proc_fds(pid):
    """(open descriptors, of which sockets) or None once the process is gone."""
    d = f"/proc/{pid}/fd"
    try:
        names = os.listdir(d)
    except OSError:
        return None
    sockets = 0
    for n in names:
        try:
            sockets += os.readlink(f"{d}/{n}").startswith("socket:")
        except OSError:
            pass
    return len(names), sockets


def _hex_ipv4(text):
    """The address of /proc/net/tcp's "0100007F:1F90" (host byte order, little-endian here)."""
    v = int(text.split(":")[0], 16)
    return ".".join(str((v >> s) & 255) for s in (0, 8, 16, 24))


def proc_tcp_addrs(pid):
    """(local, peer) IPv4 addresses of the established TCP sockets in pid's network namespace
    (/proc/<pid>/net/tcp), or None once it is gone. With --netns the namespace is the
    process's own."""
    local, peer = set(), set()
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            next(f)
            for line in f:
                w = line.split()
                if len(w) > 3 and w[3] == "01":  # TCP_ESTABLISHED
                    local.add(_hex_ipv4(w[1]))
                    peer.add(_hex_ipv4(w[2]))
    except (OSError, StopIteration, ValueError):
        return None
    return local, peer


class Daemon:
    """One process: output lines with the time the harness read them, and its wait4() result."""

    def __init__(self, role, rank, argv, address=None):
        self.role, self.rank = role, rank
        self.address = address  # --netns: its namespace's address, whose sockets it samples
        self.tcp_local, self.tcp_peer = set(), set()
        self.name = role if rank is None else f"{role}{rank}"
        self.t_start = time.time()
        # ru_maxrss survives exec: it is at least what the forked copy of this harness had.
        self.harness_rss_kb = status_kb("self", "VmRSS") or 0
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace")
        self.pid = self.p.pid
        self.lines = []  # (time read, line)
        self.exit = None  # exit status (negative: killed by that signal)
        self.rusage = None
        self.t_exit = None
        self.samples = []  # (t, cpu_s, hwm_kb, fds, sockets, run_ns, pss_kb, anon_kb)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.reaper = threading.Thread(target=self._reap, daemon=True)
        self.reaper.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def _reap(self):
        # wait4, not Popen.wait: the child's own rusage (peak RSS, CPU), which only the reaper gets.
        _, status, ru = os.wait4(self.pid, 0)
        self.t_exit = time.time()
        self.rusage = ru
        self.exit = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.exit  # so that Popen never waits for it again

    def alive(self):
        return self.exit is None

    def wait_port_file(self, path, timeout):
        """The HOST:PORT this scheduler wrote to its --port_file `path`, or None when it exited
        first or `timeout` passed."""
        return daemon_ports.wait_port_file(path, timeout, self.alive, 0.01)

    def sample(self, now):
        cpu, hwm, fds = proc_cpu_s(self.pid), status_kb(self.pid, "VmHWM"), proc_fds(self.pid)
        ns = proc_run_ns(self.pid)
        pss, anon = proc_pss_anon_kb(self.pid)
        if cpu is not None and fds is not None and self.alive():
            self.samples.append((now, cpu, hwm, fds[0], fds[1], ns, pss, anon))
        if self.address is not None:
            addrs = proc_tcp_addrs(self.pid)
            if addrs is not None and self.alive():
                self.tcp_local |= addrs[0]
                self.tcp_peer |= addrs[1]

    def kill(self):
        # os.kill, not Popen.kill: Popen polls (waitpid) before it signals, and a poll that reaps
        # a child which just died takes it from the reaper's wait4, which then never sets exit
        # (the harness looped until its caller's timeout). Until the reaper has waited, the pid
        # is this child's (a zombie at worst).
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass


class StatusWatch:
    """The scheduler's job status file (--status_file; JSON, replaced atomically: at once on a
    change of phase, at most once a second while running, last with the final status). A thread
    polls it every STATUS_POLL_S until it shows phase JOB_RUNNING and keeps when it first did
    (running_at); final() reads it once the scheduler is gone."""

    def __init__(self, path):
        self.path = path
        self.running_at = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def read(self):
        """The status now (a dict), or None while there is none."""
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _run(self):
        seen = None
        while not self.stop.is_set():
            try:
                st = os.stat(self.path)
                version = (st.st_ino, st.st_mtime_ns, st.st_size)
            except OSError:
                version = None
            if version is not None and version != seen:
                seen = version
                t = time.time()
                status = self.read()
                if status is not None and status.get("phase") == "JOB_RUNNING":
                    self.running_at = t
                    return
            self.stop.wait(STATUS_POLL_S)

    def final(self):
        """The scheduler's last status (call after it exited): its final one when it ended the
        job (phase JOB_FINISHED or JOB_FAILED), else None."""
        self.stop.set()
        self.thread.join(timeout=5)
        status = self.read()
        if status is None or status.get("phase") not in ("JOB_FINISHED", "JOB_FAILED"):
            return None
        return status


def summary_path(job_dir, role, rank):
    """Where a server's or worker's --summary_out (summary_flag) puts its summary."""
    return os.path.join(job_dir, f"{role}-{rank}.json")


def summary_flag(job_dir):
    return "--summary_out=" + summary_path(job_dir, "{role}", "{rank}")


def summaries(procs, job_dir, problems):
    """{name: its summary's fields (the JSON file it wrote), and _written_at: the file's mtime,
    when it was written (at the end of a worker's training loop)}."""
    out = {}
    for p in procs:
        path = summary_path(job_dir, p.role, p.rank)
        try:
            with open(path) as f:
                fields = json.load(f)
            written_at = os.stat(path).st_mtime_ns * 1e-9
        except (OSError, ValueError):
            problems.append(f"{p.name}: no summary")
            continue
        out[p.name] = {**fields, "_written_at": written_at}
    return out


def parse_cells(text):
    cells = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)\s*", item)
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            sys.exit(f"scale: bad cell {item!r} (WxS, e.g. 4x1)")
        cells.append((int(m.group(1)), int(m.group(2))))
    return cells


def parse_ds(text):
    out = []
    for item in text.split(","):
        try:
            d = int(float(item))
        except ValueError:
            d = 0
        if d < 1:
            sys.exit(f"scale: bad --d value {item!r}")
        out.append(d)
    return out


def start_job(a, w, s, d, job_dir, hosts=None):
    """The job's daemons: on loopback, or with hosts (netns.Hosts) node i (0 the scheduler, then
    the servers, then the workers) in namespace i, bound to and advertising its address. The
    scheduler writes its port file and its job status (status.json) in job_dir, the servers and
    workers their summaries (summary_path)."""
    b = a.build
    token = "scale-" + secrets.token_hex(8)
    hb = [f"--heartbeat_interval_ms={a.heartbeat_interval_ms}"]

    def daemon(role, rank, i, argv, where):
        if hosts is None:
            return Daemon(role, rank, [*argv[:1], *where("127.0.0.1"), *argv[1:]])
        ip = hosts.ip(i)
        return Daemon(role, rank, hosts.wrap(i, [*argv[:1], *where(ip), *argv[1:]]), ip)

    port_file = os.path.join(job_dir, "scheduler.port")
    sched = daemon("scheduler", None, 0, [
        f"{b}/scheduler/sieve-scheduler", f"--num_servers={s}", f"--num_workers={w}",
        f"--num_params={d}", f"--job_token={token}", f"--port_file={port_file}",
        f"--status_file={os.path.join(job_dir, 'status.json')}"],
        lambda ip: ["--port=0", f"--bind={ip}", f"--host={ip}"])
    procs = [sched]
    addr = sched.wait_port_file(port_file, 30)
    if addr is None:
        if not sched.alive():
            return procs, f"the scheduler exited {sched.exit} before writing its port file"
        return procs, "the scheduler wrote no port file within 30 s"

    def where(ip):
        return [f"--scheduler={addr}", f"--bind={ip}", f"--host={ip}"]
    common = ["--model=synthetic", f"--num_params={d}", "--seed=1", f"--job_token={token}"]
    for r in range(s):
        procs.append(daemon("server", r, 1 + r, [
            f"{b}/server/sieve-server", *common, *hb, f"--rank={r}", "--consistency=bsp",
            "--server_threads=1", summary_flag(job_dir)], where))
    for r in range(w):
        procs.append(daemon("worker", r, 1 + s + r, [
            f"{b}/worker/sieve-worker", *common, *hb, f"--rank={r}", "--device=cpu",
            "--compressor=topk", f"--density={a.density}", f"--rounds_per_epoch={a.rounds}",
            "--epochs=1", "--eval_every=0", "--progress=log", "--blas_threads=1",
            "--kernel_threads=1", *([f"--straggler=delay:{a.compute}"] if a.compute else []),
            *([f"--barrier_probe={a.barrier_probe}"] if a.barrier_probe else []),
            summary_flag(job_dir)], where))
    return procs, None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def window_rate(p, lo, hi):
    """CPU seconds per second of p over [lo, hi] (its first and last samples inside)."""
    pts = [(x[0], x[5]) for x in p.samples if lo <= x[0] <= hi and x[5] is not None]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    return (pts[-1][1] - pts[0][1]) * 1e-9 / (pts[-1][0] - pts[0][0])


def maxof(p, i, scale=1.0):
    vals = [x[i] for x in p.samples if x[i] is not None]
    return max(vals) * scale if vals else None


def at_middle(p, lo, hi):
    pts = [x for x in p.samples if lo <= x[0] <= hi] or p.samples
    if not pts:
        return None, None
    mid = (lo + hi) / 2
    x = min(pts, key=lambda x: abs(x[0] - mid))
    return x[3], x[4]


def run_cell(a, w, s, d):
    job_dir = tempfile.mkdtemp(prefix="sieve-scale-")  # port, status and summary files
    try:
        if not a.netns:
            return run_cell_on(a, w, s, d, None, job_dir)
        cc = None if a.tcp_cc == "default" else a.tcp_cc
        upload = None if a.upload_queue == "same" else a.upload_queue
        with netns.Hosts(w + s + 1, a.link or None, queue=a.link_queue, cc=cc,
                         upload_queue=upload) as hosts:
            print(f"scale: {w + s + 1} namespaces {hosts.prefix}-n0..n{w + s} on "
                  f"{hosts.subnet}.0/24, link {a.link or 'unshaped'}", flush=True)
            cell = run_cell_on(a, w, s, d, hosts, job_dir)
        cell["netns"] = hosts.describe()
        return cell
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


class LinkSampler:
    """--netns with --link: tc's byte counters of every node's download and of the servers'
    uploads every period seconds while the job runs (a thread; one tc call per server and one
    for the switch per sample)."""

    def __init__(self, hosts, servers, period):
        self.hosts, self.period = hosts, period
        hosts.upload_nodes = set(range(1, 1 + servers))
        self.samples = []  # (t, {node: (down bytes, up bytes or None)})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            t = time.time()
            self.samples.append((t, self.hosts.sent()))
            self.stop.wait(self.period)

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=10)
        self.samples.append((time.time(), self.hosts.sent()))
        self.final = self.hosts.sent(all=True)  # every node's upload too, once

    def rate(self, node, which, lo, hi):
        """Per second over [lo, hi]: bytes through node's download (which=0) or upload (1),
        packets dropped there (2, 3)."""
        pts = [(t, x[node][which]) for t, x in self.samples
               if lo <= t <= hi and x.get(node) and x[node][which] is not None]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def total(self, node, which):
        x = self.final.get(node)
        return x[which] if x else None


def run_cell_on(a, w, s, d, hosts, job_dir):
    print(f"scale: cell W={w} S={s} D={d:g} rounds={a.rounds} ...", flush=True)
    t0 = time.time()
    links = LinkSampler(hosts, s, a.link_sample_s) if hosts is not None and hosts.rate else None
    status = StatusWatch(os.path.join(job_dir, "status.json"))
    procs, err = start_job(a, w, s, d, job_dir, hosts)
    deadline = t0 + a.timeout_s
    timed_out = False
    # --netns: the congestion controls of server 0's and worker 0's connections, read once both
    # are connected to everyone they talk to (server 0 to the scheduler and the W workers, worker
    # 0 to the scheduler and the S servers): a check that --tcp_cc took effect, on the accepted
    # sockets too. Tried every 0.5 s (two `ss` calls), not at every sample.
    cc_seen, cc_next = None, t0
    while any(p.alive() for p in procs):
        now = time.time()
        for p in procs:
            p.sample(now)
        if hosts is not None and cc_seen is None and len(procs) == 1 + s + w and now >= cc_next:
            cc_next = now + 0.5
            n_srv, cc_srv = hosts.congestion_controls(1)
            n_wkr, cc_wkr = hosts.congestion_controls(1 + s)
            if n_srv >= 1 + w and n_wkr >= 1 + s:
                cc_seen = sorted(set(cc_srv) | set(cc_wkr))
        failed = [p for p in procs if p.exit not in (None, 0)]
        if failed and not err:  # like sieve launch: one daemon failed, stop the others
            err = f"{failed[0].name} exited {failed[0].exit}; the others were stopped"
        if err or now > deadline:
            timed_out = timed_out or not err
            for p in procs:
                p.kill()
        time.sleep(a.sample_s)
    for p in procs:
        p.reaper.join(timeout=10)
        p.reader.join(timeout=5)
    if links is not None:
        links.finish()
    wall = time.time() - t0
    sched = procs[0]
    servers = [p for p in procs if p.role == "server"]
    workers = [p for p in procs if p.role == "worker"]

    problems = [err] if err else []
    if timed_out:
        problems.append(f"the job ran past --timeout_s={a.timeout_s}; killed")
    cc_cell = {}
    if hosts is not None:
        want = hosts.cc or hosts.default_cc
        cc_cell = {"tcp_cc": want, "tcp_cc_seen": cc_seen}
        if cc_seen is not None and cc_seen != [want]:
            problems.append(f"TCP congestion control {cc_seen} on the nodes' connections, "
                            f"expected {want}")

    formed_s = status.running_at - t0 if status.running_at is not None else None
    # The scheduler's final job status: the HEARTBEATs it received (and echoed) over its life (a
    # 64-bit count, a string in the JSON).
    final = status.final()
    heartbeats = int(final["heartbeats"]) if final is not None else None
    sched_life = (sched.t_exit - sched.t_start) if sched.t_exit else None

    wsum = summaries(workers, job_dir, problems)
    ssum = summaries(servers, job_dir, problems)
    barrier_at, round_s, mean_round, probe_p50, probe_p99 = [], [], [], [], []
    for name, kv in wsum.items():
        secs, rounds = float(kv.get("seconds", "nan")), int(kv.get("rounds", -1))
        # The training loop's clock starts after the barrier probe (worker/trainer/trainer.cc).
        barrier_at.append(kv["_written_at"] - secs - float(kv.get("barrier_probe_s", 0)))
        if int(kv.get("barrier_probes", 0)) != a.barrier_probe:
            problems.append(f"{name}: barrier_probes={kv.get('barrier_probes', 0)}, expected "
                            f"{a.barrier_probe}")
        elif a.barrier_probe:
            probe_p50.append(float(kv["barrier_p50_ms"]))
            probe_p99.append(float(kv["barrier_p99_ms"]))
        if rounds > 0:
            round_s.append(secs / rounds)
        if "mean_round_s" in kv:
            mean_round.append(float(kv["mean_round_s"]))
        if rounds != a.rounds:
            problems.append(f"{name}: rounds={rounds}, expected {a.rounds}")
    for name, kv in ssum.items():
        if int(kv.get("rounds", -1)) != a.rounds:
            problems.append(f"{name}: rounds={kv.get('rounds')}, expected {a.rounds}")
        if int(kv.get("applied", -1)) != w * a.rounds:
            problems.append(f"{name}: applied={kv.get('applied')}, expected W*rounds = "
                            f"{w * a.rounds}")
    exit_ok = all(p.exit == 0 for p in procs)
    for p in procs:
        if p.exit != 0:
            tail = " | ".join(l for _, l in p.lines[-3:])
            problems.append(f"{p.name}: exit {p.exit}: {tail}")
    pushed_w = sum(float(kv["pushed_sum"]) for kv in wsum.values() if "pushed_sum" in kv)
    pushed_s = sum(float(kv["pushed_sum"]) for kv in ssum.values() if "pushed_sum" in kv)
    pushed_ok = (len(wsum) == w and len(ssum) == s and
                 abs(pushed_w - pushed_s) <= 1e-5 * max(1.0, abs(pushed_w)))
    if len(wsum) == w and len(ssum) == s and not pushed_ok:
        problems.append(f"pushed_sum: servers {pushed_s:.9g} != workers {pushed_w:.9g}")
    applied_ok = len(ssum) == s and all(int(kv.get("applied", -1)) == w * a.rounds and
                                        int(kv.get("rounds", -1)) == a.rounds
                                        for kv in ssum.values())
    rounds_ok = len(wsum) == w and all(int(kv.get("rounds", -1)) == a.rounds
                                       for kv in wsum.values())
    # The union per BSP reply, summed over the shards (reply_pairs = Σ per round): between the k
    # pairs one worker pushes (every worker's indices are in it) and the W·k of all of them.
    k = max(1, round(a.density * d))
    union = (sum(int(kv.get("reply_pairs", 0)) for kv in ssum.values()) / a.rounds
             if len(ssum) == s and all("reply_pairs" in kv for kv in ssum.values()) else None)
    union_ok = union is not None and k - 1 <= union <= w * (k + 1)
    if not union_ok:
        problems.append(f"union per reply {union} outside [k, W*k] = [{k}, {w * k}]")

    barrier_last = max(barrier_at) if barrier_at else None
    first_summary = min((kv["_written_at"] for kv in wsum.values()), default=None)
    lo = hi = None
    if barrier_last is not None and first_summary is not None:
        lo = barrier_last + 0.1 * (first_summary - barrier_last)
        hi = first_summary
    rs = median(round_s)

    def rec(p):
        ru = p.rusage
        fds, socks = at_middle(p, lo, hi) if lo is not None else (None, None)
        hwm = [x[2] for x in p.samples if x[2] is not None]
        rate = window_rate(p, lo, hi) if lo is not None else None
        vmhwm = max(hwm) if hwm else None
        # ru_maxrss = max(the harness's RSS at the fork, the daemon's own peak): above the former
        # it is the daemon's exact peak; else the sampled VmHWM (which misses the last sample_s).
        exact = ru is not None and ru.ru_maxrss > p.harness_rss_kb * 1.02
        peak = ru.ru_maxrss if exact else vmhwm
        return {
            "process": p.name, "role": p.role, "rank": p.rank, "pid": p.pid, "exit": p.exit,
            "peak_rss_mb": peak / 1024 if peak is not None else None,
            "peak_rss_source": "ru_maxrss" if exact else "vmhwm_sampled",
            "ru_maxrss_mb": ru.ru_maxrss / 1024 if ru else None,
            "harness_rss_at_fork_mb": p.harness_rss_kb / 1024,
            "vmhwm_mb": vmhwm / 1024 if vmhwm is not None else None,
            "pss_mb_max": maxof(p, 6, 1 / 1024), "anon_mb_max": maxof(p, 7, 1 / 1024),
            "cpu_s": ru.ru_utime + ru.ru_stime if ru else None,
            "steady_cpu_per_s": rate,
            "fds_steady": fds, "sockets_steady": socks,
            "fds_max": max((x[3] for x in p.samples), default=None),
            "sockets_max": max((x[4] for x in p.samples), default=None),
            "samples": len(p.samples),
            "lifetime_s": (p.t_exit - p.t_start) if p.t_exit else None,
            **({"address": p.address, "tcp_local_addrs": sorted(p.tcp_local),
                "tcp_peer_addrs": sorted(p.tcp_peer)} if p.address is not None else {}),
        }

    rows = [rec(p) for p in procs]
    link_cell = {}
    if links is not None:
        # Node i is procs[i] (the scheduler, the servers, the workers). tc's L2 bytes per round
        # at steady state = its byte rate over the steady window times round_s.
        for i, row in enumerate(rows):
            for which, name in ((0, "down"), (1, "up")):
                r = links.rate(i, which, lo, hi) if lo is not None else None
                row[f"link_{name}_bytes_per_s"] = r
                row[f"link_{name}_bytes_per_round"] = r * rs if r is not None and rs else None
                row[f"link_{name}_bytes_total"] = links.total(i, which)
                row[f"link_{name}_dropped_pkts"] = links.total(i, which + 2)
                r = links.rate(i, which + 2, lo, hi) if lo is not None else None
                row[f"link_{name}_dropped_pkts_per_round"] = (r * rs if r is not None and rs
                                                               else None)

        def pick(role, key, how):
            vals = [x[key] for x in rows if x["role"] == role and x.get(key) is not None]
            return how(vals) if vals else None
        link_cell = {
            "link": hosts.rate, "link_bytes_per_s": netns.rate_bytes_per_s(hosts.rate),
            "tbf_burst_bytes": netns.tbf_burst_bytes(hosts.rate),
            "link_samples": len(links.samples),
            "server_link_out_bytes_per_round": pick("server", "link_up_bytes_per_round", max),
            "server_link_in_bytes_per_round": pick("server", "link_down_bytes_per_round", max),
            "worker_link_down_bytes_per_round": pick("worker", "link_down_bytes_per_round",
                                                     statistics.median),
            # packets the token buckets dropped (queue over tbf's --link_queue; TCP retransmits
            # them),
            # over the run (start-up's dense pulls included) and per round at steady state
            "link_dropped_pkts": sum(x.get(f"link_{n}_dropped_pkts") or 0 for x in rows
                                     for n in ("down", "up")),
            "link_dropped_pkts_per_round": sum(
                x.get(f"link_{n}_dropped_pkts_per_round") or 0 for x in rows
                for n in ("down", "up")),
        }
    by_role = {r: [x for x in rows if x["role"] == r] for r in ("scheduler", "server", "worker")}

    def mx(role, key):
        vals = [x[key] for x in by_role[role] if x[key] is not None]
        return max(vals) if vals else None

    server_rates = [x["steady_cpu_per_s"] for x in by_role["server"]
                    if x["steady_cpu_per_s"] is not None]
    probes_ok = len(wsum) == w and (not a.barrier_probe or len(probe_p50) == w)
    ok = (not problems and exit_ok and applied_ok and rounds_ok and pushed_ok and union_ok and
          probes_ok)
    cell = {
        "workers": w, "servers": s, "num_params": d, "rounds": a.rounds,
        "compute": a.compute, "density": a.density,
        "heartbeat_interval_ms": a.heartbeat_interval_ms,
        "wall_s": wall,
        "formed_s": formed_s,
        "start_barrier_s": barrier_last - t0 if barrier_last is not None else None,
        "start_barrier_min_s": min(barrier_at) - t0 if barrier_at else None,
        "round_s": rs, "mean_round_s": median(mean_round),
        "barrier_probes": a.barrier_probe,
        "barrier_p50_ms": max(probe_p50) if probe_p50 else None,
        "barrier_p99_ms": max(probe_p99) if probe_p99 else None,
        "barrier_p50_ms_median": median(probe_p50),
        "steady_window_s": (hi - lo) if lo is not None else None,
        "scheduler_cpu_per_s": rows[0]["steady_cpu_per_s"],
        "server_cpu_per_round_s": (max(server_rates) * rs) if server_rates and rs else None,
        "heartbeats_per_s_nominal": ((w + s) * 1000.0 / a.heartbeat_interval_ms
                                     if a.heartbeat_interval_ms > 0 else 0.0),
        "heartbeats_received": heartbeats,
        "heartbeats_per_s": (heartbeats / sched_life if heartbeats is not None and sched_life
                             else None),
        "scheduler_rss_mb": mx("scheduler", "peak_rss_mb"),
        "server_rss_mb_max": mx("server", "peak_rss_mb"),
        "worker_rss_mb_max": mx("worker", "peak_rss_mb"),
        "worker_pss_mb_max": mx("worker", "pss_mb_max"),
        "worker_anon_mb_max": mx("worker", "anon_mb_max"),
        "server_anon_mb_max": mx("server", "anon_mb_max"),
        "scheduler_fds": mx("scheduler", "fds_steady"),
        "server_fds_max": mx("server", "fds_steady"),
        "worker_fds_max": mx("worker", "fds_steady"),
        "scheduler_sockets": mx("scheduler", "sockets_steady"),
        "server_sockets_max": mx("server", "sockets_steady"),
        "worker_sockets_max": mx("worker", "sockets_steady"),
        "union_pairs_per_reply": union,
        "union_of_wk": union / (w * k) if union is not None else None,
        "checks": {"exit_0": exit_ok, "applied_exact": applied_ok, "rounds_exact": rounds_ok,
                   "union_in_bounds": union_ok,
                   "pushed_sum_match": pushed_ok, "barrier_probes": probes_ok},
        "pushed_sum_workers": pushed_w, "pushed_sum_servers": pushed_s,
        "server_checksums": {k: v.get("checksum") for k, v in ssum.items()},
        "worker_summaries": {k: {x: y for x, y in v.items() if x != "_written_at"}
                             for k, v in wsum.items()},
        "server_summaries": {k: {x: y for x, y in v.items() if x != "_written_at"}
                             for k, v in ssum.items()},
        **link_cell,
        **cc_cell,
        "problems": problems,
        "pass": ok,
        "processes": rows,
    }
    if not ok:
        for line in problems:
            print(f"scale:   FAIL {line}", flush=True)
    return cell


def power_fit(ns, ts):
    """Least-squares exponent p of t ~ c * N^p over the points (ns, ts), all > 0; None with fewer
    than two distinct N."""
    pts = [(math.log(n), math.log(t)) for n, t in zip(ns, ts) if n > 0 and t and t > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return (sum((x - mx) * (y - my) for x, y in pts) /
            sum((x - mx) ** 2 for x, _ in pts))


def nlogn_exponent(n_lo, n_hi):
    """The exponent N log N grows with between n_lo and n_hi (> 1): log(f(hi)/f(lo)) /
    log(hi/lo) for f(N) = N ln N."""
    return math.log((n_hi * math.log(n_hi)) / (n_lo * math.log(n_lo))) / math.log(n_hi / n_lo)


def growth_lines(cells):
    """Per D with cells of at least two node counts N = W + S + 1: the fitted exponents of the
    time to formed, to the start barrier and of the barrier probe's p50 against N log N's over
    the same range."""
    lines = []
    for d in sorted({c["num_params"] for c in cells}):
        cs = [c for c in cells if c["num_params"] == d and c["pass"]]
        ns = [c["workers"] + c["servers"] + 1 for c in cs]
        if len(set(ns)) < 2:
            continue
        ref = nlogn_exponent(min(ns), max(ns))
        parts = []
        for key, name in (("formed_s", "formed"), ("start_barrier_s", "barrier"),
                          ("barrier_p50_ms", "barrier p50")):
            p = power_fit(ns, [c.get(key) for c in cs])  # None: not measured (older runs)
            if p is not None:
                verdict = "within" if p <= ref else "ABOVE"
                parts.append(f"{name} ~ N^{p:.2f} ({verdict} O(N log N))")
        lines.append(f"growth D={d:g} N={min(ns)}..{max(ns)}: " + ", ".join(parts) +
                     f"; N log N over this range ~ N^{ref:.2f}")
    return lines


def verdict(tag, bad):
    """The end of a test of this harness (tests/bench/scale/: smoke_test.py, n64_test.py,
    netns_test.py): each failure in `bad` on its own line, then PASS or FAIL; the exit status."""
    for line in bad:
        print(f"{tag}: FAIL", line)
    print(f"{tag}:", "FAIL" if bad else "PASS")
    return 1 if bad else 0


def fmt(x, scale=1.0, digits=2):
    return "-" if x is None else f"{x * scale:.{digits}f}"


def print_table(cells):
    head = (f"{'W':>3} {'S':>3} {'D':>8} {'pass':>4} {'formed s':>8} {'barrier s':>9} "
            f"{'round ms':>8} {'bar p50/p99 ms':>14} {'sched %cpu':>10} {'hb/s':>6} "
            f"{'union/Wk':>8} {'srv cpu ms/rd':>13} "
            f"{'sched MB':>8} "
            f"{'srv MB':>7} {'wkr MB':>7} {'wkr anon':>8} {'fds sch/srv/wkr':>15} "
            f"{'socks sch/srv/wkr':>17}")
    print(head)
    for c in cells:
        fds = (f"{c['scheduler_fds'] or '-'}/{c['server_fds_max'] or '-'}/"
               f"{c['worker_fds_max'] or '-'}")
        socks = (f"{c['scheduler_sockets'] or '-'}/{c['server_sockets_max'] or '-'}/"
                 f"{c['worker_sockets_max'] or '-'}")
        probe = f"{fmt(c.get('barrier_p50_ms'), 1, 1)}/{fmt(c.get('barrier_p99_ms'), 1, 1)}"
        print(f"{c['workers']:>3} {c['servers']:>3} {c['num_params']:>8.0e} "
              f"{'yes' if c['pass'] else 'NO':>4} {fmt(c['formed_s']):>8} "
              f"{fmt(c['start_barrier_s']):>9} {fmt(c['round_s'], 1e3):>8} "
              f"{probe:>14} "
              f"{fmt(c['scheduler_cpu_per_s'], 100):>10} {fmt(c['heartbeats_per_s'], 1, 1):>6} "
              f"{fmt(c['union_of_wk'], 1, 3):>8} "
              f"{fmt(c['server_cpu_per_round_s'], 1e3, 3):>13} "
              f"{fmt(c['scheduler_rss_mb'], 1, 1):>8} {fmt(c['server_rss_mb_max'], 1, 1):>7} "
              f"{fmt(c['worker_rss_mb_max'], 1, 1):>7} {fmt(c['worker_anon_mb_max'], 1, 1):>8} "
              f"{fds:>15} {socks:>17}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cells", default="4x1", help="comma-separated WxS, e.g. 4x1,16x4")
    ap.add_argument("--d", default="1e6", help="comma-separated D values, e.g. 1e6,1e8")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--compute", default="2ms",
                    help="per-round emulated compute of each worker (--straggler=delay:T); "
                         "empty = none")
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--barrier_probe", type=int, default=100,
                    help="workers' barriers timed after the start barrier (sieve-worker "
                         "--barrier_probe) for barrier_p50_ms / barrier_p99_ms; 0 = none")
    ap.add_argument("--heartbeat_interval_ms", type=int, default=1000)
    ap.add_argument("--sample_s", type=float, default=0.1)
    ap.add_argument("--timeout_s", type=float, default=600, help="per cell")
    ap.add_argument("--out", default="", help="JSON file (default results/bench/scale-<ts>.json)")
    ap.add_argument("--netns", action="store_true",
                    help="every process in its own network namespace on one bridge (root; "
                         f"W + S + 1 <= {netns.MAX_NODES})")
    ap.add_argument("--link", default="",
                    help="with --netns: each node's link rate (tc tbf both ways), e.g. 1gbit, "
                         "10gbit, 100mbit; empty = unshaped")
    ap.add_argument("--link_queue", default="100ms",
                    help="with --netns --link: the download token bucket's queue (the switch "
                         "port's) as tc's latency (a packet that would wait longer is dropped); "
                         "deploy/local/netns's 100ms")
    ap.add_argument("--upload_queue", default=netns.HOST_QUEUE,
                    help="with --netns --link: the upload token bucket's queue (the node's own "
                         f"qdisc): '{netns.HOST_QUEUE}' = {netns.HOST_QUEUE_FRAMES} frames "
                         "(Linux's default txqueuelen), 'same' = --link_queue "
                         "(deploy/local/netns's topology), or a tc time such as 100ms")
    ap.add_argument("--tcp_cc", default="cubic",
                    help="with --netns: the TCP congestion control of every node's connections "
                         "(a route metric in each namespace); 'default' = the kernel's default "
                         "(BBR on some machines of this kind, CUBIC on most Linux)")
    ap.add_argument("--link_sample_s", type=float, default=0.25,
                    help="with --netns --link: period of the tc byte counters' samples")
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("scale: --rounds must be >= 1")
    if a.barrier_probe < 0:
        sys.exit("scale: --barrier_probe must be >= 0")
    for exe in ("scheduler/sieve-scheduler", "server/sieve-server", "worker/sieve-worker"):
        if not os.access(f"{a.build}/{exe}", os.X_OK):
            sys.exit(f"scale: {a.build}/{exe} missing (build it first: scripts/setup)")
    cells = parse_cells(a.cells)
    ds = parse_ds(a.d)
    if a.link and not a.netns:
        ap.error("--link needs --netns")
    if a.netns:
        try:
            if a.link:
                netns.rate_bytes_per_s(a.link)
            if a.tcp_cc != "default":
                netns.check_congestion_control(a.tcp_cc)
            netns.check_queue(a.link_queue, "--link_queue")
            if a.upload_queue != "same":
                netns.check_queue(a.upload_queue, "--upload_queue")
            big = [f"{w}x{s}" for w, s in cells if w + s + 1 > netns.MAX_NODES]
            if big:
                raise netns.NetnsError(
                    f"--netns hosts are for cells of W + S + 1 <= {netns.MAX_NODES} nodes (up to "
                    f"32 x 8); {', '.join(big)} is larger")
            netns.check_environment()
        except netns.NetnsError as e:
            print(f"scale: {e}", file=sys.stderr)
            return 2

        def terminated(signum, frame):  # SIGTERM: unwind, so that the namespaces are removed
            raise SystemExit(143)
        signal.signal(signal.SIGTERM, terminated)
    load_before = open("/proc/loadavg").read().split()[:3]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results = [run_cell(a, w, s, d) for d in ds for w, s in cells]
    load_after = open("/proc/loadavg").read().split()[:3]
    out = a.out or time.strftime("results/bench/scale-%Y%m%d-%H%M%S.json")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    doc = {"bench": "scale", "started": started, "cpus": os.cpu_count(),
           "load_before": load_before, "load_after": load_after,
           "argv": sys.argv[1:], "cells": results, "pass": all(c["pass"] for c in results)}
    if a.netns:
        doc["netns_link"] = a.link or "unshaped"
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print()
    print_table(results)
    for line in growth_lines(results):
        print(line)
    print(f"\nload average before {' '.join(load_before)}, after {' '.join(load_after)} "
          f"({os.cpu_count()} CPUs)")
    print(f"{'PASS' if doc['pass'] else 'FAIL'}: every daemon exited 0, applied = W x rounds on "
          "every server, pushed sums match, every worker ran the barrier probe" if doc["pass"]
          else "FAIL: see the lines above")
    print("json:", out)
    return 0 if doc["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
