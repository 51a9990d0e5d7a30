"""sieve compare's runner and cache: the command of each run (`sieve launch`, or
deploy/local/netns/run for emulated links), its cache key (key.json: flags, launcher settings,
SHA-256 of the programs and of worker_cmd's files) and whether a finished run is reusable, the
run itself with its progress line, and its summary (cell.json) read back from its metrics files
and the servers' and workers' end-of-run summaries (--summary_out, summary-{role}-{rank}.json in
the run's directory)."""

import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import time

from .config import (DAEMONS, DEFAULT_CC, DEFAULT_UPLOAD_QUEUE, GRID_KEYS, flag_value,
                     flag_words, is_local, read_words, run_flags)
from .table import mean

PROGRAMS = [("deploy", "sieve")] + DAEMONS


def summary_pattern(cell_dir):
    """The --summary_out of a run: its servers' and workers' summaries in its directory."""
    return os.path.join(os.path.abspath(cell_dir), "summary-{role}-{rank}.json")


def run_command(cfg, run, cell_dir, build, repo):
    """The command line of one run: `sieve launch` (loopback) or deploy/local/netns/run."""
    cell = run["cell"]
    servers = int(cfg.get("servers", 1))
    flags = run_flags(cfg, run, cell_dir)
    flags["summary_out"] = summary_pattern(cell_dir)  # where, not what: not in the cache key
    words = flag_words(flags)
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
    if cfg.get("tcp_cc"):
        cmd.append(f"--tcp_cc={cfg['tcp_cc']}")
    if cfg.get("upload_queue"):
        cmd.append(f"--upload_queue={cfg['upload_queue']}")
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
    if not is_local(cell["link"]):
        # The congestion control shapes a netns run's rounds (docs/scale.md): the configured one,
        # else the kernel's default, which differs between machines.
        launcher["tcp_cc"] = cfg.get("tcp_cc") or "default:" + " ".join(read_words(DEFAULT_CC))
        # So does the sender's own queue (docs/scale.md, "The sender's own queue").
        launcher["upload_queue"] = cfg.get("upload_queue") or DEFAULT_UPLOAD_QUEUE
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
            # --eval_deferred: the deferred evaluations' rows come after the last round's.
            if self.last is not None and row.get("round", 0) < self.last.get("round", 0):
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
        if old.startswith(("metrics-", "summary-")) or old == "cell.json":
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
    # --eval_deferred writes its evaluation rounds' lines after the last round.
    rows.sort(key=lambda r: r.get("round", 0))
    return rows


def summaries(cell_dir, role):
    """rank -> the end-of-run summary (a dict of its JSON fields) of every server or worker
    (`role`) of the run that wrote one (summary_pattern); a process that did not end normally
    wrote none."""
    out = {}
    for path in glob.glob(os.path.join(cell_dir, f"summary-{role}-*.json")):
        m = re.fullmatch(rf"summary-{role}-(\d+)\.json", os.path.basename(path))
        if not m:
            continue
        try:
            with open(path) as f:
                out[int(m.group(1))] = json.load(f)
        except (OSError, ValueError):
            pass  # unreadable: as if none
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


def _ms(x):
    return None if x is None else 1e3 * x


def _float(kv, key):
    return float(kv[key]) if key in kv else None


def summarize(run, cell_dir, rc, wall, target):
    cell = run["cell"]
    rows = read_metrics(os.path.join(cell_dir, "metrics-0.jsonl"))
    s = summaries(cell_dir, "worker").get(0, {})
    mx, mn = staleness(summaries(cell_dir, "server"))
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
        "push_ratio": _float(s, "ratio"), "near_chance": s.get("near_chance") == 1,
        "max_staleness": mx, "mean_staleness": mn,
        "t_compute_ms": _ms(mean([r.get("t_compute") for r in rows])),
        "t_select_ms": _ms(mean([r.get("t_select") for r in rows])),
        "t_comm_ms": _ms(mean([r.get("t_comm") for r in rows])),
        "mean_contraction": mean([r.get("contraction") for r in rows]),
    })
    return out
