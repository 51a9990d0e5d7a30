"""Chaos harness library: a sieve job (`sieve launch`, or deploy/local/netns/run) under a random
schedule of faults, and the invariants checked at its end.

Contract
--------
* `make_schedule(config)` draws a fault schedule from `config["seed"]` alone (random.Random; the
  same config gives the same schedule on any machine). A schedule is a JSON-ready dict: the job's
  config and `events`, each `{"i", "at", "kind", "role", "rank", "hold"}`: `at` is seconds after
  the job started (a lower bound: an event waits until the job is healthy again after the
  previous one, see `Injector`), `hold` the seconds a pause, a blocked checkpoint directory, a
  partition or a slow link lasts. `run.py` writes it to OUT/schedule.json before the job starts;
  `--replay` reads it back.
* Fault kinds (`KINDS`): kill_worker, kill_server (SIGKILL; `sieve launch --max_restarts` starts
  a new process under the rank: a worker rejoins, a server is rebuilt from its backup copies under
  --replication or restores its checkpoint), double_kill_server (the new process killed again
  while it is being rebuilt), pause_short / pause_long (SIGSTOP, then SIGCONT after `hold`, shorter
  / longer than the heartbeat timeout), ckpt_unwritable (the servers' checkpoint directory cannot
  be written for `hold` seconds: chmod 0500 as a normal user; as root, where permissions do not
  stop writes, the directory is moved aside and a plain file put at its path, so every write
  there fails with ENOTDIR), kill_scheduler / term_scheduler (SIGKILL / SIGTERM of the scheduler:
  the job must fail and every process exit within a bound; always the last event), partition (a
  server's or worker's link drops every packet both ways for `hold` seconds, 0.2-0.5 x the
  heartbeat timeout: tc's blackhole qdisc on the node's eth0 and on its switch port) and
  slow_link (the link limited to `SLOW_LINK_RATE` both ways for `hold` = 1-3 s: tc tbf); their
  events record the commands (`how`) and the measured length (`held_s`). Both link kinds need
  the netns mode (one network namespace per node); the loopback modes skip them
  (`SKIPPED_KINDS`), the netns mode skips the kinds that need a restarted process
  (`NETNS_SKIPPED_KINDS`); a schedule's `skipped_kinds` says which applied to it.
* Modes (`MODES`): the daemon flags of the job and the kinds it draws from. The loopback modes run
  `sieve launch`; the netns mode (`"launcher": "netns"`) runs deploy/local/netns/run, every node
  in its own namespace (PREFIX-n0 the scheduler, PREFIX-n1.. the servers by rank, then the
  workers; PREFIX-sw the switch with one port p<i> per node i), unshaped, restarting nothing.
* `Job` runs one job and collects: its exit code, the scheduler's job status (--status_file, read
  as data), per-process RSS samples (/proc/PID/status VmRSS), the number of output lines per
  process per second (counted from the launcher's `[role rank]` prefixes, which netns/run prints
  alike; no message text is ever matched), and the pid of every daemon it saw (the launcher's
  children: `ip netns exec` execs the daemon, so under netns/run too).
* `check(...)` returns the invariants as a list of `{"name", "ok", "detail"}`; `ok` is True,
  False (a violation) or None (not applicable to this run, with the reason in `detail`). Every
  check reads files the run left (summaries, dumps, metrics, status, samples), so a finished run's
  directory can be checked again (`run.py --recheck`).
"""
import glob
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "soak"))
from asp_soak import read_json, rss_kb, failure  # noqa: E402  (the soak's /proc and file helpers)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from metrics_lines import read_metrics_lines  # noqa: E402

# A daemon's glog ERROR / FATAL line or its exit message ("sieve-worker: ..."), as the launcher
# prefixes it: printed with a failed run, for a person to read (nothing acts on it).
SEVERE = re.compile(r"^\[[a-z]+ ?\d*\] ([EF]\d{8} |sieve-[a-z]+: )")

# --model=fnn3: Fashion-MNIST's 60000 training images, split between the workers, in batches of
# this many (run.py sizes the job's epochs from it).
FNN3_TRAIN, FNN3_BATCH = 60000, 32

KINDS = ["kill_worker", "kill_server", "double_kill_server", "pause_short", "pause_long",
         "ckpt_unwritable", "kill_scheduler", "term_scheduler", "partition", "slow_link"]
LINK_KINDS = ("partition", "slow_link")
SKIPPED_KINDS = {k: "loopback: needs a network namespace per node (--mode=netns)"
                 for k in LINK_KINDS}
NETNS_SKIPPED_KINDS = {k: "netns mode: deploy/local/netns/run restarts no process"
                       for k in ("kill_worker", "kill_server", "double_kill_server", "pause_long")}
TERMINAL = {"kill_scheduler", "term_scheduler"}
# A slow link's rate (tc tbf, both directions): a few times below what a worker's pushes and a
# server's replies need per round at the default job shape, far above its heartbeats.
SLOW_LINK_RATE = "1mbit"
NETNS_RUN = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "deploy", "local", "netns", "run"))

