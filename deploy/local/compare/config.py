"""sieve compare's grid and config: the YAML's keys and their checks, the grid's cells (ids, the
`exclude` entries, the defaults), the runs of each cell (seeds), the daemon flags a run passes,
and the check of every flag against the daemons' own (--helpxml) before anything runs. Errors
raise ConfigError (nothing here prints them or exits: `sieve compare` does, with exit status 2
for a usage error, 1 when the daemons cannot be asked for their flags)."""

import difflib
import itertools
import os
import re
import shlex
import subprocess

import yaml

INVERSE = "+inverse"  # a grid consistency's suffix for --staleness_lr=inverse
BACKUP = "+backup:"  # bsp's suffix for --backup_workers=N (then +return: --late_pushes=return)
GRID_KEYS = ["consistency", "compressor", "density", "workers", "link", "straggler"]
GRID_DEFAULTS = {"consistency": ["bsp"], "compressor": ["topk"], "density": [0.001],
                 "workers": [2], "link": ["local"], "straggler": ["none"]}
TOP_KEYS = ["name", "servers", "flags", "grid", "exclude", "repeats", "target_accuracy", "delay",
            "tcp_cc", "upload_queue", "contraction_every", "histogram_rounds", "timeout",
            "worker_cmd"]
DEFAULT_TARGET = 0.85
DEFAULT_SEED = 1  # the daemons' --seed default
DAEMONS = [("scheduler", "sieve-scheduler"), ("server", "sieve-server"), ("worker", "sieve-worker")]
AVAILABLE_CC = "/proc/sys/net/ipv4/tcp_available_congestion_control"
DEFAULT_CC = "/proc/sys/net/ipv4/tcp_congestion_control"
DEFAULT_UPLOAD_QUEUE = "100ms"  # deploy/local/netns/run's --upload_queue default


def read_words(path):
    """The words of a /proc file ([] when it cannot be read)."""
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return []


class ConfigError(ValueError):
    """What makes a grid unrunnable: `messages` (one or more lines, each naming what is wrong)
    and the exit status `sieve compare` ends with (2: a usage error, the default; 1: the daemons
    cannot be asked for their flags)."""

    def __init__(self, messages, exit_status=2):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        self.exit_status = exit_status
        super().__init__("\n".join(self.messages))


def as_list(v):
    return v if isinstance(v, list) else [v]


def did_you_mean(word, known):
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_config(cfg, path):
    """Returns cfg; ConfigError naming what is wrong (unknown keys, bad types)."""
    if not isinstance(cfg, dict) or "name" not in cfg:
        raise ConfigError(f"{path}: expected a mapping with at least 'name'")
    for k in cfg:
        if k not in TOP_KEYS:
            raise ConfigError(f"{path}: unknown key '{k}'{did_you_mean(str(k), TOP_KEYS)}; "
                              f"known keys: {', '.join(TOP_KEYS)}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(cfg["name"])):
        raise ConfigError("name may only hold letters, digits, '_', '.', '-'")
    grid = cfg.get("grid") or {}
    if not isinstance(grid, dict):
        raise ConfigError("'grid' must be a mapping of grid key -> list of values")
    for k in grid:
        if k not in GRID_KEYS:
            raise ConfigError(f"unknown grid key '{k}'{did_you_mean(str(k), GRID_KEYS)}; "
                              f"known: {GRID_KEYS}")
    exclude = cfg.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(e, dict) and e for e in exclude):
        raise ConfigError("'exclude' must be a list of mappings grid key -> value")
    for e in exclude:
        for k in e:
            if k not in GRID_KEYS:
                raise ConfigError(f"unknown grid key '{k}' in 'exclude'"
                                  f"{did_you_mean(str(k), GRID_KEYS)}")
    flags = cfg.get("flags") or {}
    if not isinstance(flags, dict):
        raise ConfigError("'flags' must be a mapping of daemon flag -> value")
    for k in ("consistency", "compressor", "density", "metrics_out", "num_workers", "num_servers",
              "straggler"):
        if k in flags:
            raise ConfigError(f"flag '{k}' is set per cell by the grid/driver; remove it from "
                              "'flags'")
    repeats = cfg.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ConfigError(f"'repeats' must be an integer >= 1, got {repeats!r}")
    if repeats > 1 and "seed" in flags and not isinstance(flags["seed"], int):
        raise ConfigError("'flags: seed' must be an integer when repeats > 1")
    target = cfg.get("target_accuracy", DEFAULT_TARGET)
    if not isinstance(target, (int, float)) or isinstance(target, bool) or not 0 < target <= 1:
        raise ConfigError(f"'target_accuracy' must be a number in (0, 1], got {target!r}")
    if "staleness" in flags and any(str(c).startswith("ssp:") for c in
                                    as_list(grid.get("consistency", []))):
        raise ConfigError("'flags: staleness' and a consistency ssp:N both set the SSP bound; "
                          "keep one")
    if "staleness_lr" in flags and any(str(c).endswith(INVERSE) for c in
                                       as_list(grid.get("consistency", []))):
        raise ConfigError("'flags: staleness_lr' and a consistency ...+inverse both set it; "
                          "keep one")
    if "backup_workers" in flags and any(BACKUP in str(c) for c in
                                         as_list(grid.get("consistency", []))):
        raise ConfigError("'flags: backup_workers' and a consistency bsp+backup:N both set it; "
                          "keep one")
    tcp_cc, available = cfg.get("tcp_cc"), read_words(AVAILABLE_CC)
    if tcp_cc is not None and (not isinstance(tcp_cc, str) or tcp_cc not in available):
        raise ConfigError(f"'tcp_cc': {tcp_cc!r} is not a TCP congestion control this kernel has "
                          f"({' '.join(available) or AVAILABLE_CC + ' unreadable'})")
    upload_queue = cfg.get("upload_queue")
    if upload_queue is not None and not (
            isinstance(upload_queue, str) and
            re.fullmatch(r"host|\d+(?:\.\d+)?(?:us|ms|s)", upload_queue)):
        raise ConfigError(f"'upload_queue': {upload_queue!r} is not a queue (a time such as "
                          "100ms or 1s, or host)")
    worker_cmd = cfg.get("worker_cmd")
    if worker_cmd is not None:
        if not isinstance(worker_cmd, str) or not worker_cmd.strip():
            raise ConfigError(f"'worker_cmd' must be a command line (a string), got "
                              f"{worker_cmd!r}")
        try:
            shlex.split(worker_cmd)
        except ValueError as e:
            raise ConfigError(f"'worker_cmd': {e}")
    for c in cells_of(cfg):
        check_cell(c)
        if worker_cmd is not None and not is_local(c["link"]):
            raise ConfigError(f"cell {c['id']}: worker_cmd runs only on local links (sieve "
                              f"launch), not on link {c['link']}")
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


