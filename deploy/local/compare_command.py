#!/usr/bin/env python3
"""sieve compare: run a grid of training jobs and compare them (run through `sieve compare`).

usage: sieve compare CONFIG [--out=DIR] [--force] [--plots_only] [--dry_run]
                            [--figures_out=DIR] [--progress_every=S]

CONFIG (YAML; any other top-level key is an error):
  name: fnn3-sync-vs-async      # results go to results/<name>/ (or --out)
  servers: 2                    # servers per job (default 1)
  flags:                        # daemon flags shared by every cell (routed like `sieve launch`)
    model: fnn3
    epochs: 5
    batch_size: 32
  grid:                         # every combination is one cell; each key is a list or a value
    consistency: [bsp, asp]     # --consistency: bsp, asp, ssp, or ssp:N (SSP with --staleness=N)
    compressor: [none, topk, gaussiank]
    density: [0.001]            # --density (collapsed to 1 for compressor none)
    workers: [4]                # workers per job
    link: [local]               # local (loopback, `sieve launch`) or a netns-emulated link:
                                # 1gbit, 10gbit, 500mbit ... (deploy/local/netns/run; root);
                                # RATE,RANK:RATE... gives worker RANK its own link, e.g.
                                # "1gbit,3:100mbit" (worker 3 on 100 Mbit/s, every other node 1 Gbit/s)
    straggler: [none, "3:x3"]   # --straggler of the workers: none, or SPEC / RANK:SPEC items with
                                # SPEC delay:T, xF or exp:T (worker/trainer/straggler.h)
  exclude:                      # optional: combinations left out of the grid; a cell is left out
    - {link: "1gbit,3:100mbit", straggler: "3:x3"}   # when it matches every key of an entry
  repeats: 1                    # runs per cell with seeds seed, seed+1, ... (--seed, default 1);
                                # the table shows mean ± sample std over them
  target_accuracy: 0.85         # the table's "time to target" column (default 0.85)
  delay: 1ms                    # optional, netns cells only (needs tc netem)
  contraction_every: 10         # optional: contraction ratio and bounds every n rounds
  histogram_rounds: [0, 500]    # optional: residual histograms (rank 0) at these rounds
  timeout: 3600                 # per run, seconds
  worker_cmd: python3 mlp.py    # optional: every worker runs this command instead of sieve-worker
                                # (`sieve launch --worker_cmd`; local links only); the job reaches
                                # it in SIEVE_* variables, the worker flags it implements in
                                # SIEVE_WORKER_FLAGS (docs/worker-api.md, "Environment variables")

A cell id names its grid values: bsp-topk-d0.001-w4-1gbit+w3_100mbit-sw3_x3 is BSP, Top-k at
0.001, 4 workers on 1 Gbit/s links but worker 3 on 100 Mbit/s, worker 3 computing 3x slower
(ssp:2 reads ssp2; the -s part is left out without a straggler). An unknown consistency or
straggler spec, a bad rate, or a rank the cell has no worker for is a usage error naming it.

Before anything runs, every flag each cell passes is checked against the daemons' own flags
(`--helpxml` of sieve-scheduler, sieve-server and sieve-worker in the build tree): a flag that no
daemon defines, or a value of the wrong type, is a usage error (exit 2) naming the cell and the
flag. --dry_run does only that check and lists the runs.

Each run (a cell, or a cell and seed when repeats > 1) lives in results/<name>/cells/<run>/: log,
per-rank metrics JSON lines, key.json (its cache key: every flag of every daemon, the launcher's
own settings, worker_cmd included, and a SHA-256 of each program's bytes and of each word of
worker_cmd that names a file) and cell.json once it finished. A finished
run is reused on the next invocation only when its key is unchanged; otherwise it reruns and the
change is printed. --force reruns everything. While a run goes, a progress line (epoch, round,
loss, test accuracy so far) is printed every --progress_every seconds (default 5).

Outputs: summary.csv (one row per cell: means, sample stds, deltas against the BSP dense cell of
the same scenario: workers, link and straggler), runs.csv (one row per run), summary.md, and the plots that have data:
accuracy_vs_time.png (wall-clock since training started) and accuracy_vs_epoch.png (with
repeats: each seed faint, their mean bold), loss.png (smoothed), bytes_per_round.png,
round_breakdown.png, contraction.png (sparse cells with contraction samples; with the (1 - k/d)
and (1 - k/d)^2 bounds), histograms.png (cells with histogram_rounds: rank 0's error-feedback
residual of each cell's first run in 0.25-sigma bins at each chosen round, log scale, against
the normal distribution fitted by mean and sigma, with the excess kurtosis estimated from the
bins); with several scenarios, accuracy_vs_time_by_scenario.png (a panel per scenario) and
time_to_target.png (bars, mean ± std). --figures_out=DIR also writes compact copies of the plots to DIR (for docs/).
"""
import argparse
import csv
import difflib
import hashlib
import itertools
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time

import yaml

GRID_KEYS = ["consistency", "compressor", "density", "workers", "link", "straggler"]
GRID_DEFAULTS = {"consistency": ["bsp"], "compressor": ["topk"], "density": [0.001],
                 "workers": [2], "link": ["local"], "straggler": ["none"]}
TOP_KEYS = ["name", "servers", "flags", "grid", "exclude", "repeats", "target_accuracy", "delay",
            "contraction_every", "histogram_rounds", "timeout", "worker_cmd"]
DEFAULT_TARGET = 0.85
DEFAULT_SEED = 1  # the daemons' --seed default
DAEMONS = [("scheduler", "sieve-scheduler"), ("server", "sieve-server"), ("worker", "sieve-worker")]
PROGRAMS = [("deploy", "sieve")] + DAEMONS
RUN_FIELDS = ["run", "cell", "seed", "consistency", "compressor", "density", "workers", "link",
              "straggler", "status", "wall_s", "train_s", "rounds", "epochs", "final_loss", "test_acc",
              "time_to_target_s", "mean_round_s", "bytes_up_per_round", "bytes_down_per_round",
              "push_ratio", "max_staleness", "mean_staleness", "t_compute_ms", "t_select_ms",
              "t_comm_ms", "mean_contraction", "near_chance"]
# Per-cell means over the runs that finished (sample std next to the first three).
MEAN_FIELDS = ["test_acc", "train_s", "time_to_target_s", "wall_s", "final_loss", "rounds",
               "epochs", "mean_round_s", "bytes_up_per_round", "bytes_down_per_round",
               "push_ratio", "mean_staleness", "t_compute_ms", "t_select_ms", "t_comm_ms",
               "mean_contraction"]