# The job shape of each mode (daemon flags after `sieve launch --`) and the faults it draws from.
MODES = {
    # BSP, ordered rounds, one backup copy per shard, checkpoints too: final weights bitwise those
    # of a clean run when every fault is one sieve absorbs.
    "bsp-replicated": {
        "flags": ["--ordered_rounds", "--replication=1", "--checkpoint_every=200"],
        "kinds": {"kill_server": 3, "double_kill_server": 1, "kill_worker": 3, "pause_short": 3,
                  "pause_long": 1, "ckpt_unwritable": 1},
    },
    # ASP with one backup copy: conservation of every pushed value across failovers.
    "asp": {
        "flags": ["--consistency=asp", "--replication=1", "--checkpoint_every_s=2"],
        "kinds": {"kill_server": 3, "double_kill_server": 1, "pause_short": 3,
                  "ckpt_unwritable": 1},
    },
    # BSP without copies: a killed server restores its checkpoint (the rounds since are lost).
    "bsp-checkpoint": {
        "flags": ["--ordered_rounds", "--checkpoint_every=100", "--server_restart_timeout_ms=30000"],
        "kinds": {"kill_server": 2, "kill_worker": 2, "pause_short": 3, "ckpt_unwritable": 1},
    },
    # A few absorbed faults, then the scheduler is killed: the job fails, nothing hangs.
    "scheduler": {
        "flags": ["--ordered_rounds", "--replication=1"],
        "kinds": {"kill_worker": 1, "kill_server": 1, "pause_short": 1},
        "terminal": "kill_scheduler",
    },
    # BSP, ordered rounds, no copies, every node in its own network namespace (netns/run): links
    # cut for less than the heartbeat timeout, slowed, short pauses; all absorbed (bitwise).
    # Heartbeat timeout 2 s: TCP resends a segment lost in a partition 0.2, 0.6, 1.4 s after it
    # was sent, so a partition of P silences a node for up to ~2P + 0.2 s; cuts of 0.4-1.0 s end
    # well before the 1.4 s resend. With 1 s, cuts of 0.2-0.5 s end within ~0.1 s of the 0.6 s
    # one: a heal late by that much (a stalled machine) and the node is declared dead.
    "netns": {
        "flags": ["--ordered_rounds"],
        "kinds": {"partition": 2, "slow_link": 2, "pause_short": 1},
        "launcher": "netns",
        "heartbeat_timeout_ms": 2000,
        "mean_gap_s": 4.0,  # nothing to restart or rebuild: the job is healthy again in ~1-3 s
    },
}


def node_index(config, role, rank):
    """The node's index in netns/run: 0 the scheduler, 1 + rank a server, 1 + S + rank a
    worker (its namespace PREFIX-n<i>, its switch port p<i>)."""
    if role == "scheduler":
        return 0
    return 1 + rank if role == "server" else 1 + config["servers"] + rank


def skipped_kinds(config):
    """{kind: why} of the kinds the config's mode cannot inject."""
    netns = MODES[config["mode"]].get("launcher") == "netns"
    return dict(NETNS_SKIPPED_KINDS if netns else SKIPPED_KINDS)