def split_consistency(value):
    """A grid consistency -> (mode, SSP bound or None, staleness_lr or None, backup workers or
    None, late_pushes or None): `ssp:2+inverse` -> ("ssp", 2, "inverse", None, None),
    `bsp+backup:1+return` -> ("bsp", None, None, 1, "return"). None when it is not of the grammar
    bsp[+backup:N[+return]] | asp[+inverse] | ssp[:N][+inverse] (+inverse: --staleness_lr=inverse;
    +backup:N: --backup_workers=N; +return: --late_pushes=return)."""
    m = re.fullmatch(r"(bsp|asp|ssp)(?::([0-9]+))?(\+inverse)?(?:\+backup:([0-9]+)(\+return)?)?",
                     value)
    if not m or (m.group(2) is not None and m.group(1) != "ssp") or (
            m.group(1) == "bsp" and m.group(3)) or (m.group(4) is not None and m.group(1) != "bsp"):
        return None
    return (m.group(1), None if m.group(2) is None else int(m.group(2)),
            "inverse" if m.group(3) else None, None if m.group(4) is None else int(m.group(4)),
            "return" if m.group(5) else None)


def check_cell(c):
    """ConfigError naming the cell and the value when a grid value cannot be run."""
    cons = c["consistency"]
    parts = split_consistency(cons)
    if parts is None:
        raise ConfigError(f"cell {c['id']}: unknown consistency '{cons}' (expected bsp, "
                          "bsp+backup:N, bsp+backup:N+return, asp, ssp or ssp:N, asp and ssp "
                          "optionally +inverse)")
    if parts[1] is not None and parts[1] < 1:
        raise ConfigError(f"cell {c['id']}: the staleness bound of '{cons}' must be >= 1")
    if parts[3] is not None and not 1 <= parts[3] < c["workers"]:
        raise ConfigError(f"cell {c['id']}: '{cons}' needs 1 <= backup workers < the cell's "
                          f"{c['workers']} workers")
    if c["straggler"] != "none":
        why = per_rank_items(c["straggler"], STRAGGLER_SPEC, "straggler spec", c["workers"])
        if why:
            raise ConfigError(f"cell {c['id']}: {why} (SPEC: none, delay:T, xF, exp:T; T like "
                              "5ms)")
    if not is_local(c["link"]):
        why = per_rank_items(c["link"], RATE, "link rate", c["workers"])
        if why:
            raise ConfigError(f"cell {c['id']}: {why} (a rate: 1gbit, 500mbit, ...)")
    elif "," in c["link"] or ":" in c["link"]:
        raise ConfigError(f"cell {c['id']}: link '{c['link']}': per-worker links need the netns "
                          "harness (a rate such as 10gbit,3:1gbit), not loopback")


def load_config(path):
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read {path}: {e}")
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
    flags["consistency"], bound, staleness_lr, backups, late = split_consistency(cell["consistency"])
    if backups is not None:
        flags["backup_workers"] = backups
    if late is not None:
        flags["late_pushes"] = late
    if bound is not None:
        flags["staleness"] = bound
    if staleness_lr is not None:
        flags["staleness_lr"] = staleness_lr
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


# ---------------------------------------------------------------------------------------------
# Flag check against the daemons (before anything runs, and all of --dry_run).

def parse_helpxml(xml):
    """gflags --helpxml output -> {flag name: type}."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"<flag>.*?<name>(.*?)</name>.*?<type>(.*?)</type>.*?</flag>", xml, re.S)}


def daemon_flags(build):
    """{program: {flag: type}} from each daemon's --helpxml; ConfigError (exit status 1) when
    one cannot be asked."""
    out = {}
    for sub, name in DAEMONS:
        path = os.path.join(build, sub, name)
        try:
            p = subprocess.run([path, "--helpxml"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ConfigError(f"cannot ask {path} for its flags: {e} (build it, or pass "
                              f"--build=DIR)", exit_status=1) from e
        flags = parse_helpxml(p.stdout)
        if not flags:
            raise ConfigError(f"{path} --helpxml listed no flags", exit_status=1)
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
        raise ConfigError(errors)
