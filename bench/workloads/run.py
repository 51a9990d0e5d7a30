#!/usr/bin/python3
"""The workload grid: the four PyTorch workloads of examples/torch/ under sieve's compressors and
under torch DDP, several seeds each, one JSON per job and a Markdown table per workload.

Workloads (examples/torch/, each with its own default length):
  resnet20          ResNet-20 on Fashion-MNIST, 15 epochs, metric test_acc (higher is better)
  resnet18          ResNet-18 on Fashion-MNIST, 5 epochs, metric test_acc
  lstm_lm           2-layer LSTM on the King James Bible's words, 6 epochs, metric perplexity
                    (also val_loss and test_perplexity; lower is better)
  char_transformer  character transformer on the same corpus, 2000 steps, metric val_loss
                    (nats per character; lower is better)

Configurations:
  dense        sieve, --compressor=none (every value pushed every round)
  topk1        sieve, Top-k at density 0.01, no density warm-up
  topk01       sieve, Top-k at density 0.001 after the warm-up 1.5625 %, 0.4 % (the examples'
               default --density_warmup)
  gaussiank01  sieve, Gaussian-k at density 0.001 after the same warm-up
  topk01_nomask, gaussiank01_nomask
               the same two without momentum-factor masking (the worker flag
               --momentum_masking=false: SGD's momentum is kept where the residual was selected)
  ddp          torch DistributedDataParallel on gloo, started by the script itself
               (--backend=ddp --ddp_ranks=W)
  compute      no communication at all: W local ranks of the script each train alone
               (--backend=none --ddp_ranks=W), the compute-only bound of a step; only its time
               counts (its metric is a model trained on 1/W of the data: the table shows none)

A sieve job is `BUILD/deploy/sieve launch --num_servers=S --num_workers=W
--worker_cmd="PYTHON examples/torch/SCRIPT FLAGS" -- --consistency=bsp --summary_out=...
--status_file=... --metrics_out=... --metrics_every=N --contraction_every=N`. Its results come
from the run summaries the workers write (--summary_out, docs/protocol.md "Run summaries": rank
0's recorded metrics, every worker's bytes), where a summary lacks one from the scheduler's final
job status (--status_file, docs/protocol.md "Job status"), and the contraction ratio from rank
0's metrics lines (--metrics_out). A DDP job has no such files: the script's rank 0 writes its
result to the file its --result_json names. No result is ever read from a log line; each job's
output goes to a log file for people only.

Usage (from the repository root, with Debian's /usr/bin/python3, which has torch):
  /usr/bin/python3 bench/workloads/run.py [--workloads=resnet20,...] [--configs=dense,...]
      [--seeds=1,2] [--epochs=N] [--max_steps=N] [--workers=4] [--servers=2]
      [--out=results/workloads/TIMESTAMP] [--build=build] [--extra=FLAGS]...
      [--contraction_every=50] [--dry_run]
  /usr/bin/python3 bench/workloads/run.py --summary=DIR      (the tables of a finished grid)

Files under --out: jobs/WORKLOAD.CONFIG.seedN.json (one per job), runs/WORKLOAD.CONFIG.seedN/
(the job's log, run summaries, job status), grid.json (how the grid was run), summary.md and
summary.json (the tables). Exit status: 0 when every job succeeded, 1 when one failed (every
other job still runs), 2 for a usage error (an unknown name, a missing build or interpreter).
"""

import argparse
import datetime
import json
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "common"))
from metrics_lines import read_metrics_lines  # noqa: E402
EXAMPLES = os.path.join(REPO, "examples", "torch")

# Variables that would make a DDP script believe it is one rank of an outer job.
DDP_OUTER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT")


class UsageError(Exception):
    """A bad flag value, an unknown name, a missing build: the driver exits 2."""


# ---------------------------------------------------------------------------------------------
# What the grid is made of


@dataclass(frozen=True)
class Workload:
    name: str
    script: str  # file name in examples/torch/
    epochs: int | None  # the grid's default --epochs (None: the script's own)
    max_steps: int | None  # the grid's default --max_steps (None: the script's own)
    metric: str  # the table's metric
    kind: str  # "accuracy" (difference in pp), "perplexity" (in %) or "loss" (in nats)
    metrics: tuple  # every metric the script records at its final evaluation