STD_FIELDS = ["test_acc", "train_s", "time_to_target_s"]
CELL_FIELDS = (["cell", "consistency", "compressor", "density", "workers", "link", "straggler",
                "runs", "runs_ok", "status", "target_accuracy", "target_reached"] + MEAN_FIELDS +
               [f + "_std" for f in STD_FIELDS] +
               ["max_staleness", "acc_delta_vs_base", "time_ratio_vs_base", "base_cell"])


def fail(msg):
    print("sieve compare: " + msg, file=sys.stderr)
    sys.exit(2)


def as_list(v):
    return v if isinstance(v, list) else [v]


def did_you_mean(word, known):
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_config(cfg, path):
    """Returns cfg or exits 2 naming what is wrong (unknown keys, bad types)."""
    if not isinstance(cfg, dict) or "name" not in cfg:
        fail(f"{path}: expected a mapping with at least 'name'")
    for k in cfg:
        if k not in TOP_KEYS:
            fail(f"{path}: unknown key '{k}'{did_you_mean(str(k), TOP_KEYS)}; "
                 f"known keys: {', '.join(TOP_KEYS)}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(cfg["name"])):
        fail("name may only hold letters, digits, '_', '.', '-'")
    grid = cfg.get("grid") or {}
    if not isinstance(grid, dict):
        fail("'grid' must be a mapping of grid key -> list of values")
    for k in grid:
        if k not in GRID_KEYS:
            fail(f"unknown grid key '{k}'{did_you_mean(str(k), GRID_KEYS)}; known: {GRID_KEYS}")
    exclude = cfg.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        fail("'exclude' must be a list of mappings grid key -> value")
    for e in exclude:
        for k in e:
            if k not in GRID_KEYS:
                fail(f"unknown grid key '{k}' in 'exclude'{did_you_mean(str(k), GRID_KEYS)}")
    flags = cfg.get("flags") or {}
    if not isinstance(flags, dict):
        fail("'flags' must be a mapping of daemon flag -> value")
    for k in ("consistency", "compressor", "density", "metrics_out", "num_workers", "num_servers",
              "straggler"):
        if k in flags:
            fail(f"flag '{k}' is set per cell by the grid/driver; remove it from 'flags'")
    repeats = cfg.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        fail(f"'repeats' must be an integer >= 1, got {repeats!r}")
    if repeats > 1 and "seed" in flags and not isinstance(flags["seed"], int):
        fail("'flags: seed' must be an integer when repeats > 1")
    target = cfg.get("target_accuracy", DEFAULT_TARGET)
    if not isinstance(target, (int, float)) or isinstance(target, bool) or not 0 < target <= 1:
        fail(f"'target_accuracy' must be a number in (0, 1], got {target!r}")
    if "staleness" in flags and any(str(c).startswith("ssp:") for c in
                                    as_list(grid.get("consistency", []))):
        fail("'flags: staleness' and a consistency ssp:N both set the SSP bound; keep one")
    worker_cmd = cfg.get("worker_cmd")
    if worker_cmd is not None:
        if not isinstance(worker_cmd, str) or not worker_cmd.strip():
            fail(f"'worker_cmd' must be a command line (a string), got {worker_cmd!r}")
        try:
            shlex.split(worker_cmd)
        except ValueError as e:
            fail(f"'worker_cmd': {e}")
    for c in cells_of(cfg):
        check_cell(c)
        if worker_cmd is not None and not is_local(c["link"]):
            fail(f"cell {c['id']}: worker_cmd runs only on local links (sieve launch), not on "
                 f"link {c['link']}")
    return cfg


# A --straggler SPEC (worker/trainer/straggler.h; the worker checks it again) and a tc rate.
STRAGGLER_SPEC = r"none|x(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)|(?:delay|exp):[0-9.]+(?:us|ms|s)"
RATE = r"[0-9]+(?:\.[0-9]+)?(?:[kmg]?bit|[kmg]?bps)|none"


def per_rank_items(text, item_re, what, workers):
    """Checks `SPEC[,RANK:SPEC...]` (at most one plain SPEC, each rank once and < workers);
    returns an error message naming the bad item, or None."""
    plain, ranks = 0, set()
    for item in str(text).split(","):
        m = re.fullmatch(r"([0-9]+):(.*)", item)
        spec = m.group(2) if m else item
        if not re.fullmatch(item_re, spec) or (spec.startswith("x") and float(spec[1:]) < 1):
            return f"unknown {what} '{spec}' in '{text}'"
        if m is None:
            plain += 1
            if plain > 1:
                return f"{what} '{text}' has two values for every worker; use RANK:VALUE for one"
            continue
        rank = int(m.group(1))
        if rank in ranks:
            return f"{what} '{text}' names worker {rank} twice"
        if rank >= workers:
            return (f"{what} '{item}' is for worker {rank}, but the cell has {workers} workers "
                    f"(ranks 0..{workers - 1})")
        ranks.add(rank)
    return None


def check_cell(c):
    """Exits 2 naming the cell and the value when a grid value cannot be run."""
    cons = c["consistency"]
    if not re.fullmatch(r"bsp|asp|ssp(?::[0-9]+)?", cons):
        fail(f"cell {c['id']}: unknown consistency '{cons}' (expected bsp, asp, ssp or ssp:N)")
    if cons.startswith("ssp:") and int(cons[4:]) < 1:
        fail(f"cell {c['id']}: the staleness bound of '{cons}' must be >= 1")
    if c["straggler"] != "none":
        why = per_rank_items(c["straggler"], STRAGGLER_SPEC, "straggler spec", c["workers"])
        if why:
            fail(f"cell {c['id']}: {why} (SPEC: none, delay:T, xF, exp:T; T like 5ms)")
    if not is_local(c["link"]):
        why = per_rank_items(c["link"], RATE, "link rate", c["workers"])
        if why:
            fail(f"cell {c['id']}: {why} (a rate: 1gbit, 500mbit, ...)")
    elif "," in c["link"] or ":" in c["link"]:
        fail(f"cell {c['id']}: link '{c['link']}': per-worker links need the netns harness "
             f"(a rate such as 10gbit,3:1gbit), not loopback")


def load_config(path):
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        fail(f"cannot read {path}: {e}")
    return check_config(cfg, path)


def fmt_density(d):
    return ("%g" % float(d))


def id_part(text):
    """A grid value as part of a cell id (a folder name): `ssp:2` -> ssp2, `1gbit,3:100mbit` ->
    1gbit+w3_100mbit, `3:delay:5ms` -> w3_delay5ms."""
    out = []
    for item in str(text).split(","):
        m = re.fullmatch(r"([0-9]+):(.*)", item)
        rest = re.sub(r"[^A-Za-z0-9.]", "", m.group(2) if m else item)
        out.append(f"w{m.group(1)}_{rest}" if m else rest)
    return "+".join(out)


def excluded(cell, entry):
    """Whether `cell` matches every key of an `exclude:` entry (density as a number)."""
    for k, v in entry.items():
        if k == "density" and cell["compressor"] != "none":
            if float(v) != cell["density"]:
                return False
        elif k == "workers":
            if int(v) != cell["workers"]:
                return False
        elif str(v) != str(cell[k]):
            return False
    return True


def cells_of(cfg):
    grid = {k: as_list((cfg.get("grid") or {}).get(k, GRID_DEFAULTS[k])) for k in GRID_KEYS}
    seen, cells = set(), []
    for values in itertools.product(*(grid[k] for k in GRID_KEYS)):
        c = dict(zip(GRID_KEYS, values))
        c["workers"] = int(c["workers"])
        c["density"] = 1.0 if c["compressor"] == "none" else float(c["density"])
        c["link"] = str(c["link"])
        c["consistency"] = str(c["consistency"])
        c["straggler"] = str(c["straggler"])
        cid = "%s-%s-d%s-w%d-%s" % (id_part(c["consistency"]), c["compressor"],
                                   fmt_density(c["density"]), c["workers"], id_part(c["link"]))
        if c["straggler"] != "none":
            cid += "-s" + id_part(c["straggler"])
        if cid in seen or any(excluded(c, e) for e in cfg.get("exclude") or []):
            continue
        seen.add(cid)
        c["id"] = cid
        cells.append(c)
    return cells


def runs_of(cfg, cells):
    """One run per (cell, repeat): dicts with cell, seed (None: the flags' own) and id."""
    repeats = int(cfg.get("repeats", 1))
    base = int((cfg.get("flags") or {}).get("seed", DEFAULT_SEED))
    runs = []
    for c in cells:
        for i in range(repeats):
            seed = None if repeats == 1 else base + i
            rid = c["id"] if seed is None else f"{c['id']}-seed{seed}"
            runs.append({"cell": c, "seed": seed, "id": rid})
    return runs


def flag_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def flag_words(flags):
    return [f"--{k}={flag_value(v)}" for k, v in flags.items()]


def run_flags(cfg, run, cell_dir):
    """Every daemon flag a run passes (name -> value), in command-line order."""
    cell = run["cell"]
    flags = dict(cfg.get("flags") or {})
    flags["consistency"], _, bound = cell["consistency"].partition(":")
    if bound:
        flags["staleness"] = int(bound)
    if cell["straggler"] != "none":
        flags["straggler"] = cell["straggler"]
    flags["compressor"] = cell["compressor"]
    flags["density"] = cell["density"]
    if run["seed"] is not None:
        flags["seed"] = run["seed"]
    flags.setdefault("progress", "log")
    if cfg.get("contraction_every"):
        flags["contraction_every"] = int(cfg["contraction_every"])
    if cfg.get("histogram_rounds"):
        flags["histogram_rounds"] = ",".join(str(int(r)) for r in as_list(cfg["histogram_rounds"]))
    flags["metrics_out"] = os.path.join(os.path.abspath(cell_dir), "metrics-{rank}.jsonl")
    return flags


def is_local(link):
    return link in ("local", "loopback", "none")


def run_command(cfg, run, cell_dir, build, repo):
    """The command line of one run: `sieve launch` (loopback) or deploy/local/netns/run."""
    cell = run["cell"]
    servers = int(cfg.get("servers", 1))
    words = flag_words(run_flags(cfg, run, cell_dir))
    if is_local(cell["link"]):
        cmd = [os.path.join(build, "deploy", "sieve"), "launch", f"--num_servers={servers}",
               f"--num_workers={cell['workers']}"]
        if cfg.get("worker_cmd"):
            cmd.append(f"--worker_cmd={cfg['worker_cmd']}")
        return cmd + ["--"] + words
    timeout = float(cfg.get("timeout", 3600))
    cmd = [os.path.join(repo, "deploy", "local", "netns", "run"), f"--build={build}",
           f"--num_servers={servers}", f"--num_workers={cell['workers']}",
           f"--link={cell['link']}", f"--timeout={int(timeout)}",
           f"--log_dir={os.path.join(cell_dir, 'nodes')}", "--quiet"]
    if cfg.get("delay"):
        cmd.append(f"--delay={cfg['delay']}")
    return cmd + ["--"] + words


# ---------------------------------------------------------------------------------------------
# Cache key: a finished run is reused only when everything that defines it is unchanged.

def file_sha256(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return "missing"
    return h.hexdigest()


def program_ids(build, repo, netns):
    """program -> SHA-256 of its bytes (the launcher, the daemons, and netns/run when used)."""
    ids = {name: file_sha256(os.path.join(build, sub, name)) for sub, name in PROGRAMS}
    if netns:
        ids["netns/run"] = file_sha256(os.path.join(repo, "deploy", "local", "netns", "run"))
    return ids


def key_inputs(cfg, run, cell_dir, programs):
    """What defines a run: its daemon flags (metrics_out without the folder), the launcher's own
    settings and the programs' identities."""
    cell = run["cell"]
    flags = {k: flag_value(v) for k, v in run_flags(cfg, run, cell_dir).items()}
    flags["metrics_out"] = "metrics-{rank}.jsonl"
    launcher = {"servers": int(cfg.get("servers", 1)), "workers": cell["workers"],
                "link": cell["link"]}
    if not is_local(cell["link"]) and cfg.get("delay"):
        launcher["delay"] = str(cfg["delay"])
    programs = dict(programs)
    if cfg.get("worker_cmd"):
        launcher["worker_cmd"] = cfg["worker_cmd"]
        for word in shlex.split(cfg["worker_cmd"]):
            if os.path.isfile(word):
                programs["worker_cmd:" + word] = file_sha256(word)
    return {"flags": flags, "launcher": launcher, "programs": programs}


def cache_key(inputs):
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def key_changes(old, new):
    """Human-readable differences between two key_inputs (what made a run stale)."""
    out = []
    for part in ("launcher", "flags"):
        a, b = (old or {}).get(part, {}), new.get(part, {})
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                prefix = "--" if part == "flags" else ""
                out.append(f"{prefix}{k} {a.get(k, '(unset)')} -> {b.get(k, '(unset)')}")
    a, b = (old or {}).get("programs", {}), new.get("programs", {})
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if changed:
        out.append("rebuilt " + ", ".join(changed))
    return out


def reusable(cell_dir, inputs):
    """(True, None) when cell.json exists and key.json holds the same key; else (False, why)."""
    done = os.path.join(cell_dir, "cell.json")
    if not os.path.exists(done):
        return False, None
    try:
        with open(os.path.join(cell_dir, "key.json")) as f:
            stored = json.load(f)
    except (OSError, ValueError):
        return False, "no cache key (an older sieve compare ran it)"
    if stored.get("key") == cache_key(inputs):
        return True, None
    return False, "changed: " + ("; ".join(key_changes(stored.get("inputs"), inputs)) or "key")


def write_key(cell_dir, inputs):
    with open(os.path.join(cell_dir, "key.json"), "w") as f:
        json.dump({"key": cache_key(inputs), "inputs": inputs}, f, indent=1, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# Flag check against the daemons (before anything runs, and all of --dry_run).

def parse_helpxml(xml):
    """gflags --helpxml output -> {flag name: type}."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"<flag>.*?<name>(.*?)</name>.*?<type>(.*?)</type>.*?</flag>", xml, re.S)}


def daemon_flags(build):
    """{program: {flag: type}} from each daemon's --helpxml; exits 1 when one cannot be asked."""
    out = {}
    for sub, name in DAEMONS:
        path = os.path.join(build, sub, name)
        try:
            p = subprocess.run([path, "--helpxml"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            print(f"sieve compare: cannot ask {path} for its flags: {e} (build it, or pass "
                  f"--build=DIR)", file=sys.stderr)
            sys.exit(1)
        flags = parse_helpxml(p.stdout)
        if not flags:
            print(f"sieve compare: {path} --helpxml listed no flags", file=sys.stderr)
            sys.exit(1)
        out[name] = flags
    return out


def value_fits(value, ftype):
    if ftype == "bool":
        return value.lower() in ("true", "false", "1", "0", "yes", "no", "t", "f", "y", "n")
    if ftype in ("int32", "int64", "uint32", "uint64"):
        return re.fullmatch(r"-?[0-9]+", value) is not None and not (
            ftype.startswith("u") and value.startswith("-"))
    if ftype == "double":
        try:
            float(value)
        except ValueError:
            return False
    return True


def flag_errors(run_id, flags, known):
    """Messages for the flags of one run that no daemon defines or whose value has the wrong
    type; `known` is daemon_flags()'s result."""
    errors = []
    all_names = sorted({n for f in known.values() for n in f})
    for name, value in flags.items():
        types = {prog: f[name] for prog, f in known.items() if name in f}
        if not types:
            errors.append(f"cell {run_id}: flag --{name} is not defined by any daemon "
                          f"({', '.join(known)}){did_you_mean(name, all_names)}")
            continue
        v = flag_value(value)
        for prog, ftype in types.items():
            if not value_fits(v, ftype):
                errors.append(f"cell {run_id}: --{name}={v} is not a valid {ftype} "
                              f"(for {prog})")
                break
    return errors


def check_flags(cfg, runs, out_dir, build):
    known = daemon_flags(build)
    errors = []
    for r in runs:
        errors += flag_errors(r["id"], run_flags(cfg, r, os.path.join(out_dir, "cells", r["id"])),
                              known)
    if errors:
        for e in errors:
            print("sieve compare: " + e, file=sys.stderr)
        sys.exit(2)


# ---------------------------------------------------------------------------------------------
# Running and progress.

class MetricsTail:
    """Reads the JSON lines appended to a metrics file since the last call."""

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, ""
        self.last, self.last_acc = None, None

    def poll(self):
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except OSError:
            return
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            self.last = row
            if row.get("test_acc") is not None:
                self.last_acc = row["test_acc"]


def progress_line(label, last, last_acc, epochs, elapsed):
    """One progress line for a running run from its latest metrics row (None: none yet)."""
    if last is None:
        return f"sieve compare: {label}: starting ({elapsed:.0f} s)"
    ep = f"epoch {last['epoch'] + 1}" + (f"/{epochs}" if epochs else "")
    acc = f", test_acc {last_acc:.4f}" if last_acc is not None else ""
    return (f"sieve compare: {label}: {ep}, round {last['round'] + 1}, loss {last['loss']:.4g}"
            f"{acc} ({elapsed:.0f} s)")


def run_one(cmd, cell_dir, label, timeout, epochs, progress_every):
    """Runs one job, printing a progress line every progress_every seconds; (exit code, s)."""
    os.makedirs(cell_dir, exist_ok=True)
    for old in os.listdir(cell_dir):
        if old.startswith("metrics-") or old == "cell.json":
            os.remove(os.path.join(cell_dir, old))
    print(f"sieve compare: running {label}", flush=True)
    tail = MetricsTail(os.path.join(cell_dir, "metrics-0.jsonl"))
    t0 = time.monotonic()
    with open(os.path.join(cell_dir, "log.txt"), "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = t0 + timeout + 30
        while True:
            try:
                rc = proc.wait(timeout=progress_every)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                rc = 124
                break
            tail.poll()
            print(progress_line(label, tail.last, tail.last_acc, epochs, time.monotonic() - t0),
                  flush=True)
    return rc, time.monotonic() - t0


# ---------------------------------------------------------------------------------------------
# Per-run summaries.

def read_metrics(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short by a crash
    return rows


def log_summaries(cell_dir, program):
    """rank -> key=value pairs of every `<program> summary:` line in the run's logs."""
    out = {}
    for root, _, files in os.walk(cell_dir):
        for name in sorted(files):
            if not (name.endswith(".txt") or name.endswith(".log")):
                continue
            with open(os.path.join(root, name), errors="replace") as fh:
                for line in fh:
                    m = re.search(re.escape(program) + r" summary: (rank=.*)", line)
                    if m:
                        kv = dict(w.split("=", 1) for w in m.group(1).split() if "=" in w)
                        out[kv["rank"]] = kv
    return out


def staleness(server_summaries):
    """(max, mean) clock lead of released replies over all servers; (None, None) when the
    servers did not report it (BSP releases nothing this way)."""
    mx, total, count = None, 0, 0
    for kv in server_summaries.values():
        if "max_staleness" in kv:
            mx = max(mx or 0, int(kv["max_staleness"]))
        if "staleness_sum" in kv and "released" in kv:
            total += int(kv["staleness_sum"])
            count += int(kv["released"])
    return mx, (total / count if count else None)


def wall_times(rows):
    """Wall-clock seconds since training started for each metrics row: t_wall when the worker
    wrote it, else the sum of round times so far (older metrics files)."""
    out, t = [], 0.0
    for r in rows:
        t += (r.get("t_compute") or 0) + (r.get("t_select") or 0) + (r.get("t_comm") or 0)
        out.append(r["t_wall"] if r.get("t_wall") is not None else t)
    return out


def time_to_target(rows, target):
    """Wall-clock seconds at the first evaluation with test_acc >= target, else None."""
    for r, t in zip(rows, wall_times(rows)):
        if r.get("test_acc") is not None and r["test_acc"] >= target:
            return t
    return None


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def std(xs):
    """Sample standard deviation (n - 1), None for fewer than two values."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _ms(x):
    return None if x is None else 1e3 * x


def _float(kv, key):
    return float(kv[key]) if key in kv else None


def summarize(run, cell_dir, rc, wall, target):
    cell = run["cell"]
    rows = read_metrics(os.path.join(cell_dir, "metrics-0.jsonl"))
    s = log_summaries(cell_dir, "sieve-worker").get("0", {})
    mx, mn = staleness(log_summaries(cell_dir, "sieve-server"))
    accs = [r["test_acc"] for r in rows if r.get("test_acc") is not None]
    out = {k: cell[k] for k in GRID_KEYS}
    out.update({
        "run": run["id"], "cell": cell["id"], "seed": run["seed"],
        "status": "ok" if rc == 0 else f"failed({rc})", "wall_s": wall,
        "train_s": _float(s, "seconds"),
        "rounds": len(rows), "epochs": (rows[-1]["epoch"] + 1) if rows else None,
        "final_loss": rows[-1]["loss"] if rows else None,
        "test_acc": _float(s, "test_acc") if "test_acc" in s else (accs[-1] if accs else None),
        "time_to_target_s": time_to_target(rows, target),
        "mean_round_s": _float(s, "mean_round_s"),
        "bytes_up_per_round": mean([r.get("bytes_up") for r in rows]),
        "bytes_down_per_round": mean([r.get("bytes_down") for r in rows]),
        "push_ratio": _float(s, "ratio"), "near_chance": s.get("near_chance") == "1",
        "max_staleness": mx, "mean_staleness": mn,
        "t_compute_ms": _ms(mean([r.get("t_compute") for r in rows])),
        "t_select_ms": _ms(mean([r.get("t_select") for r in rows])),
        "t_comm_ms": _ms(mean([r.get("t_comm") for r in rows])),
        "mean_contraction": mean([r.get("contraction") for r in rows]),
    })
    return out


# ---------------------------------------------------------------------------------------------
# Per-cell aggregation and tables.

def is_baseline(cell):
    return cell["consistency"] == "bsp" and cell["compressor"] == "none"


def group_of(cell):
    """A cell's scenario: what its BSP dense baseline shares with it."""
    return (cell["workers"], cell["link"], cell.get("straggler", "none"))


def aggregate(cells, run_summaries, target):
    """One row per cell: means and sample stds over its finished runs, and the accuracy delta
    and time ratio against the BSP dense cell with the same workers, link and straggler."""
    rows = []
    for c in cells:
        runs = [s for s in run_summaries if s["cell"] == c["id"]]
        ok = [s for s in runs if s["status"] == "ok"]
        row = {k: c[k] for k in GRID_KEYS}
        row.update({"cell": c["id"], "runs": len(runs), "runs_ok": len(ok),
                    "target_accuracy": target,
                    "target_reached": sum(1 for s in ok if s.get("time_to_target_s") is not None)})
        if not runs:
            row["status"] = "not run"
        elif len(ok) == len(runs):
            row["status"] = "ok"
        else:
            row["status"] = f"failed({len(runs) - len(ok)} of {len(runs)})"
        for f in MEAN_FIELDS:
            row[f] = mean([s.get(f) for s in ok])
        for f in STD_FIELDS:
            row[f + "_std"] = std([s.get(f) for s in ok])
        mx = [s.get("max_staleness") for s in ok if s.get("max_staleness") is not None]
        row["max_staleness"] = max(mx) if mx else None
        near = sum(1 for s in ok if s.get("near_chance"))
        if near:  # the worker's summary says the model did not learn (near_chance=1)
            row["status"] += f", near chance ({near} of {len(ok)})"
        rows.append(row)
    for row, c in zip(rows, cells):
        base = next((r for r, b in zip(rows, cells)
                     if is_baseline(b) and group_of(b) == group_of(c) and r["runs_ok"]), None)
        row["base_cell"] = base["cell"] if base else None
        row["acc_delta_vs_base"] = (row["test_acc"] - base["test_acc"]
                                    if base and None not in (row["test_acc"], base["test_acc"])
                                    else None)
        row["time_ratio_vs_base"] = (row["train_s"] / base["train_s"]
                                     if base and row["train_s"] is not None and base["train_s"]
                                     else None)
    return rows


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def pm(m, s, digits):
    """'m ± s' with the given decimals ('m' alone without a std, '-' without a mean)."""
    if m is None:
        return "-"
    return f"{m:.{digits}f}" if s is None else f"{m:.{digits}f} ± {s:.{digits}f}"


def md_row(r):
    """The Markdown table's cells for one aggregated row (see md_header)."""
    ttt = pm(r["time_to_target_s"], r["time_to_target_s_std"], 1)
    if r["test_acc"] is not None and r["target_reached"] < r["runs_ok"]:
        ttt = ("not reached" if r["target_reached"] == 0
               else f"{ttt} ({r['target_reached']} of {r['runs_ok']})")
    delta = r["acc_delta_vs_base"]
    ratio = r["time_ratio_vs_base"]
    stale = ("-" if r["max_staleness"] is None or r["consistency"] == "bsp"
             else f"{r['max_staleness']} / {fmt(r['mean_staleness'])}")
    return [r["cell"], r["status"], f"{r['runs_ok']}/{r['runs']}",
            pm(r["test_acc"], r["test_acc_std"], 4),
            "-" if delta is None else f"{100 * delta:+.2f} pp",
            ttt, pm(r["train_s"], r["train_s_std"], 1),
            "-" if ratio is None else f"{ratio:.2f}×",
            "-" if r["push_ratio"] is None else f"{r['push_ratio']:.4g}",
            stale, fmt(r["final_loss"]),
            "-" if r["mean_round_s"] is None else "%.3g" % (1e3 * r["mean_round_s"])]


def md_header(target):
    return ["cell", "status", "runs", "test acc", "Δ acc vs BSP dense",
            f"time to {target:g} (s)", "train time (s)", "time ÷ BSP dense", "pushed ÷ dense",
            "staleness max / mean", "final loss", "round (ms)"]


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for s in rows:
            w.writerow({k: ("" if s.get(k) is None else s.get(k)) for k in fields})


def write_tables(out_dir, cell_rows, run_summaries, cfg, figures):
    write_csv(os.path.join(out_dir, "summary.csv"), CELL_FIELDS, cell_rows)
    write_csv(os.path.join(out_dir, "runs.csv"), RUN_FIELDS, run_summaries)
    target = float(cfg.get("target_accuracy", DEFAULT_TARGET))
    head = md_header(target)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(f"# sieve compare: {cfg['name']}\n\n")
        f.write(f"servers: {cfg.get('servers', 1)}; repeats: {cfg.get('repeats', 1)}; "
                f"flags: `{' '.join(flag_words(cfg.get('flags') or {}))}`\n\n")
        f.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in cell_rows:
            f.write("| " + " | ".join(md_row(r)) + " |\n")
        f.write(TABLE_NOTES)
        if figures:
            f.write("\nPlots: " + ", ".join(figures) + ".\n")


TABLE_NOTES = """
Mean ± sample standard deviation over the runs (seeds) that finished. Test accuracy is rank 0's
after the last epoch; Δ and ÷ compare with the BSP dense (`bsp-none`) cell of the same workers,
link and straggler. Time to target: wall-clock seconds from the start of training to the first evaluation
at or above the target. Train time: rank 0's training wall-clock. Pushed ÷ dense: bytes rank 0
pushed over what dense fp32 pushes would have sent. Staleness (ASP/SSP): the clock lead, in
rounds, of a worker over the slowest when the server released its reply (max, mean).
"""


# ---------------------------------------------------------------------------------------------
# Plots.

def smooth(ys, window):
    """Trailing moving average over `window` points (the first points average what exists)."""
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def accuracy_points(rows):
    """[(wall-clock s, epoch counted from 1, test accuracy)] of a run's evaluations."""
    return [(t, r["epoch"] + 1, r["test_acc"]) for r, t in zip(rows, wall_times(rows))
            if r.get("test_acc") is not None]


def mean_curve(curves):
    """Pointwise mean of equally indexed points over the curves (as long as the shortest)."""
    n = min((len(c) for c in curves), default=0)
    return [tuple(sum(c[i][j] for c in curves) / len(curves) for j in range(len(curves[0][0])))
            for i in range(n)]


def compact_png(path):
    """Rewrites a PNG with an adaptive 256-colour palette (a third of the bytes for plots), when
    Pillow (python3-pil, a dependency of python3-matplotlib) is there."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def plot(out_dir, cells, runs, cell_rows, dpi=100):
    """Writes the plots that have data into out_dir (removing stale ones that have none there)
    and returns their file names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    data = [(r, read_metrics(os.path.join(r["dir"], "metrics-0.jsonl"))) for r in runs]
    seeds = {}  # cell id -> the metrics rows of each of its runs
    for run, rows in data:
        seeds.setdefault(run["cell"]["id"], []).append(rows)
    style = cell_styles(cells)
    written = []

    def new(title, xlabel, ylabel):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        return fig, ax

    def save(fig, ax, name, legend_inside=False):
        path = os.path.join(out_dir, name)
        if not ax.has_data():
            plt.close(fig)
            if os.path.exists(path):
                os.remove(path)
            return
        handles, labels = ax.get_legend_handles_labels()
        if handles and legend_inside:
            ax.legend(handles, labels, fontsize=7)
        elif handles:
            # Below the axes, in columns: readable for many cells, never over the data.
            ax.legend(handles, labels, fontsize=7, loc="upper center",
                      bbox_to_anchor=(0.5, -0.16), ncol=min(3, len(handles)), frameon=False)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        plt.close(fig)
        written.append(name)

    labelled = set()

    def label(cid):
        if cid in labelled:
            return None
        labelled.add(cid)
        return cid

    fig_t, ax_t = new("test accuracy vs wall-clock time", "seconds since training started",
                      "test accuracy")
    fig_e, ax_e = new("test accuracy vs epoch", "epoch", "test accuracy")
    fig_l, ax_l = new("training loss (rank 0, moving average)", "round", "loss")
    fig_b, ax_b = new("bytes per round (rank 0)", "round", "bytes (up + down)")
    first_epoch = None
    for kind in ("acc", "loss", "bytes"):
        labelled.clear()
        for run, rows in data:
            cid = run["cell"]["id"]
            if not rows:
                continue
            st = style[cid]
            if kind == "acc":
                pts = accuracy_points(rows)
                if not pts:
                    continue
                # One seed alone: a plain line; several: each faint, their mean drawn below.
                faint = {"alpha": 0.3, "lw": 0.8} if len(seeds[cid]) > 1 else {
                    "marker": ".", "label": label(cid)}
                ax_t.plot([p[0] for p in pts], [p[2] for p in pts], **faint, **st)
                ax_e.plot([p[1] for p in pts], [p[2] for p in pts], **faint, **st)
                first_epoch = min(first_epoch or pts[0][1], pts[0][1])
            elif kind == "loss":
                rounds = [r["round"] for r in rows]
                losses = [r["loss"] for r in rows]
                window = max(1, min(200, len(rows) // 40))
                ax_l.plot(rounds, losses, lw=0.4, alpha=0.15, color=st["color"])
                ax_l.plot(rounds, smooth(losses, window), lw=1.2, label=label(cid), **st)
            else:
                ax_b.plot([r["round"] for r in rows],
                          [(r.get("bytes_up") or 0) + (r.get("bytes_down") or 0) for r in rows],
                          lw=0.8, label=label(cid), **st)
    for cid, series in seeds.items():
        if len(series) < 2:
            continue
        mean_pts = mean_curve([accuracy_points(rows) for rows in series])
        if mean_pts:
            lab = f"{cid} (mean of {len(series)})"
            ax_t.plot([p[0] for p in mean_pts], [p[2] for p in mean_pts], marker=".", lw=1.6,
                      label=lab, **style[cid])
            ax_e.plot([p[1] for p in mean_pts], [p[2] for p in mean_pts], marker=".", lw=1.6,
                      label=lab, **style[cid])
    ax_e.xaxis.set_major_locator(MaxNLocator(integer=True))
    if first_epoch is not None:
        ax_e.set_xlim(left=first_epoch - 0.1)
    if ax_b.has_data():
        ax_b.set_yscale("log")
    save(fig_t, ax_t, "accuracy_vs_time.png")
    save(fig_e, ax_e, "accuracy_vs_epoch.png")
    if plot_scenarios(plt, out_dir, cells, seeds, style, cell_rows, dpi):
        written += ["accuracy_vs_time_by_scenario.png", "time_to_target.png"]
    save(fig_l, ax_l, "loss.png")
    save(fig_b, ax_b, "bytes_per_round.png")

    # Round-time breakdown: stacked mean compute / select / comm per cell.
    fig, ax = new("round time breakdown (rank 0, mean)", "", "ms per round")
    shown = [r for r in cell_rows if r.get("t_compute_ms") is not None]
    bottom = [0.0] * len(shown)
    for key, name in (("t_compute_ms", "compute"), ("t_select_ms", "select"),
                      ("t_comm_ms", "comm")):
        vals = [r.get(key) or 0.0 for r in shown]
        if shown:
            ax.bar(range(len(shown)), vals, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([r["cell"] for r in shown], rotation=30, ha="right", fontsize=7)
    save(fig, ax, "round_breakdown.png", legend_inside=True)

    # Contraction ratio |r - sel(r)|^2 / |r|^2 of the sparse cells, against (1 - k/d) and
    # (1 - k/d)^2 (dense cells select everything: nothing to draw).
    fig, ax = new("contraction ratio vs round (sparse cells)", "round", "contraction")
    labelled.clear()
    bounds = {}  # the bound curves (one pair per density schedule), drawn once each
    for run, rows in data:
        cid = run["cell"]["id"]
        pts = [r for r in rows if r.get("contraction") is not None]
        if run["cell"]["compressor"] == "none" or not pts:
            continue
        ax.plot([r["round"] for r in pts], [r["contraction"] for r in pts], marker=".",
                markersize=3, label=label(cid), **style[cid])
        if pts[0].get("bound_1") is not None:
            curve = tuple((r["round"], r["bound_1"]) for r in pts)
            bounds.setdefault(curve, run["cell"]["density"])
    for curve, density in bounds.items():
        suffix = f" (density {density:g})" if len(set(bounds.values())) > 1 else ""
        xs = [x for x, _ in curve]
        ax.plot(xs, [b for _, b in curve], ls="--", color="black", lw=0.8,
                label="1 - k/d" + suffix)
        ax.plot(xs, [b * b for _, b in curve], ls=":", color="black", lw=0.8,
                label="(1 - k/d)²" + suffix)
    save(fig, ax, "contraction.png")
    # Histograms of each cell's first run only (the other seeds look alike).
    firsts = {}
    for run, rows in data:
        firsts.setdefault(run["cell"]["id"], (run["id"], rows))
    if plot_histograms(plt, out_dir, dict(firsts.values()), dpi):
        written.append("histograms.png")
    return written


def scenario_label(key):
    workers, link, straggler = key
    return (f"{workers} workers, link {link}" +
            ("" if straggler == "none" else f", straggler {straggler}"))


def plot_scenarios(plt, out_dir, cells, seeds, style, cell_rows, dpi):
    """With more than one scenario (workers, link, straggler) holding accuracy data:
    accuracy_vs_time_by_scenario.png (one panel per scenario, each cell the mean of its seeds) and
    time_to_target.png (mean ± std per cell, grouped by scenario; cells that never reached the
    target are marked). False (and neither file) otherwise."""
    names = ["accuracy_vs_time_by_scenario.png", "time_to_target.png"]
    scenarios = []
    for c in cells:
        series = [accuracy_points(rows) for rows in seeds.get(c["id"], [])]
        if any(series) and group_of(c) not in scenarios:
            scenarios.append(group_of(c))
    if len(scenarios) < 2:
        for n in names:
            if os.path.exists(os.path.join(out_dir, n)):
                os.remove(os.path.join(out_dir, n))
        return False
    # Within a scenario the cells differ in consistency and compressor: one colour for each pair.
    import matplotlib
    pairs = list(dict.fromkeys((c["consistency"], c["compressor"]) for c in cells))
    palette = matplotlib.colormaps["tab10"].colors
    style = {c["id"]: dict(style[c["id"]], color=palette[pairs.index(
        (c["consistency"], c["compressor"])) % len(palette)]) for c in cells}
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.2 * len(scenarios), 3.6),
                             sharey=True, squeeze=False)
    for ax, key in zip(axes[0], scenarios):
        for c in cells:
            if group_of(c) != key:
                continue
            pts = mean_curve([accuracy_points(rows) for rows in seeds.get(c["id"], [])])
            if pts:
                ax.plot([p[0] for p in pts], [p[2] for p in pts], marker=".", lw=1.2,
                        label=f"{c['consistency']} {c['compressor']}", **style[c["id"]])
        ax.set_title(scenario_label(key), fontsize=8)
        ax.set_xlabel("seconds since training started", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("test accuracy (mean of seeds)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, names[0]), dpi=dpi)
    plt.close(fig)

    rows = {r["cell"]: r for r in cell_rows}
    fig, ax = plt.subplots(figsize=(max(7, 0.45 * len(cells)), 4.2))
    x, ticks, labels = 0, [], []
    target = None
    for key in scenarios:
        for c in cells:
            r = rows.get(c["id"])
            if group_of(c) != key or r is None or r.get("test_acc") is None:
                continue
            target = r["target_accuracy"]
            t, s = r.get("time_to_target_s"), r.get("time_to_target_s_std")
            if t is not None and r["target_reached"] == r["runs_ok"]:
                ax.bar(x, t, yerr=s or 0, color=style[c["id"]]["color"], capsize=2)
            else:
                ax.text(x, 0, "not\nreached", ha="center", va="bottom", fontsize=6)
            ticks.append(x)
            labels.append(f"{c['consistency']} {c['compressor']}")
            x += 1
        ax.axvline(x - 0.5, color="grey", lw=0.5)
        ax.text((x - 0.5) - 0.1, 1.0, scenario_label(key), transform=ax.get_xaxis_transform(),
                ha="right", va="bottom", fontsize=6)
        x += 0.5
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(f"seconds to test accuracy {target:g}" if target else "seconds")
    ax.grid(alpha=0.3, axis="y")
    fig.savefig(os.path.join(out_dir, names[1]), dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return True


def cell_styles(cells):
    """cell id -> matplotlib style: one colour per (compressor, density, workers, link), one
    line style per consistency, so BSP/ASP pairs of the same compressor read together."""
    import matplotlib
    colours = matplotlib.colormaps["tab10"].colors
    dashes = {"bsp": "-", "ssp": "-.", "asp": "--"}
    more = [":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]  # ssp:N with more than one N
    keys, ssp = [], sorted({c["consistency"] for c in cells if c["consistency"].startswith("ssp")})
    out = {}
    for c in cells:
        k = (c["compressor"], c["density"], c["workers"], c["link"], c.get("straggler", "none"))
        if k not in keys:
            keys.append(k)
        ls = dashes.get(c["consistency"])
        if ls is None:
            i = ssp.index(c["consistency"]) if c["consistency"] in ssp else 0
            ls = "-." if i == 0 else more[(i - 1) % len(more)]
        out[c["id"]] = {"color": colours[keys.index(k) % len(colours)], "ls": ls}
    return out


def normal_cdf(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def histogram_panels(data):
    """[(run, round, width, counts)] of every metrics row that carries a histogram."""
    panels = []
    for rid, rows in data.items():
        for r in rows:
            if r.get("hist"):
                panels.append((rid, r["round"], float(r["hist_width"]), r["hist"]))
    return panels


def binned_excess_kurtosis(width, counts):
    """Excess kurtosis of the binned residual (bin centres in sigma units; the end bins hold the
    tails, so this underestimates heavy tails)."""
    n = sum(counts)
    if n == 0:
        return float("nan")
    bins = len(counts)
    zs = [(i + 0.5 - bins / 2) * width for i in range(bins)]
    m = sum(c * z for c, z in zip(counts, zs)) / n
    m2 = sum(c * (z - m) ** 2 for c, z in zip(counts, zs)) / n
    m4 = sum(c * (z - m) ** 4 for c, z in zip(counts, zs)) / n
    return m4 / (m2 * m2) - 3.0 if m2 > 0 else float("nan")


def plot_histograms(plt, out_dir, data, dpi):
    """histograms.png: one panel per (run, round), counts per 0.25-sigma bin (log scale) against
    the fitted normal's expected counts n * (Phi(z_hi) - Phi(z_lo)). False (and no file) when
    no run has histograms."""
    path = os.path.join(out_dir, "histograms.png")
    panels = histogram_panels(data)
    if not panels:
        if os.path.exists(path):
            os.remove(path)
        return False
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_axis_off()
    for ax, (rid, rnd, width, counts) in zip(axes.flat, panels):
        bins = len(counts)
        n = sum(counts)
        edges = [(i - bins / 2) * width for i in range(bins + 1)]
        centres = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
        ax.bar(centres, counts, width=width, color="tab:blue", alpha=0.6, label="residual")
        expected = [n * (normal_cdf(b) - normal_cdf(a)) for a, b in zip(edges, edges[1:])]
        expected[0] += n * normal_cdf(edges[0])  # the end bins hold everything beyond
        expected[-1] += n * (1 - normal_cdf(edges[-1]))
        ax.plot(centres, expected, color="tab:red", lw=1.2, label="fitted normal")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)
        ax.set_title(f"{rid}\nround {rnd}, excess kurtosis "
                     f"{binned_excess_kurtosis(width, counts):+.2f}", fontsize=8)
        ax.set_xlabel("(r - mean) / sigma", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(prog="sieve compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("--out", help="output directory (default results/<name>)")
    p.add_argument("--build", default=os.environ.get("SIEVE_BUILD_DIR", "build"),
                   help="build tree with deploy/sieve and the daemons")
    p.add_argument("--force", action="store_true", help="rerun finished runs")
    p.add_argument("--plots_only", action="store_true",
                   help="only rebuild tables and plots from the runs whose key is unchanged")
    p.add_argument("--dry_run", action="store_true",
                   help="check every cell's flags against the daemons, list the runs, exit")
    p.add_argument("--figures_out", help="also write compact copies of the plots here")
    p.add_argument("--progress_every", type=float, default=5.0,
                   help="seconds between progress lines of a running cell (default 5)")
    a = p.parse_args()
    if a.progress_every <= 0:
        fail("--progress_every must be > 0")
    cfg = load_config(a.config)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_dir = a.out or os.path.join("results", str(cfg["name"]))
    build = os.path.abspath(a.build)
    cells = cells_of(cfg)
    runs = runs_of(cfg, cells)
    for r in runs:
        r["dir"] = os.path.join(out_dir, "cells", r["id"])
    if not a.plots_only:
        check_flags(cfg, runs, out_dir, build)
    if a.dry_run:
        for r in runs:
            print(r["id"])
        print(f"sieve compare: {len(runs)} runs; every flag is defined by the daemons",
              file=sys.stderr)
        return 0
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)
    target = float(cfg.get("target_accuracy", DEFAULT_TARGET))
    epochs = (cfg.get("flags") or {}).get("epochs")
    programs = {}
    summaries, failed = [], 0
    for i, r in enumerate(runs):
        cell_dir = r["dir"]
        netns = not is_local(r["cell"]["link"])
        if netns not in programs:
            programs[netns] = program_ids(build, repo, netns)
        inputs = key_inputs(cfg, r, cell_dir, programs[netns])
        label = f"[{i + 1}/{len(runs)}] {r['id']}"
        ok, why = reusable(cell_dir, inputs)
        if ok and not a.force:
            print(f"sieve compare: {label}: unchanged since it finished, reused", flush=True)
            with open(os.path.join(cell_dir, "cell.json")) as f:
                summaries.append(json.load(f))
            continue
        if a.plots_only:
            if why:
                print(f"sieve compare: {label}: left out ({why})", flush=True)
            continue
        if why and not a.force:
            print(f"sieve compare: {label}: rerunning, {why}", flush=True)
        rc, wall = run_one(run_command(cfg, r, cell_dir, build, repo), cell_dir, label,
                           float(cfg.get("timeout", 3600)), epochs, a.progress_every)
        s = summarize(r, cell_dir, rc, wall, target)
        summaries.append(s)
        print(f"sieve compare: {label}: " + (
            f"done in {wall:.1f} s, test_acc {fmt(s['test_acc'])}" if rc == 0 else
            f"failed (exit {rc}); see {cell_dir}/log.txt"),
            file=sys.stdout if rc == 0 else sys.stderr, flush=True)
        if rc == 0:
            write_key(cell_dir, inputs)
            with open(os.path.join(cell_dir, "cell.json"), "w") as f:
                json.dump(s, f, indent=1)
        else:
            failed += 1
    cell_rows = aggregate(cells, summaries, target)
    done = [r for r in runs if any(s["run"] == r["id"] for s in summaries)]
    figures = plot(out_dir, cells, done, cell_rows)
    write_tables(out_dir, cell_rows, summaries, cfg, figures)
    if a.figures_out:
        os.makedirs(a.figures_out, exist_ok=True)
        for name in plot(a.figures_out, cells, done, cell_rows, dpi=72):
            compact_png(os.path.join(a.figures_out, name))
    print(f"sieve compare: {len(cells)} cells, {len(summaries)} runs; wrote {out_dir}/summary.csv, "
          f"runs.csv, summary.md" + (", " + ", ".join(figures) if figures else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