def netns_unusable():
    """Why the netns mode cannot run here (not root, no iproute2, `ip netns` or the qdiscs the
    link faults use not working), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc)"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs iproute2 (ip, tc)"
    probe = f"sieve-chaos-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode:
        return "'ip netns add' does not work here"
    try:
        for argv in (["true"], ["ip", "link", "set", "lo", "up"],
                     ["tc", "qdisc", "add", "dev", "lo", "root", "blackhole"],
                     ["tc", "qdisc", "replace", "dev", "lo", "root", "tbf", "rate",
                      SLOW_LINK_RATE, "burst", "8kb", "latency", "100ms"]):
            if subprocess.run(["ip", "netns", "exec", probe, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode:
                return f"'ip netns exec {probe} {' '.join(argv)}' does not work here"
    finally:
        subprocess.run(["ip", "netns", "del", probe], stderr=subprocess.DEVNULL)
    return None


def absorbed(kind, config, hold=None):
    """Whether sieve promises that the fault (held `hold` seconds, when known) leaves the final
    weights of a BSP --ordered_rounds job bitwise those of the same job without faults.
    config["claim_absorbed"] (a harness self-test) claims every fault is."""
    if config.get("claim_absorbed"):
        return True
    replicated = config["replication"] > 0
    if kind in ("kill_server", "double_kill_server"):
        return replicated  # promoted backup; a checkpoint restore loses rounds
    if kind == "ckpt_unwritable":
        return True  # a checkpoint changes no weight; a failed write keeps the previous one
    if kind in ("pause_short", "slow_link"):
        return True
    if kind == "partition":  # a stall, when shorter than the heartbeat timeout
        return hold is None or hold < config["heartbeat_timeout_ms"] / 1000.0
    if kind == "kill_worker":
        return config.get("worker_kill_absorbed", False)
    return False


def make_schedule(config):
    """The fault schedule drawn from config["seed"] (see the module docstring)."""
    rng = random.Random(config["seed"])
    mode = MODES[config["mode"]]
    kinds = dict(config.get("kinds") or mode["kinds"])
    skipped = skipped_kinds(config)
    for k in list(kinds):
        if k in skipped or (k == "ckpt_unwritable" and not config.get("checkpoints")):
            del kinds[k]
    timeout_s = config["heartbeat_timeout_ms"] / 1000.0
    duration = config["duration"]
    gap = config.get("mean_gap_s", mode.get("mean_gap_s", max(3.0, 3 * timeout_s)))
    events, t = [], min(2.0 + timeout_s, duration * 0.1)
    end = duration * 0.8
    names, weights = list(kinds), [kinds[k] for k in kinds]
    while names:
        t += rng.uniform(0.5, 1.5) * gap
        if t > end:
            break
        kind = rng.choices(names, weights)[0]
        role = "worker" if kind == "kill_worker" else \
            "server" if "server" in kind or kind == "ckpt_unwritable" else \
            rng.choice(["worker", "server"])
        n = config["workers"] if role == "worker" else config["servers"]
        hold = 0.0
        if kind in ("pause_short", "partition"):
            hold = round(rng.uniform(0.2, 0.5) * timeout_s, 3)
        elif kind == "pause_long":
            hold = round(rng.uniform(1.5, 2.5) * timeout_s, 3)
        elif kind in ("ckpt_unwritable", "slow_link"):
            hold = round(rng.uniform(1.0, 3.0), 3)
        elif kind == "double_kill_server":
            hold = round(rng.uniform(0.05, 0.5), 3)  # the second kill, after the new process
        events.append({"at": round(t, 3), "kind": kind, "role": role, "rank": rng.randrange(n),
                       "hold": hold})
    terminal = config.get("terminal") or mode.get("terminal")
    if terminal:
        events.append({"at": round(min(t + gap, end), 3), "kind": terminal, "role": "scheduler",
                       "rank": 0, "hold": 0.0})
    for i, e in enumerate(events):
        e["i"] = i
    return {"config": config, "events": events, "skipped_kinds": skipped}


# ---------------------------------------------------------------------------------------------
# Processes

def _ppid_and_args(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        state = stat[stat.rindex(")") + 2]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None, None, None
    return ppid, state, args


def start_ticks(pid):
    """When process `pid` started (clock ticks since boot, field 22 of /proc/PID/stat), or None:
    with the pid it names one process, as a long run reuses pids (30 minutes of chaos started
    more daemons than pid_max, and a new worker took a killed one's pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def daemons(launcher_pid):
    """{(role, rank): pid} of the launcher's live children (the scheduler has rank 0)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ppid, state, args = _ppid_and_args(int(entry))
        if ppid != launcher_pid or not args or state == "Z":
            continue
        prog = os.path.basename(args[0].decode(errors="replace"))
        role = {"sieve-scheduler": "scheduler", "sieve-server": "server",
                "sieve-worker": "worker"}.get(prog)
        if role is None:
            continue
        rank = 0
        for a in args:
            if a.startswith(b"--rank="):
                rank = int(a[len(b"--rank="):])
        out[(role, rank)] = int(entry)
    return out


def namespaces(prefix):
    """The network namespaces named PREFIX-*."""
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True)
    return [line.split()[0] for line in r.stdout.splitlines()
            if line.split() and line.split()[0].startswith(prefix + "-")]


def alive(pid, start=None):
    """Whether process `pid` runs (not a zombie); with `start`, only if it is the process that
    started then (start_ticks), not a later one with the same pid."""
    ppid, state, _ = _ppid_and_args(pid)
    return ppid is not None and state != "Z" and (start is None or start_ticks(pid) == start)


class CheckpointBlock:
    """Makes directory `path` unwritable, and writable again by restore()."""

    def __init__(self, path):
        self.path = path
        self.root = os.geteuid() == 0
        self.how = ("moved aside, a plain file in its place (root: chmod would not stop writes)"
                    if self.root else "chmod 0500")

    def block(self):
        if self.root:
            os.rename(self.path, self.path + ".blocked")
            with open(self.path, "w") as f:
                f.write("chaos: checkpoint directory blocked\n")
        else:
            os.chmod(self.path, 0o500)

    def restore(self):
        if self.root:
            os.unlink(self.path)
            os.rename(self.path + ".blocked", self.path)
        else:
            os.chmod(self.path, 0o700)


class Job:
    """One job of `config` writing into `run_dir` (`sieve launch`, or netns/run in the netns
    mode, its namespaces named `netns`-*); start(), then wait()."""

    def __init__(self, config, run_dir, build, faults=True, sample_s=0.5, deadline_s=3600.0,
                 bin_dir=None):
        self.config, self.dir = config, os.path.abspath(run_dir)
        self.build = os.path.abspath(build)
        # `sieve launch --bin_dir`: where the daemons are (default: the build's); the harness's
        # self-test points it at a deliberately broken sieve-server.
        self.bin_dir = os.path.abspath(bin_dir) if bin_dir else None
        self.deadline_s = deadline_s
        # Namespace prefix: short (PREFIX-n<i> must stay a valid name), unique per run.
        self.netns = None
        if MODES[config["mode"]].get("launcher") == "netns":
            self.netns = f"sc{os.getpid()}{'f' if faults else 'c'}"
        run_dir = self.dir
        self.sample_s = sample_s
        os.makedirs(run_dir, exist_ok=True)
        self.ckpt = os.path.join(run_dir, "ckpt")
        if config.get("checkpoints"):
            os.makedirs(self.ckpt, exist_ok=True)
        self.status_path = os.path.join(run_dir, "status.json")
        self.lines_per_s = {}  # "role rank" -> {second: lines}
        self.tail = []
        self.severe = []  # the first error lines and daemon exit messages, for a failure report
        # "PID@START" (a process: its pid and start_ticks) -> [role, rank, first_seen_s,
        # last_seen_s, pid, start]
        self.pids = {}
        self.rss = {}  # "PID@START" -> [[t, kB], ...]
        self.code = None
        self.faults = faults
        self.done = threading.Event()
        self.offsets, self.comm = {}, {}

    def argv(self):
        c = self.config
        d = self.dir
        if self.netns:
            # netns/run: no launcher flags of `sieve launch` (it restarts nothing, stops its
            # daemons its own way); its --timeout ends a hung job with exit 124.
            argv = [NETNS_RUN, f"--build={self.build}", f"--num_servers={c['servers']}",
                    f"--num_workers={c['workers']}", f"--name={self.netns}",
                    f"--timeout={math.ceil(self.deadline_s)}", "--"]
        else:
            argv = [os.path.join(self.build, "deploy", "sieve"), "launch",
                    f"--num_servers={c['servers']}", f"--num_workers={c['workers']}",
                    "--progress=off",
                    f"--max_restarts={c['max_restarts'] if self.faults else 0}",
                    "--stop_timeout_ms=3000"]
            if self.bin_dir:
                argv.append(f"--bin_dir={self.bin_dir}")
            argv.append("--")
        if c.get("model", "synthetic") == "synthetic":
            argv += ["--model=synthetic", f"--num_params={c['num_params']}",
                     f"--rounds_per_epoch={c['rounds_per_epoch']}"]
        else:  # a real model: its epoch is the workers' part of the data, in batches
            argv += [f"--model={c['model']}", f"--batch_size={FNN3_BATCH}"]
        argv += [f"--seed={c['seed']}", f"--epochs={c['epochs']}",
                 "--compressor=topk", f"--density={c['density']}",
                 f"--heartbeat_interval_ms={c['heartbeat_interval_ms']}",
                 f"--heartbeat_timeout_ms={c['heartbeat_timeout_ms']}",
                 "--round_timeout_ms=60000", f"--status_file={self.status_path}",
                 f"--summary_out={d}/{{role}}-{{rank}}.json",
                 f"--dump_weights={d}/weights-{{rank}}.bin",
                 f"--metrics_out={d}/metrics-{{rank}}.jsonl", "--eval_every=0"]
        if self.faults and c.get("compute"):
            argv.append(f"--straggler=delay:{c['compute']}")
        flags = list(MODES[c["mode"]]["flags"])
        if not c.get("checkpoints"):
            flags = [f for f in flags if not f.startswith("--checkpoint")]
        else:
            flags.append(f"--checkpoint_dir={self.ckpt}")
        if c["replication"] == 0:
            flags = [f for f in flags if not f.startswith("--replication")]
        return argv + flags + list(c.get("extra_flags", []))

    def start(self):
        self.t0 = time.monotonic()
        with open(os.path.join(self.dir, "argv.json"), "w") as f:
            json.dump(self.argv(), f, indent=1)
        self.out = open(os.path.join(self.dir, "output.log"), "w")
        self.p = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace", cwd=self.dir)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()

    def now(self):
        return time.monotonic() - self.t0

    def _read(self):
        for line in self.p.stdout:
            self.out.write(line)
            sec = int(self.now())
            # The launcher prefixes each daemon's line with "[role rank] ": count per process.
            who = line[1:line.index("]")] if line.startswith("[") and "]" in line else "launcher"
            per = self.lines_per_s.setdefault(who, {})
            per[sec] = per.get(sec, 0) + 1
            self.tail.append(line)
            if len(self.tail) > 400:
                del self.tail[:200]
            if SEVERE.match(line) and len(self.severe) < 40:
                self.severe.append(line)
        self.out.close()

    def _tail_metrics(self):
        """Reads the workers' new --metrics_out lines: the longest push/pull of each round. A
        restarted worker truncates its file, so it is read as it grows (offset reset on a
        shrink)."""
        for path in glob.glob(os.path.join(self.dir, "metrics-*.jsonl")):
            off = self.offsets.get(path, 0)
            try:
                if os.path.getsize(path) < off:
                    off = 0
                with open(path, "rb") as f:
                    f.seek(off)
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            self.offsets[path] = off + end
            for line in data[:end].splitlines():
                try:
                    m = json.loads(line)
                    r, c = int(m["round"]), float(m["t_comm"])
                except (ValueError, KeyError, TypeError):
                    continue
                self.comm[r] = max(self.comm.get(r, 0.0), c)

    def _sample(self):
        while not self.done.is_set():
            self._tail_metrics()
            t = self.now()
            for (role, rank), pid in daemons(self.p.pid).items():
                start = start_ticks(pid)
                key = f"{pid}@{start}"
                rec = self.pids.setdefault(key, [role, rank, t, t, pid, start])
                rec[3] = t
                kb = rss_kb(pid)
                if kb is not None and start_ticks(pid) == start:
                    self.rss.setdefault(key, []).append([round(t, 2), kb])
            self.done.wait(self.sample_s)

    def status(self):
        return read_json(self.status_path)

    def pid_of(self, role, rank):
        return daemons(self.p.pid).get((role, rank))

    def wait(self, deadline_s=None):
        """Waits for the launcher until `deadline_s` (job time; default the Job's); kills it (and,
        through PR_SET_PDEATHSIG, its daemons) when it is still running then; netns/run gets
        SIGTERM first (it stops its daemons and removes its namespaces), SIGKILL 20 s later.
        Returns True when it exited on its own (netns/run's own --timeout, exit 124, is a
        hang too)."""
        if deadline_s is None:
            deadline_s = self.deadline_s
        try:
            self.code = self.p.wait(timeout=max(0.1, deadline_s - self.now()))
            hung = bool(self.netns) and self.code == 124
        except subprocess.TimeoutExpired:
            if self.netns:
                self.p.terminate()
                try:
                    self.code = self.p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.p.kill()
                    self.code = self.p.wait()
            else:
                self.p.kill()
                self.code = self.p.wait()
            hung = True
        self.end_s = self.now()
        self.hung = hung
        self.done.set()
        self.sampler.join(timeout=5)
        self.reader.join(timeout=5)
        self._tail_metrics()
        # Every daemon it ever had must be gone within a bound of the launcher's exit.
        bound = self.end_s + 10
        while self.now() < bound and any(alive(r[4], r[5]) for r in self.pids.values()):
            time.sleep(0.1)
        self.leftover = [(r[0], r[1], r[4]) for r in self.pids.values() if alive(r[4], r[5])]
        for _, _, pid in self.leftover:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.netns:
            # netns/run removes its namespaces on any exit but SIGKILL: one left is reported,
            # then removed (with whatever still runs in it).
            for ns in namespaces(self.netns):
                self.leftover.append(("namespace", ns, None))
                for pid in subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                                          text=True).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", ns])
        return not hung

    def save(self):
        with open(os.path.join(self.dir, "samples.json"), "w") as f:
            json.dump({"pids": self.pids, "rss_kb": self.rss,
                       "lines_per_s": self.lines_per_s, "code": self.code, "end_s": self.end_s,
                       "hung": self.hung,
                       "comm_s": {str(r): c for r, c in sorted(self.comm.items())},
                       "leftover": self.leftover, "netns": self.netns}, f)


# ---------------------------------------------------------------------------------------------
# Fault injection

HEALTHY_WORKER = {"NODE_ALIVE", "NODE_REJOINED", "NODE_RESTARTED"}
HEALTHY_SERVER = {"NODE_ALIVE", "NODE_REJOINED", "NODE_RESTARTED"}


def healthy(status, config):
    """Whether the job status shows every node serving as at the start: every node live, every
    server the primary of its own shard again (handed back after a failover) and, with
    replication, holding its copies again (rebuilt)."""
    if not status or status.get("phase") != "JOB_RUNNING":
        return False
    for n in status.get("nodes", []):
        if n["role"] == "ROLE_WORKER" and n["state"] not in HEALTHY_WORKER:
            return False
        if n["role"] == "ROLE_SERVER":
            if n["state"] not in HEALTHY_SERVER:
                return False
            if config["replication"] and (n.get("primary_shards") != [n["rank"]] or
                                          len(n.get("backup_shards", [])) != config["replication"]):
                return False
    return True


def job_round(status):
    try:
        return int(status["progress"]["round"])
    except (TypeError, KeyError, ValueError):
        return None


class Injector:
    """Runs a schedule's events against a started Job, in order: each waits for its `at`, then
    for the job to be healthy again after the previous fault (the status rewritten since it and
    the round advanced; at most `gate_s`). Records per event what happened (`record`)."""

    def __init__(self, job, schedule, gate_s=45.0):
        self.job, self.events, self.gate_s = job, schedule["events"], gate_s
        self.config = schedule["config"]
        self.record = []
        self.block = CheckpointBlock(job.ckpt)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def _finished(self):
        return self.job.p.poll() is not None

    def _gate(self, since, since_round, settle=0.0):
        """Waits until the job is healthy in a status written after `since` + `settle` (job time)
        with a round past `since_round`. Returns (True, seconds since `since`) or (False, why)."""
        start = self.job.now()
        while self.job.now() - start < self.gate_s:
            if self._finished():
                return False, "job ended"
            st = self.job.status()
            try:
                fresh = os.path.getmtime(self.job.status_path) > self.wall0 + since + settle
            except OSError:
                fresh = False
            r = job_round(st)
            if st and st.get("phase") in ("JOB_FINISHED", "JOB_FAILED"):
                return False, "job ended"
            if fresh and healthy(st, self.config) and r is not None and \
                    (since_round is None or r > since_round):
                return True, self.job.now() - since
            time.sleep(0.1)
        return False, f"not healthy within {self.gate_s:g} s"

    def _run(self):
        self.wall0 = time.time() - self.job.now()
        prev_end, prev_round, settle = 0.0, None, 0.0
        for e in self.events:
            rec = {"i": e["i"], "kind": e["kind"], "role": e["role"], "rank": e["rank"],
                   "hold": e["hold"], "at": e["at"], "injected": False}
            self.record.append(rec)
            while self.job.now() < e["at"] and not self._finished():
                time.sleep(0.05)
            ok, how = self._gate(prev_end, prev_round, settle)
            if prev_end and self.record[-2].get("injected"):
                self.record[-2]["recovered"] = ok
                self.record[-2]["recovery_s" if ok else "gate"] = round(how, 3) if ok else how
            if not ok:
                rec["not_injected"] = how
                if how != "job ended":
                    # The job did not recover from the previous fault: stop injecting.
                    for later in self.events[e["i"] + 1:]:
                        self.record.append({"i": later["i"], "kind": later["kind"],
                                            "injected": False, "not_injected": "previous gate"})
                break
            rec["round_at"] = job_round(self.job.status())
            rec["t"] = round(self.job.now(), 3)
            try:
                self._inject(e, rec)
            except (OSError, RuntimeError) as err:
                rec["error"] = str(err)
            rec["injected"] = "error" not in rec
            prev_end, prev_round = self.job.now(), job_round(self.job.status())
            settle = self._settle(e["kind"])
            if e["kind"] in TERMINAL:
                break
        else:
            if self.record and self.record[-1].get("injected") and \
                    self.record[-1]["kind"] not in TERMINAL:
                ok, how = self._gate(prev_end, prev_round, settle)
                self.record[-1]["recovered"] = ok or how == "job ended"
                if ok:
                    self.record[-1]["recovery_s"] = round(how, 3)
                elif how != "job ended":
                    self.record[-1]["gate"] = how

    def _settle(self, kind):
        """Seconds after a fault before a status can show the job healthy again: after a kill, the
        heartbeat timeout and half a second (until the scheduler declares the killed process dead,
        a status shows it alive: the second kill of a double kill came after the first's restart
        had registered and been rebuilt, and a status written before its death was noticed
        passed the gate while the job was down a server); 0 for the other faults."""
        if kind in ("kill_worker", "kill_server", "double_kill_server"):
            return self.config["heartbeat_timeout_ms"] / 1000.0 + 0.5
        return 0.0

    def _pid(self, role, rank, other_than=None, wait_s=10.0):
        end = self.job.now() + wait_s
        while self.job.now() < end:
            pid = self.job.pid_of(role, rank)
            if pid is not None and pid != other_than:
                return pid
            time.sleep(0.02)
        raise RuntimeError(f"no {role} {rank} process")

    def _inject(self, e, rec):
        kind, role, rank = e["kind"], e["role"], e["rank"]
        if kind in ("kill_worker", "kill_server", "double_kill_server"):
            pid = self._pid(role, rank)
            os.kill(pid, signal.SIGKILL)
            rec["pids"] = [pid]
            if kind == "double_kill_server":
                new = self._pid(role, rank, other_than=pid)
                time.sleep(e["hold"])
                os.kill(new, signal.SIGKILL)
                rec["pids"].append(new)
        elif kind in ("pause_short", "pause_long"):
            pid = self._pid(role, rank)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(e["hold"])
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
            rec["pids"] = [pid]
        elif kind == "ckpt_unwritable":
            rec["how"] = self.block.how
            self.block.block()
            try:
                time.sleep(e["hold"])
            finally:
                self.block.restore()
        elif kind in LINK_KINDS:
            self._link(e, rec)
        elif kind in TERMINAL:
            pid = self._pid("scheduler", 0)
            os.kill(pid, signal.SIGKILL if kind == "kill_scheduler" else signal.SIGTERM)
            rec["pids"] = [pid]
        else:
            raise RuntimeError(f"unknown fault kind {kind}")

    @staticmethod
    def _tc(ns, args):
        """`ip netns exec NS tc ARGS...`: its output; RuntimeError when it fails."""
        argv = ["ip", "netns", "exec", ns, "tc", *args]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stdout.strip()}")
        return p.stdout

    def _link(self, e, rec):
        """partition / slow_link of node i: a root qdisc on both ends of its link (eth0 in its
        namespace: what it sends; its switch port: what it receives), both removed after `hold`
        seconds, in a `finally`. The netns mode runs unshaped: each end must have the kernel's
        default root qdisc (handle 0:) before, so deleting ours restores it. Each end's commands
        go to one `tc -batch -` started in its namespace before the fault: adding and removing
        the qdisc is then a line written to a waiting process, not a process to start (which
        takes up to ~0.7 s on a loaded machine, and would lengthen the fault). `held_s`: from the
        first line written to both processes gone (an upper bound of the fault's length)."""
        prefix = self.job.netns
        if not prefix:
            raise RuntimeError(f"{e['kind']} needs the netns mode (a namespace per node)")
        i = node_index(self.config, e["role"], e["rank"])
        ends = [(f"{prefix}-n{i}", "eth0"), (f"{prefix}-sw", f"p{i}")]
        qdisc = "blackhole" if e["kind"] == "partition" else \
            f"tbf rate {SLOW_LINK_RATE} burst 8kb latency 100ms"
        rec["node"], rec["how"] = i, []
        for ns, dev in ends:
            words = self._tc(ns, ["qdisc", "show", "dev", dev]).split()
            if "root" in words and words[words.index("root") - 1] != "0:":
                raise RuntimeError(f"{ns} {dev} is shaped already: {' '.join(words)}")
        batches = [subprocess.Popen(["ip", "netns", "exec", ns, "tc", "-batch", "-"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) for ns, _ in ends]

        def send(line):
            for p, (ns, dev) in zip(batches, ends):
                rec["how"].append(f"ip netns exec {ns} tc -batch -: {line.format(dev=dev)}")
                try:
                    p.stdin.write(line.format(dev=dev) + "\n")
                    p.stdin.flush()
                except OSError:
                    pass  # that tc ended (a failed line): its exit status says why

        start = time.monotonic()
        try:
            send("qdisc add dev {dev} root " + qdisc)
            time.sleep(e["hold"])
        finally:
            send("qdisc del dev {dev} root")
            errors = []
            for p, (ns, _) in zip(batches, ends):
                try:
                    p.stdin.close()
                except OSError:
                    pass
                out = p.stdout.read()
                if p.wait():
                    errors.append(f"ip netns exec {ns} tc -batch -: exit {p.returncode}: "
                                  f"{out.strip()}")
            rec["held_s"] = round(time.monotonic() - start, 3)
            # netns/run gone: so are its namespaces, with the qdiscs.
            if errors and not self._finished():
                raise RuntimeError("; ".join(errors))


# ---------------------------------------------------------------------------------------------
# Invariants

def summaries(run_dir, role):
    """{rank: summary dict} of the processes of `role` that wrote one (the last process of a
    rank replaces the file)."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, f"{role}-*.json")):
        rank = os.path.basename(path)[len(role) + 1:-len(".json")]
        if rank.isdigit():
            s = read_json(path)
            if s is not None:
                out[int(rank)] = s
    return out


def shard_holders(servers, status):
    """{shard: (server rank, its summary of that shard)}: who served each shard at the end (the
    job status's primary_shards; a shard served by another server is in that server's
    `shards`)."""
    out = {}
    for n in (status or {}).get("nodes", []):
        if n["role"] != "ROLE_SERVER":
            continue
        for s in n.get("primary_shards", []):
            srv = servers.get(n["rank"])
            if srv is None:
                continue
            if s == n["rank"]:
                out[s] = (n["rank"], srv)
            else:
                taken = [x for x in srv.get("shards", []) if x.get("shard") == s]
                if taken:
                    out[s] = (n["rank"], taken[-1])
    return out


def _inv(name, ok, detail):
    return {"name": name, "ok": ok, "detail": detail}


def check(run_dir, schedule, record, clean_dir=None, bounds=None):
    """The invariants of the run in `run_dir` (see the module docstring)."""
    b = {"exit_bound_s": 15.0, "rss_growth": 0.10, "rss_slack_mb": 8.0, "rss_warmup_s": 3.0,
         "lines_per_s": 50, "rel_tol": 1e-9}
    b.update(bounds or {})
    config = schedule["config"]
    samples = read_json(os.path.join(run_dir, "samples.json")) or {}
    status = read_json(os.path.join(run_dir, "status.json"))
    out = []
    terminal = [r for r in record if r.get("kind") in TERMINAL and r.get("injected")]
    code = samples.get("code")
    leftover = samples.get("leftover", [])
    hung = samples.get("hung", False)

    # 1. The job ended: finished, or failed the documented way after a scheduler fault; no hang.
    out.append(_inv("no_hang", not hung and not leftover,
                    "launcher killed at the deadline" if hung else
                    f"processes still running 10 s after the launcher: {leftover}" if leftover
                    else f"launcher exit {code} at {samples.get('end_s', 0):.1f} s, every "
                         f"daemon gone within 10 s"))
    phase = (status or {}).get("phase")
    if terminal:
        t = terminal[-1]
        took = samples.get("end_s", 0) - t["t"]
        good = code not in (0, None) and phase != "JOB_FINISHED" and took <= b["exit_bound_s"]
        if t["kind"] == "term_scheduler":
            good = good and phase == "JOB_FAILED"
        out.append(_inv("outcome", good,
                        f"{t['kind']} at {t['t']:.1f} s: launcher exit {code} after {took:.1f} s "
                        f"(bound {b['exit_bound_s']:g} s), status phase {phase}"
                        + (f" ({failure(status)})" if phase == "JOB_FAILED" else "")))
    else:
        good = code == 0 and phase == "JOB_FINISHED"
        out.append(_inv("outcome", good, f"launcher exit {code}, status phase {phase}" +
                        ("" if good or status is None else f" ({failure(status)})")))

    # 2. Every fault was followed by a healthy job (or the job's end).
    bad = [r for r in record if r.get("injected") and r.get("kind") not in TERMINAL and
           r.get("recovered") is False]
    skipped = [r for r in record if not r.get("injected") and
               r.get("not_injected") not in (None, "job ended")]
    errors = [r for r in record if r.get("error")]
    out.append(_inv("recovered", not bad and not skipped and not errors,
                    "; ".join([f"event {r['i']} {r['kind']}: {r.get('gate')}" for r in bad] +
                              [f"event {r['i']} not injected: {r['not_injected']}"
                               for r in skipped] +
                              [f"event {r['i']}: {r['error']}" for r in errors]) or
                    f"{sum(1 for r in record if r.get('injected'))} faults injected, the job "
                    f"healthy again after each"))

    ended = not terminal and phase == "JOB_FINISHED"
    servers = summaries(run_dir, "server")
    workers = summaries(run_dir, "worker")
    holders = shard_holders(servers, status)

    # 3. Conservation: sum pushed by the workers = sum applied by the shards' final holders
    # (+ values returned to the workers' residuals).
    killed_workers = [r for r in record if r.get("injected") and r.get("role") == "worker" and
                      r["kind"] in ("kill_worker", "pause_long")]
    # A server process that ended without a summary: without copies its checkpoint restore loses
    # the rounds since the checkpoint (by design); under BSP with copies the copies follow the
    # rounds' results, not the pushes, so a promoted or rebuilt copy's pushed_sum starts at its
    # promotion or rebuild (ASP copies and rebuilt snapshots carry the shard's pushed_sum).
    restores = [r for r in record if r.get("injected") and
                (not config["replication"] or config["mode"] != "asp") and
                (r["kind"] in ("kill_server", "double_kill_server") or
                 (r["kind"] == "pause_long" and r.get("role") == "server"))]
    if not ended:
        out.append(_inv("conservation", None, "the job did not finish"))
    elif killed_workers:
        out.append(_inv("conservation", None,
                        f"{len(killed_workers)} worker process(es) killed or dropped "
                        f"(events {[r['i'] for r in killed_workers]}): the pushes of a killed "
                        f"process are in no summary"))
    elif restores and not config.get("claim_absorbed"):
        out.append(_inv("conservation", None,
                        f"server processes lost (events {[r['i'] for r in restores]}): "
                        + ("a checkpoint restore loses the rounds since the checkpoint, by design"
                           if not config["replication"] else
                           "BSP copies follow round results, not pushes: the pushed_sum of a "
                           "promoted or rebuilt copy starts at its promotion or rebuild")))
    elif len(workers) != config["workers"] or len(holders) != config["servers"]:
        out.append(_inv("conservation", False, f"summaries missing: workers {sorted(workers)}, "
                                               f"shards held {sorted(holders)}"))
    else:
        pushed = sum(w["pushed_sum"] - w.get("returned_sum", 0) for w in workers.values())
        applied = sum(h[1]["pushed_sum"] for h in holders.values())
        rel = abs(pushed - applied) / max(1.0, abs(pushed))
        out.append(_inv("conservation", rel <= b["rel_tol"],
                        f"workers pushed {pushed!r}, shards applied {applied!r} "
                        f"(per shard {[(s, h[0], h[1]['pushed_sum']) for s, h in sorted(holders.items())]}), "
                        f"relative difference {rel:.3g} (bound {b['rel_tol']:g})"))

    # 4. Replicas: every copy a server holds equals its shard's final primary; in BSP every
    # worker's replica equals the servers' shards (CRC-32 of the slice) and the other workers'.
    if not ended:
        out.append(_inv("replicas", None, "the job did not finish"))
    else:
        problems, checked = [], 0
        for rank, srv in sorted(servers.items()):
            for item in filter(None, (srv.get("copies") or "").split(",")):
                shard, crc = item.split(":")
                h = holders.get(int(shard))
                checked += 1
                if h is None:
                    problems.append(f"server {rank} holds a copy of shard {shard}, no holder")
                elif h[1]["checksum"] != crc:
                    problems.append(f"server {rank}'s copy of shard {shard} {crc} != "
                                    f"server {h[0]}'s {h[1]['checksum']}")
        bsp = config["mode"] != "asp"
        dumps = {}
        for path in sorted(glob.glob(os.path.join(run_dir, "weights-*.bin"))):
            with open(path, "rb") as f:
                dumps[os.path.basename(path)] = f.read()
        if len(dumps) != config["workers"]:
            problems.append(f"{len(dumps)} worker weight dumps, expected {config['workers']}")
        if bsp and dumps:
            first = next(iter(dumps.values()))
            for name, data in dumps.items():
                if data != first:
                    problems.append(f"{name} differs from {next(iter(dumps))}")
            for shard, (rank, summ) in sorted(holders.items()):
                lo, hi = servers[rank]["lo"], servers[rank]["hi"]
                if "lo" in summ:
                    lo, hi = summ["lo"], summ["hi"]
                crc = "%08x" % zlib.crc32(first[4 * lo:4 * hi])
                checked += 1
                if crc != summ["checksum"]:
                    problems.append(f"worker replica of shard {shard} crc {crc} != server "
                                    f"{rank}'s {summ['checksum']}")
        out.append(_inv("replicas", not problems, "; ".join(problems) or
                        f"{checked} copies/slices equal their shard's final weights" +
                        (", every worker's replica equal" if bsp else "")))

    # 5. Bitwise equal to the clean run when every fault is one sieve absorbs.
    if config["mode"] == "asp":
        out.append(_inv("bitwise", None, "ASP: no bitwise promise"))
    elif not ended:
        out.append(_inv("bitwise", None, "the job did not finish"))
    elif clean_dir is None:
        out.append(_inv("bitwise", None, "no clean run (--no_clean)"))
    else:
        outside = sorted({r["kind"] for r in record if r.get("injected") and
                          not absorbed(r["kind"], config, r.get("held_s", r.get("hold")))})
        if outside:
            out.append(_inv("bitwise", None, f"faults outside the bitwise promise: {outside}"))
        else:
            problems = []
            for w in range(config["workers"]):
                name = f"weights-{w}.bin"
                try:
                    with open(os.path.join(run_dir, name), "rb") as f:
                        a = f.read()
                    with open(os.path.join(clean_dir, name), "rb") as f:
                        c = f.read()
                except OSError as err:
                    problems.append(str(err))
                    continue
                if a != c:
                    diff = sum(1 for i in range(0, min(len(a), len(c)), 4) if a[i:i + 4] != c[i:i + 4])
                    problems.append(f"{name}: {diff} of {len(c) // 4} weights differ from the "
                                    f"clean run")
            out.append(_inv("bitwise", not problems, "; ".join(problems) or
                            "every worker's final weights bitwise those of the clean run"))

    # 6. RSS: no daemon process grows more than the bound over its life (after a warm-up).
    pids = samples.get("pids", {})
    growths, problems = [], []
    for key, pts in samples.get("rss_kb", {}).items():
        role, rank, first, last = pids.get(key, ["?", "?", 0, 0])[:4]
        pid = key.split("@")[0]
        pts = [p for p in pts if p[0] >= first + b["rss_warmup_s"]]
        if len(pts) < 6:
            continue
        third = max(2, len(pts) // 3)
        base = statistics.median(kb for _, kb in pts[:third]) / 1024
        end = statistics.median(kb for _, kb in pts[-third:]) / 1024
        growth = end - base
        limit = max(b["rss_growth"] * base, b["rss_slack_mb"])
        growths.append((growth, f"{role} {rank} pid {pid}"))
        if growth > limit:
            problems.append(f"{role} {rank} (pid {pid}) {base:.1f} -> {end:.1f} MB "
                            f"(bound +{limit:.1f} MB)")
    top = max(growths) if growths else (0, "-")
    out.append(_inv("rss", not problems if growths else None,
                    "; ".join(problems) or (f"{len(growths)} processes sampled, largest growth "
                                            f"{top[0]:+.1f} MB ({top[1]})" if growths else
                                            "no process lived long enough to sample")))

    # 7. Log lines are rate-limited: no process printed more than the bound in any second.
    worst = (0, "-", 0)
    for who, per in samples.get("lines_per_s", {}).items():
        if who == "launcher":
            continue
        for sec, n in per.items():
            if n > worst[0]:
                worst = (n, who, int(sec))
    out.append(_inv("log_rate", worst[0] <= b["lines_per_s"],
                    f"most lines in one second: {worst[0]} ([{worst[1]}] at {worst[2]} s; bound "
                    f"{b['lines_per_s']})"))
    return out


def fault_costs(run_dir, record):
    """Per injected fault: the longest push/pull of any worker in the rounds from the fault to the
    next fault (the workers' --metrics_out `t_comm`, as the run read it while the files grew, and
    the files left), beside the run's median; and the rounds of that window whose push/pull took
    more than 5x the median (`slow_rounds`, their median `slow_comm_s`: what a slow link costs
    per round)."""
    samples = read_json(os.path.join(run_dir, "samples.json")) or {}
    comm = {int(r): c for r, c in samples.get("comm_s", {}).items()}
    for path in glob.glob(os.path.join(run_dir, "metrics-*.jsonl")):
        for m in read_metrics_lines(path):
            r = m.get("round")
            if r is not None and m.get("t_comm") is not None:
                comm[r] = max(comm.get(r, 0.0), m["t_comm"])
    median = statistics.median(comm.values()) if comm else None
    rounds = sorted(comm)
    for i, r in enumerate(record):
        if not r.get("injected") or r.get("round_at") is None:
            continue
        lo = r["round_at"]
        nxt = [x.get("round_at") for x in record[i + 1:] if x.get("round_at") is not None]
        hi = nxt[0] if nxt else (rounds[-1] if rounds else lo)
        window = [comm[x] for x in rounds if lo <= x <= hi]
        if window:
            r["stall_s"] = round(max(window), 4)
            slow = [c for c in window if c > 5 * median]
            r["slow_rounds"] = len(slow)
            if slow:
                r["slow_comm_s"] = round(statistics.median(slow), 4)
    return median


def summarize_costs(record):
    """{kind: {"n", "stall_s" (max, median), "recovery_s" (max, median)}} over the injected faults."""
    out = {}
    for r in record:
        if not r.get("injected"):
            continue
        k = out.setdefault(r["kind"], {"n": 0, "stall": [], "recovery": []})
        k["n"] += 1
        if "stall_s" in r:
            k["stall"].append(r["stall_s"])
        if "recovery_s" in r:
            k["recovery"].append(r["recovery_s"])
    for k in out.values():
        for key in ("stall", "recovery"):
            xs = k.pop(key)
            k[f"{key}_s_median"] = round(statistics.median(xs), 3) if xs else None
            k[f"{key}_s_max"] = round(max(xs), 3) if xs else None
    return out


def copy_tree(src, dst):
    shutil.copytree(src, dst, dirs_exist_ok=True)