WORKLOADS = {w.name: w for w in (
    Workload("resnet20", "resnet20.py", 15, None, "test_acc", "accuracy", ("test_acc",)),
    Workload("resnet18", "resnet18.py", 5, None, "test_acc", "accuracy", ("test_acc",)),
    Workload("lstm_lm", "lstm_lm.py", 6, None, "perplexity", "perplexity",
             ("perplexity", "val_loss", "test_perplexity")),
    Workload("char_transformer", "char_transformer.py", None, 2000, "val_loss", "loss",
             ("val_loss",)),
)}

PAPER_WARMUP = "0.015625,0.004"  # densities of epochs 0 and 1, then --density


@dataclass(frozen=True)
class Config:
    name: str
    backend: str  # "sieve", "ddp" or "none" (the script's --backend)
    flags: tuple  # the script's flags that make this configuration
    description: str
    worker_flags: tuple = ()  # sieve's worker flags (after the launcher's `--`)


CONFIGS = {c.name: c for c in (
    Config("dense", "sieve", ("--compressor=none", "--density_warmup="),
           "sieve, no compression"),
    Config("topk1", "sieve", ("--compressor=topk", "--density=0.01", "--density_warmup="),
           "sieve, Top-k 1 %"),
    Config("topk01", "sieve",
           ("--compressor=topk", "--density=0.001", f"--density_warmup={PAPER_WARMUP}"),
           "sieve, Top-k 0.1 % after warm-up"),
    Config("gaussiank01", "sieve",
           ("--compressor=gaussiank", "--density=0.001", f"--density_warmup={PAPER_WARMUP}"),
           "sieve, Gaussian-k 0.1 % after warm-up"),
    Config("topk01_nomask", "sieve",
           ("--compressor=topk", "--density=0.001", f"--density_warmup={PAPER_WARMUP}"),
           "sieve, Top-k 0.1 % after warm-up, momentum kept", ("--momentum_masking=false",)),
    Config("gaussiank01_nomask", "sieve",
           ("--compressor=gaussiank", "--density=0.001", f"--density_warmup={PAPER_WARMUP}"),
           "sieve, Gaussian-k 0.1 % after warm-up, momentum kept", ("--momentum_masking=false",)),
    Config("ddp", "ddp", (), "torch DDP (gloo), dense"),
    Config("compute", "none", (), "no communication (the compute-only bound)"),
)}

REFERENCE = "dense"  # the configuration every other one is compared with


@dataclass
class Settings:
    """Everything about the grid that is not a job's own (workload, configuration, seed)."""

    out: str
    build: str = "build"
    python: str = "/usr/bin/python3"
    workers: int = 4
    servers: int = 2
    epochs: int | None = None  # overrides every workload's default
    max_steps: int | None = None  # overrides every workload's default (0: the epochs' steps)
    extra: list = field(default_factory=list)  # script flags for every workload
    extra_for: dict = field(default_factory=dict)  # workload -> its own extra script flags
    job_timeout_s: float = 0.0  # 0: none
    contraction_every: int = 50  # sieve jobs: rank 0's contraction ratio every n rounds (0: off)

    @property
    def sieve(self):
        return os.path.join(self.build, "deploy", "sieve")


@dataclass(frozen=True)
class Job:
    workload: str
    config: str
    seed: int

    @property
    def key(self):
        return f"{self.workload}.{self.config}.seed{self.seed}"


def grid(workloads, configs, seeds):
    """The jobs in the order they run: seed by seed (a first complete table comes early), then
    workload by workload, configurations in their listed order."""
    return [Job(w, c, s) for s in seeds for w in workloads for c in configs]


def parse_names(text, known, what):
    """A comma-separated list of names out of `known` ("all": every one), in the given order."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(known)
    if not names:
        raise UsageError(f"no {what} given")
    for n in names:
        if n not in known:
            raise UsageError(f"unknown {what} '{n}' (known: {', '.join(known)})")
    return list(dict.fromkeys(names))


def parse_seeds(text):
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds takes comma-separated integers, got '{text}'") from None
    if not seeds:
        raise UsageError("no seed given")
    return list(dict.fromkeys(seeds))


def parse_extra(values):
    """--extra values: "FLAGS" for every workload or "WORKLOAD:FLAGS" for one. Returns (flags
    for all, {workload: flags})."""
    common, per = [], {}
    for value in values:
        head, sep, rest = value.partition(":")
        if sep and head in WORKLOADS and not head.startswith("-"):
            per.setdefault(head, []).extend(shlex.split(rest))
        elif sep and not head.startswith("-") and " " not in head:
            raise UsageError(f"--extra={value}: unknown workload '{head}' (known: "
                             f"{', '.join(WORKLOADS)})")
        else:
            common.extend(shlex.split(value))
    return common, per


# ---------------------------------------------------------------------------------------------
# Commands


def job_paths(job, settings):
    """Where a job's files go: its JSON, its run directory and what the run writes."""
    run_dir = os.path.join(settings.out, "runs", job.key)
    return {
        "json": os.path.join(settings.out, "jobs", f"{job.key}.json"),
        "run_dir": run_dir,
        "log": os.path.join(run_dir, "output.log"),
        "logs": os.path.join(run_dir, "logs"),
        "summaries": os.path.join(run_dir, "summary"),
        "summary_pattern": os.path.join(run_dir, "summary", "{role}-{rank}.json"),
        "status": os.path.join(run_dir, "status.json"),
        "ddp_result": os.path.join(run_dir, "ddp-result.json"),
        "metrics": os.path.join(run_dir, "metrics-0.jsonl"),
    }


def script_flags(job, settings):
    """The workload script's flags for a job (the backend's, the length, the seed, the
    configuration's, then --extra)."""
    workload, config = WORKLOADS[job.workload], CONFIGS[job.config]
    flags = []
    if config.backend != "sieve":
        flags += [f"--backend={config.backend}", f"--ddp_ranks={settings.workers}"]
    epochs = settings.epochs if settings.epochs is not None else workload.epochs
    if epochs is not None:
        flags.append(f"--epochs={epochs}")
    max_steps = settings.max_steps if settings.max_steps is not None else workload.max_steps
    if max_steps is not None:
        flags.append(f"--max_steps={max_steps}")
    flags.append(f"--seed={job.seed}")
    flags += config.flags
    flags += settings.extra
    flags += settings.extra_for.get(job.workload, [])
    return flags


def job_command(job, settings):
    """(argv, environment additions, environment removals, the script's own command) of a job.

    sieve: the launcher with the script as --worker_cmd; the summaries and the status file are
    daemon flags after `--` (routed to the workers and servers, and to the scheduler).
    ddp and compute: the script itself (its own local launcher starts the ranks), with
    --result_json naming the file its rank 0 writes the result to.
    """
    workload, config = WORKLOADS[job.workload], CONFIGS[job.config]
    paths = job_paths(job, settings)
    script = os.path.join(EXAMPLES, workload.script)
    flags = script_flags(job, settings)
    script_cmd = [settings.python, script] + flags
    if config.backend == "sieve":
        argv = [settings.sieve, "launch", f"--num_servers={settings.servers}",
                f"--num_workers={settings.workers}", "--progress=lines",
                f"--log_dir={paths['logs']}", f"--worker_cmd={shlex.join(script_cmd)}", "--",
                "--consistency=bsp", f"--summary_out={paths['summary_pattern']}",
                f"--status_file={paths['status']}"] + list(config.worker_flags)
        if settings.contraction_every > 0:  # rank 0's metrics lines (no {rank} in the name)
            argv += [f"--metrics_out={paths['metrics']}",
                     f"--metrics_every={settings.contraction_every}",
                     f"--contraction_every={settings.contraction_every}"]
        return argv, {}, (), script_cmd
    argv = script_cmd + [f"--result_json={paths['ddp_result']}"]
    return argv, {}, DDP_OUTER_ENV, argv


def shell_line(argv, env=None, unset=()):
    """A command as one line a POSIX shell runs as is."""
    prefix = []
    if env or unset:
        prefix = ["env"] + [f"-u{v}" for v in unset] + [f"{k}={v}" for k, v in env.items()]
    return shlex.join(prefix + list(argv))


# ---------------------------------------------------------------------------------------------
# Reading a job's results (files only)


def read_json(path):
    """The JSON object in `path`, or None when the file is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path, obj):
    """Writes `obj` to `path` atomically (a reader never sees half a file)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def _number(value):
    """A JSON number, or a 64-bit integer as the job status writes it (a string); else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None


def contraction_stats(path):
    """The contraction ratio ‖r − sel(r)‖² / ‖r‖² of rank 0's metrics lines (--metrics_out,
    docs/protocol.md) at the job's final density (the rounds with the smallest k, after any
    warm-up): {"rounds", "k", "mean", "max", "bound_1", "bound_2", "above_bound_2" (the share of
    those rounds above (1 − k/D)²)}, or None without such lines."""
    rows = [m for m in read_metrics_lines(path) if _number(m.get("contraction")) is not None]
    if not rows:
        return None
    k = min(m.get("k", 0) for m in rows)
    final = [m for m in rows if m.get("k", 0) == k]
    ratios = [m["contraction"] for m in final]
    bound_2 = final[-1].get("bound_2")
    above = sum(1 for m in final if bound_2 is not None and m["contraction"] > m["bound_2"])
    return {"rounds": len(final), "k": k, "mean": statistics.fmean(ratios), "max": max(ratios),
            "bound_1": final[-1].get("bound_1"), "bound_2": bound_2,
            "above_bound_2": above / len(final)}


def collect_sieve(paths, workload, workers):
    """A sieve job's results from its run summaries and its final job status.

    Metrics: rank 0's summary (only rank 0 evaluates); a metric it lacks is taken from the
    status's progress (test_accuracy, metrics: the lowest-ranked worker's). Bytes: the sum over
    every worker's summary of bytes_up / bytes_down / dense_bytes; without summaries, the
    status's bytes_pushed / bytes_pulled."""
    out = {"metrics": {}, "metrics_source": {}, "steps": None, "bytes_pushed": None,
           "bytes_pulled": None, "dense_bytes": None, "bytes_ratio": None,
           "worker_summaries": 0, "job_phase": None, "job_failure": None}
    summaries = []
    for rank in range(workers):
        s = read_json(os.path.join(paths["summaries"], f"worker-{rank}.json"))
        if s is not None:
            summaries.append(s)
    out["worker_summaries"] = len(summaries)
    rank0 = next((s for s in summaries if s.get("rank") == 0), None)
    status = read_json(paths["status"])
    progress = (status or {}).get("progress") or {}
    if status is not None:
        out["job_phase"] = status.get("phase")
        if status.get("phase") == "JOB_FAILED":
            out["job_failure"] = status.get("failure")
    for name in workload.metrics:
        value = _number(rank0.get(name)) if rank0 is not None else None
        source = "summary_out worker-0"
        if value is None:
            if name == "test_acc":
                value = _number(progress.get("test_accuracy"))
            else:
                value = _number((progress.get("metrics") or {}).get(name))
            source = "status_file progress"
        if value is not None:
            out["metrics"][name] = value
            out["metrics_source"][name] = source
    if rank0 is not None:
        out["steps"] = _number(rank0.get("rounds"))
        out["worker0_seconds"] = _number(rank0.get("seconds"))
        out["mean_round_s"] = _number(rank0.get("mean_round_s"))
    elif progress:
        out["steps"] = _number(progress.get("round"))
    if summaries:
        sums = {}
        for key in ("bytes_up", "bytes_down", "dense_bytes"):
            values = [_number(s.get(key)) for s in summaries]
            sums[key] = sum(v for v in values if v is not None)
        out["bytes_pushed"], out["bytes_pulled"] = sums["bytes_up"], sums["bytes_down"]
        out["dense_bytes"] = sums["dense_bytes"]
        if sums["dense_bytes"]:
            out["bytes_ratio"] = sums["bytes_up"] / sums["dense_bytes"]
        out["bytes_source"] = f"summary_out, {len(summaries)} of {workers} workers"
    elif progress:
        out["bytes_pushed"] = _number(progress.get("bytes_pushed"))
        out["bytes_pulled"] = _number(progress.get("bytes_pulled"))
        out["bytes_source"] = "status_file progress"
    out["contraction"] = contraction_stats(paths["metrics"])
    return out


def collect_ddp(paths, workload):
    """A DDP job's results from the file its rank 0 wrote at the end (the script's
    --result_json)."""
    out = {"metrics": {}, "metrics_source": {}, "steps": None}
    result = read_json(paths["ddp_result"])
    if result is None:
        return out
    for name in workload.metrics:
        value = _number((result.get("metrics") or {}).get(name))
        if value is not None:
            out["metrics"][name] = value
            out["metrics_source"][name] = "result_json"
    out["steps"] = _number(result.get("steps"))
    return out


# ---------------------------------------------------------------------------------------------
# Running a job


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the driver: the running job is stopped and the driver exits."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, _frame):
    raise Interrupted(signum)


def _stop(proc, grace_s=15.0):
    """Stops a job's whole process group: SIGTERM (the launcher and the DDP script then stop
    their own processes), SIGKILL after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _clear_run_files(paths):
    """Removes what an earlier attempt of the same job left, so that no stale result is read."""
    for path in (paths["status"], paths["ddp_result"]):
        if os.path.exists(path):
            os.remove(path)
    if os.path.isdir(paths["summaries"]):
        for name in os.listdir(paths["summaries"]):
            os.remove(os.path.join(paths["summaries"], name))


def _tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_job(job, settings):
    """Runs one job to its end and returns its record (also written to its JSON file)."""
    workload, config = WORKLOADS[job.workload], CONFIGS[job.config]
    paths = job_paths(job, settings)
    argv, env_add, env_del, script_cmd = job_command(job, settings)
    os.makedirs(paths["run_dir"], exist_ok=True)
    os.makedirs(paths["summaries"], exist_ok=True)
    os.makedirs(paths["logs"], exist_ok=True)
    _clear_run_files(paths)
    env = {k: v for k, v in os.environ.items() if k not in env_del}
    env.update(env_add)
    record = {
        "workload": job.workload, "config": job.config, "seed": job.seed,
        "backend": config.backend, "workers": settings.workers,
        "servers": settings.servers if config.backend == "sieve" else 0,
        "consistency": "bsp" if config.backend == "sieve" else None,
        "metric": workload.metric, "metric_kind": workload.kind,
        "command": shell_line(argv, env_add, env_del), "argv": argv, "cwd": REPO,
        "script_command": shlex.join(script_cmd),
        "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_avg_before": list(os.getloadavg()),
    }
    start = time.monotonic()
    timed_out = False
    with open(paths["log"], "w") as log:
        log.write(f"$ {record['command']}\n")
        log.flush()
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=settings.job_timeout_s or None)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(proc)
        except BaseException:  # the driver is interrupted: the job goes with it
            _stop(proc)
            raise
    record["wall_s"] = round(time.monotonic() - start, 3)
    record["exit_code"] = proc.returncode
    record["timed_out"] = timed_out
    record["load_avg_after"] = list(os.getloadavg())
    if config.backend == "sieve":
        record.update(collect_sieve(paths, workload, settings.workers))
    else:
        record.update(collect_ddp(paths, workload))
    record["value"] = record["metrics"].get(workload.metric)
    if timed_out:
        record["error"] = f"timed out after {settings.job_timeout_s:g} s (--job_timeout_s)"
    elif proc.returncode != 0:
        record["error"] = f"exited with status {proc.returncode}"
    elif record["value"] is None:
        record["error"] = f"exited 0 but no {workload.metric} was recorded"
    else:
        record["error"] = None
    record["ok"] = record["error"] is None
    record["files"] = {k: paths[k]
                       for k in ("log", "logs", "summaries", "status", "ddp_result", "metrics")}
    write_json(paths["json"], record)
    return record


def finished_before(job, settings):
    """The job's earlier record when it succeeded with the very same command (a grid run again
    into the same --out skips such jobs), else None."""
    previous = read_json(job_paths(job, settings)["json"])
    if not previous or not previous.get("ok"):
        return None
    argv, env_add, env_del, _ = job_command(job, settings)
    return previous if previous.get("command") == shell_line(argv, env_add, env_del) else None


# ---------------------------------------------------------------------------------------------
# The tables


def spread(values):
    """(n, mean, sample standard deviation or None when n < 2) of a list of numbers."""
    n = len(values)
    if n == 0:
        return 0, None, None
    mean = statistics.fmean(values)
    return n, mean, (statistics.stdev(values) if n > 1 else None)


def difference(kind, value, reference):
    """`value` against `reference`: accuracy in percentage points, perplexity in per cent of the
    reference, a loss in nats. None when either is unknown."""
    if value is None or reference is None:
        return None
    if kind == "accuracy":
        return (value - reference) * 100.0
    if kind == "perplexity":
        return (value / reference - 1.0) * 100.0
    return value - reference


UNITS = {"accuracy": "pp", "perplexity": "%", "loss": "nats"}


def summarize(records):
    """{workload: {"metric", "kind", "rows": [row per configuration]}} from job records; a
    row has n (successful seeds), seeds, failed, mean, std, diff (against dense), bytes_pushed
    (mean over seeds), bytes_ratio, wall_s (mean), s_per_step (mean), contraction (the mean over
    seeds of rank 0's mean contraction ratio at the final density) and bound_2 ((1 − k/D)²)."""
    by_workload = {}
    for r in records:
        by_workload.setdefault(r["workload"], {}).setdefault(r["config"], []).append(r)
    order = list(WORKLOADS) + sorted(set(by_workload) - set(WORKLOADS))
    tables = {}
    for name in order:
        if name not in by_workload:
            continue
        configs = by_workload[name]
        first = next(iter(configs.values()))[0]
        metric, kind = first.get("metric"), first.get("metric_kind")
        rows = []
        for config in list(CONFIGS) + sorted(set(configs) - set(CONFIGS)):
            if config not in configs:
                continue
            runs = sorted(configs[config], key=lambda r: r["seed"])
            good = [r for r in runs if r.get("ok") and r.get("value") is not None]
            n, mean, std = spread([r["value"] for r in good])
            if config in CONFIGS and CONFIGS[config].backend == "none":
                mean = std = None  # a model trained on 1/W of the data: its time only

            def mean_of(key):
                values = [r[key] for r in good if r.get(key) is not None]
                return statistics.fmean(values) if values else None

            steps_rate = [r["wall_s"] / r["steps"] for r in good
                          if r.get("wall_s") is not None and r.get("steps")]
            # A dense job selects all of D (k = D): its ratio and bound are 0, not a sample.
            contraction = [r["contraction"] for r in good
                           if r.get("contraction") and (r["contraction"].get("bound_2") or 0) > 0]
            rows.append({"config": config, "n": n, "seeds": [r["seed"] for r in good],
                         "failed": [r["seed"] for r in runs if r not in good],
                         "mean": mean, "std": std, "bytes_pushed": mean_of("bytes_pushed"),
                         "bytes_ratio": mean_of("bytes_ratio"), "wall_s": mean_of("wall_s"),
                         "s_per_step": statistics.fmean(steps_rate) if steps_rate else None,
                         "contraction": (statistics.fmean(c["mean"] for c in contraction)
                                         if contraction else None),
                         "bound_2": contraction[0]["bound_2"] if contraction else None})
        reference = next((r["mean"] for r in rows if r["config"] == REFERENCE), None)
        for row in rows:
            row["diff"] = (None if row["config"] == REFERENCE
                           else difference(kind, row["mean"], reference))
        tables[name] = {"metric": metric, "kind": kind, "rows": rows}
    return tables


def _fmt_value(kind, value, std):
    if value is None:
        return "—"
    if kind == "accuracy":
        text = f"{value * 100:.2f} %"
        return text + (f" ± {std * 100:.2f} pp" if std is not None else "")
    if kind == "perplexity":
        return f"{value:.2f}" + (f" ± {std:.2f}" if std is not None else "")
    return f"{value:.4f}" + (f" ± {std:.4f}" if std is not None else "")


def _fmt_diff(kind, diff, config):
    if config == REFERENCE:
        return "reference"
    if diff is None:
        return "—"
    digits = 4 if kind == "loss" else 2
    sign = "+" if diff > 0 else "±" if diff == 0 else "−"
    return f"{sign}{abs(diff):.{digits}f} {UNITS.get(kind, '')}".rstrip()


def _fmt_bytes(n):
    if n is None:
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _fmt_seconds(s):
    if s is None:
        return "—"
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s"


BETTER = {"accuracy": "higher is better", "perplexity": "lower is better",
          "loss": "nats per token, lower is better"}


def markdown(tables):
    """The tables as Markdown, one section per workload."""
    out = []
    for name, t in tables.items():
        kind = t["kind"]
        out.append(f"### {name}: final {t['metric']} ({BETTER.get(kind, kind)})\n")
        out.append(f"| config | seeds | {t['metric']} (mean ± std over seeds) | vs {REFERENCE} "
                   "| pushed (all workers) | pushed / dense fp32 | contraction / (1 − k/D)² "
                   "| wall per job | s per step | failed seeds |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for row in t["rows"]:
            ratio = f"{row['bytes_ratio']:.4f}" if row["bytes_ratio"] is not None else "—"
            step = f"{row['s_per_step']:.3f}" if row["s_per_step"] is not None else "—"
            failed = ", ".join(str(s) for s in row["failed"]) or "—"
            seeds = ", ".join(str(s) for s in row["seeds"]) or "—"
            contraction = (f"{row['contraction']:.4f} / {row['bound_2']:.4f}"
                           if row.get("contraction") is not None and row.get("bound_2") is not None
                           else "—")
            out.append(f"| {row['config']} | {seeds} | {_fmt_value(kind, row['mean'], row['std'])}"
                       f" | {_fmt_diff(kind, row['diff'], row['config'])} "
                       f"| {_fmt_bytes(row['bytes_pushed'])} | {ratio} | {contraction} "
                       f"| {_fmt_seconds(row['wall_s'])} | {step} | {failed} |")
        out.append("")
    return "\n".join(out)


def load_records(out_dir):
    """Every job record under OUT/jobs/."""
    jobs_dir = os.path.join(out_dir, "jobs")
    if not os.path.isdir(jobs_dir):
        raise UsageError(f"{jobs_dir} does not exist: is {out_dir} a grid's --out?")
    records = []
    for name in sorted(os.listdir(jobs_dir)):
        if name.endswith(".json"):
            r = read_json(os.path.join(jobs_dir, name))
            if r is not None and "workload" in r and "config" in r:
                records.append(r)
    return records


def write_summary(out_dir):
    """Writes OUT/summary.md and OUT/summary.json from the job records; returns the Markdown."""
    tables = summarize(load_records(out_dir))
    text = (f"Workload grid {out_dir}: std is the sample standard deviation over the seeds "
            f"(shown from 2 seeds); differences are of the means, against `{REFERENCE}` (sieve, "
            "no compression); accuracy in percentage points, perplexity in per cent, loss in "
            "nats. s per step: wall time per job / steps, start-up and evaluation included.\n\n"
            + markdown(tables))
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(text)
    write_json(os.path.join(out_dir, "summary.json"), tables)
    return text


# ---------------------------------------------------------------------------------------------
# The driver


def make_parser():
    p = argparse.ArgumentParser(
        prog="bench/workloads/run.py",
        description="Runs the workload grid (examples/torch/ under sieve's compressors and torch "
                    "DDP) and writes one JSON per job and Markdown tables (bench/workloads/"
                    "README.md).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--workloads", default="all", help=f"comma-separated: {', '.join(WORKLOADS)}")
    p.add_argument("--configs", default="all", help=f"comma-separated: {', '.join(CONFIGS)}")
    p.add_argument("--seeds", default="1,2", help="comma-separated seeds (the scripts' --seed)")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs of every workload (default: resnet20 15, resnet18 5, lstm_lm 6, "
                        "char_transformer the script's, capped by its --max_steps)")
    p.add_argument("--max_steps", type=int, default=None,
                   help="steps of every workload (default: char_transformer 2000, the others "
                        "their epochs'; 0: the epochs' steps)")
    p.add_argument("--workers", type=int, default=4, help="workers (DDP: ranks)")
    p.add_argument("--servers", type=int, default=2, help="sieve servers")
    p.add_argument("--out", default=None,
                   help="output directory (default results/workloads/<UTC timestamp>); "
                        "jobs that already succeeded there with the same command are skipped")
    p.add_argument("--build", default="build",
                   help="sieve's build directory (the launcher is BUILD/deploy/sieve)")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="the interpreter of the workload scripts (it needs torch)")
    p.add_argument("--extra", action="append", default=[], metavar="[WORKLOAD:]FLAGS",
                   help="extra script flags, e.g. --extra='--eval_limit=2000' (every workload) "
                        "or --extra='resnet20:--width=4' (one workload); repeatable")
    p.add_argument("--job_timeout_s", type=float, default=0,
                   help="stop a job after this many seconds and count it failed (0: never)")
    p.add_argument("--contraction_every", type=int, default=50,
                   help="sieve jobs: rank 0 writes its metrics lines (runs/JOB/metrics-0.jsonl) "
                        "with the contraction ratio every n rounds; the table shows its mean at "
                        "the final density against (1 - k/D)^2 (0: off)")
    p.add_argument("--rerun", action="store_true",
                   help="run jobs again even when --out holds their successful record")
    p.add_argument("--dry_run", action="store_true", help="print every command, run nothing")
    p.add_argument("--summary", metavar="DIR", default=None,
                   help="print (and write DIR/summary.md) the tables of a grid's --out; runs "
                        "nothing")
    return p


def settings_from(args):
    if args.workers < 1 or args.servers < 1:
        raise UsageError("--workers and --servers must be at least 1")
    if args.epochs is not None and args.epochs < 1:
        raise UsageError("--epochs must be at least 1")
    if args.max_steps is not None and args.max_steps < 0:
        raise UsageError("--max_steps must be at least 0")
    if args.contraction_every < 0:
        raise UsageError("--contraction_every must be at least 0")
    extra, extra_for = parse_extra(args.extra)
    out = args.out or os.path.join(
        "results", "workloads", datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y%m%d-%H%M%S"))
    return Settings(out=os.path.abspath(out), build=os.path.abspath(args.build),
                    python=args.python, workers=args.workers, servers=args.servers,
                    epochs=args.epochs, max_steps=args.max_steps, extra=extra,
                    extra_for=extra_for, job_timeout_s=args.job_timeout_s,
                    contraction_every=args.contraction_every)


def check_setup(settings, jobs):
    """Problems that would fail every job: the interpreter, the build (for sieve jobs), the
    scripts. Returns a list of messages."""
    problems = []
    if not (os.path.isfile(settings.python) and os.access(settings.python, os.X_OK)):
        problems.append(f"the interpreter {settings.python} does not exist (--python)")
    if any(CONFIGS[j.config].backend == "sieve" for j in jobs):
        if not (os.path.isfile(settings.sieve) and os.access(settings.sieve, os.X_OK)):
            problems.append(f"{settings.sieve} does not exist: build sieve first "
                            "(scripts/setup) or give --build=DIR")
        module = os.path.join(settings.build, "worker", "python", "sieve", "__init__.py")
        if not os.path.isfile(module):
            problems.append(f"{module} does not exist: the build has no Python module (it "
                            "needs Debian's pybind11-dev and python3-dev)")
    for name in sorted({j.workload for j in jobs}):
        script = os.path.join(EXAMPLES, WORKLOADS[name].script)
        if not os.path.isfile(script):
            problems.append(f"{script} does not exist")
    return problems


def sieve_version(settings):
    try:
        r = subprocess.run([settings.sieve, "--version"], capture_output=True, text=True,
                           timeout=30)
        return r.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.summary is not None:
            print(write_summary(os.path.abspath(args.summary)))
            return 0
        workloads = parse_names(args.workloads, WORKLOADS, "workload")
        configs = parse_names(args.configs, CONFIGS, "config")
        seeds = parse_seeds(args.seeds)
        settings = settings_from(args)
        jobs = grid(workloads, configs, seeds)
        problems = check_setup(settings, jobs)
        if problems and not args.dry_run:
            raise UsageError("; ".join(problems))
    except UsageError as e:
        parser.error(str(e))  # exits 2

    if args.dry_run:
        for p in problems:
            print(f"# warning: {p}")
        print(f"# {len(jobs)} jobs; output would go to {settings.out}")
        for i, job in enumerate(jobs, 1):
            argv_, env_add, env_del, script_cmd = job_command(job, settings)
            print(f"# [{i}/{len(jobs)}] {job.key}")
            if CONFIGS[job.config].backend != "sieve":
                print(f"#   (the script's own command: {shlex.join(script_cmd)})")
            print(shell_line(argv_, env_add, env_del))
        return 0

    os.makedirs(settings.out, exist_ok=True)
    write_json(os.path.join(settings.out, "grid.json"), {
        "argv": sys.argv, "workloads": workloads, "configs": configs, "seeds": seeds,
        "workers": settings.workers, "servers": settings.servers, "epochs": settings.epochs,
        "max_steps": settings.max_steps, "extra": settings.extra,
        "extra_for": settings.extra_for, "build": settings.build, "python": settings.python,
        "sieve_version": sieve_version(settings) if os.path.isfile(settings.sieve) else None,
        "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count()})
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGINT, _raise_interrupted)
    print(f"workload grid: {len(jobs)} jobs -> {settings.out}", flush=True)
    failed, grid_start = [], time.monotonic()
    try:
        for i, job in enumerate(jobs, 1):
            done = None if args.rerun else finished_before(job, settings)
            if done is not None:
                print(f"[{i}/{len(jobs)}] {job.key}: done before ({done['metric']}="
                      f"{done['value']:.6g}), skipped", flush=True)
                continue
            print(f"[{i}/{len(jobs)}] {job.key}: running", flush=True)
            r = run_job(job, settings)
            elapsed = time.monotonic() - grid_start
            if r["ok"]:
                extra = (f", pushed {_fmt_bytes(r['bytes_pushed'])}"
                         if r.get("bytes_pushed") is not None else "")
                print(f"[{i}/{len(jobs)}] {job.key}: {r['metric']}={r['value']:.6g} in "
                      f"{_fmt_seconds(r['wall_s'])}{extra} (grid {_fmt_seconds(elapsed)})",
                      flush=True)
            else:
                failed.append(job.key)
                print(f"[{i}/{len(jobs)}] {job.key}: FAILED: {r['error']} after "
                      f"{_fmt_seconds(r['wall_s'])}; log {r['files']['log']}, its end:\n"
                      f"{_tail(r['files']['log'])}", flush=True)
    except Interrupted as e:
        print(f"workload grid: interrupted ({e}); the running job was stopped", flush=True)
        return 128 + e.signum
    print(write_summary(settings.out), flush=True)
    if failed:
        print(f"workload grid: {len(failed)} of {len(jobs)} jobs failed: {', '.join(failed)}",
              flush=True)
        return 1
    print(f"workload grid: all {len(jobs)} jobs succeeded; tables in "
          f"{os.path.join(settings.out, 'summary.md')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
