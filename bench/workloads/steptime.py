#!/usr/bin/python3
"""Step time on emulated links: one workload script of examples/torch/ under sieve at the
densities of its schedule, under torch DDP and with no communication at all, every process in
its own network namespace on a shaped link (deploy/local/netns/run), and the round's split.

Cells (each a short run of --steps steps of the script, evaluation only at the end and left out
of the time):
  dense        sieve, --compressor=none
  topk:D       sieve, Top-k at density D from the first round (no warm-up), momentum kept
               (--momentum_masking=false; masking changes no byte and no time)
  gaussiank:D  the same with Gaussian-k
  ddp          torch DDP (gloo), dense: netns/run --ddp_cmd, one rank per namespace
  compute      no communication (--backend=none --ddp_ranks=W, not in namespaces: it sends
               nothing), the compute-only bound of a step with W processes on this machine

The sieve and DDP cells run once per --links rate; compute once. A cell's step time is the
script's own (--result_json: its training loop's seconds / steps, evaluation excluded), so every
backend is timed alike; a sieve cell adds rank 0's round split from its metrics lines
(--metrics_out, docs/protocol.md): medians over the rounds after the first 5 of t_compute,
t_select (error feedback and selection) and t_comm (push, wait for the round and the update),
and the bytes a worker pushes a round. Nothing is read from a log.

Time to a metric on a link follows from a finished run's steps (bench/workloads/run.py on
loopback: BSP trains the same steps whatever the link) times these step times, the warm-up's
epochs at their densities; docs/results.md does that sum.

Usage (root: network namespaces; from the repository root, Debian's /usr/bin/python3):
  /usr/bin/python3 bench/workloads/steptime.py --workload=lstm_lm --links=1gbit,100mbit
      [--cells=dense,topk:0.015625,topk:0.004,topk:0.001,ddp,compute] [--steps=60]
      [--workers=4] [--servers=2] [--build=build] [--out=results/steptime/lstm_lm]
      [--extra=FLAGS] [--dry_run]

Files under --out: cells/LINK.CELL.json (one per cell: the command, exit status, step time,
split), summary.md (the table). A cell whose JSON shows the same command and success is not
run again (resumable).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the grid: its workloads, JSON and metrics-line readers)

DEFAULT_CELLS = "dense,topk:0.015625,topk:0.004,topk:0.001,ddp,compute"
SKIP_ROUNDS = 5  # rounds left out of the split's medians (start-up, the first pull)


class UsageError(Exception):
    """A bad flag value: exit 2."""


def parse_cells(text):
    """(name, backend, compressor or None, density or None) per cell, in the given order."""
    cells = []
    for name in [c.strip() for c in text.split(",") if c.strip()]:
        if name in ("dense", "ddp", "compute"):
            backend = {"dense": "sieve", "ddp": "ddp", "compute": "none"}[name]
            cells.append((name, backend, "none" if name == "dense" else None, None))
            continue
        compressor, sep, density = name.partition(":")
        try:
            d = float(density)
        except ValueError:
            d = None
        if compressor not in ("topk", "gaussiank") or not sep or d is None or not 0.0 < d <= 1.0:
            raise UsageError(f"unknown cell '{name}' (dense, topk:D, gaussiank:D, ddp, compute; "
                             "D in (0, 1])")
        cells.append((name, "sieve", compressor, d))
    if not cells:
        raise UsageError("no cell given")
    return list(dict.fromkeys(cells))


def cell_paths(out, link, name):
    base = f"{link or 'loopback'}.{name.replace(':', '_')}"
    return {"json": os.path.join(out, "cells", f"{base}.json"),
            "result": os.path.join(out, "runs", base, "result.json"),
            "metrics": os.path.join(out, "runs", base, "metrics-0.jsonl"),
            "logs": os.path.join(out, "runs", base, "logs")}


def cell_command(a, cell, link):
    """The argv of one cell (module docstring)."""
    name, backend, compressor, density = cell
    paths = cell_paths(a.out, link, name)
    workload = run.WORKLOADS[a.workload]
    script = [a.python, os.path.join(run.EXAMPLES, workload.script), f"--max_steps={a.steps}",
              "--eval_every=0", f"--result_json={paths['result']}"] + shlex.split(a.extra)
    netns = [os.path.join(run.REPO, "deploy", "local", "netns", "run"), f"--build={a.build}",
             f"--num_workers={a.workers}", f"--link={link}", "--quiet",
             f"--log_dir={paths['logs']}", f"--timeout={a.cell_timeout_s}"]
    if backend == "none":
        return script + ["--backend=none", f"--ddp_ranks={a.workers}"]
    if backend == "ddp":
        return netns + [f"--ddp_cmd={shlex.join(script + ['--backend=ddp'])}"]
    script += [f"--compressor={compressor}", "--density_warmup="]
    if density is not None:
        script.append(f"--density={density}")
    return netns + [f"--num_servers={a.servers}", f"--worker_cmd={shlex.join(script)}", "--",
                    "--consistency=bsp", "--momentum_masking=false",
                    f"--metrics_out={paths['metrics']}", "--metrics_every=1"]


def round_split(path):
    """Medians of rank 0's t_compute, t_select, t_comm and bytes_up over its rounds after the
    first SKIP_ROUNDS, or None without such lines."""
    rows = [m for m in run.read_metrics_lines(path)
            if isinstance(m.get("round"), int) and m["round"] >= SKIP_ROUNDS]
    if not rows:
        return None
    split = {}
    for key in ("t_compute", "t_select", "t_comm", "bytes_up"):
        values = [run._number(m.get(key)) for m in rows]
        values = [v for v in values if v is not None]
        split[key] = statistics.median(values) if values else None
    split["rounds"] = len(rows)
    return split


def run_cell(a, cell, link):
    paths = cell_paths(a.out, link, cell[0])
    argv = cell_command(a, cell, link)
    old = run.read_json(paths["json"])
    if old is not None and old.get("argv") == argv and old.get("ok"):
        print(f"  {cell[0]} on {link or 'loopback'}: done before, kept", flush=True)
        return old
    for p in (paths["result"], paths["metrics"]):
        if os.path.exists(p):
            os.remove(p)
    os.makedirs(paths["logs"], exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in run.DDP_OUTER_ENV}
    start = time.monotonic()
    with open(os.path.join(paths["logs"], "harness.log"), "w") as log:
        code = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                               cwd=run.REPO)
    result = run.read_json(paths["result"]) or {}
    record = {"cell": cell[0], "link": link or "loopback", "argv": argv, "exit_code": code,
              "wall_s": round(time.monotonic() - start, 3),
              "steps": result.get("steps"), "steps_per_s": run._number(result.get("steps_per_s")),
              "split": round_split(paths["metrics"]) if cell[1] == "sieve" else None}
    record["ok"] = code == 0 and record["steps_per_s"] is not None
    run.write_json(paths["json"], record)
    shown = f"{1.0 / record['steps_per_s']:.3f} s/step" if record["ok"] else f"failed ({code})"
    print(f"  {cell[0]} on {link or 'loopback'}: {shown}", flush=True)
    return record


def markdown(records, workload):
    """One table: a row per cell and link, the step time, against the compute-only bound."""
    bound = next((1.0 / r["steps_per_s"] for r in records
                  if r["cell"] == "compute" and r.get("ok")), None)
    out = [f"### {workload}: seconds per step (the training loop's, evaluation excluded)\n",
           "| link | cell | s per step | / compute-only | t_compute | t_select | t_comm "
           "| pushed per worker and round |",
           "|---|---|---|---|---|---|---|---|"]
    for r in records:
        step = 1.0 / r["steps_per_s"] if r.get("ok") else None
        ratio = f"{step / bound:.2f}" if step is not None and bound else "—"
        s = r.get("split") or {}

        def sec(key):
            return f"{s[key] * 1e3:.1f} ms" if s.get(key) is not None else "—"

        pushed = run._fmt_bytes(s.get("bytes_up")) if s.get("bytes_up") is not None else "—"
        out.append(f"| {r['link']} | {r['cell']} | "
                   f"{f'{step:.3f}' if step is not None else 'failed'} | {ratio} | "
                   f"{sec('t_compute')} | {sec('t_select')} | {sec('t_comm')} | {pushed} |")
    return "\n".join(out) + "\n"


def make_parser():
    p = argparse.ArgumentParser(prog="bench/workloads/steptime.py",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True, help=f"one of {', '.join(run.WORKLOADS)}")
    p.add_argument("--links", default="1gbit,100mbit", help="comma-separated tc rates")
    p.add_argument("--cells", default=DEFAULT_CELLS, help="comma-separated (module docstring)")
    p.add_argument("--steps", type=int, default=60, help="steps per cell")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--build", default="build", help="the build with deploy/sieve's daemons")
    p.add_argument("--python", default="/usr/bin/python3", help="Debian's, with torch")
    p.add_argument("--out", default="", help="default results/steptime/WORKLOAD")
    p.add_argument("--extra", default="", help="more script flags for every cell")
    p.add_argument("--cell_timeout_s", type=int, default=1800, help="a cell's time limit")
    p.add_argument("--dry_run", action="store_true", help="print the commands, run nothing")
    return p


def main(argv=None):
    p = make_parser()
    a = p.parse_args(argv)
    try:
        if a.workload not in run.WORKLOADS:
            raise UsageError(f"unknown workload '{a.workload}' (known: "
                             f"{', '.join(run.WORKLOADS)})")
        if a.steps < SKIP_ROUNDS + 5 or a.workers < 1 or a.servers < 1:
            raise UsageError(f"--steps must be >= {SKIP_ROUNDS + 5}, --workers and --servers "
                             ">= 1")
        cells = parse_cells(a.cells)
        links = [l.strip() for l in a.links.split(",") if l.strip()]
        if not links:
            raise UsageError("no link given")
        a.out = os.path.abspath(a.out or os.path.join(run.REPO, "results", "steptime",
                                                      a.workload))
        a.build = os.path.abspath(a.build)
        plan = []
        for cell in cells:  # compute once, the rest once per link
            plan += [(cell, "")] if cell[1] == "none" else [(cell, link) for link in links]
        if not a.dry_run and os.geteuid() != 0 and any(link for _, link in plan):
            raise UsageError("the linked cells need root (network namespaces)")
    except UsageError as e:
        p.error(str(e))  # exits 2
    if a.dry_run:
        for cell, link in plan:
            print(f"# {cell[0]} on {link or 'loopback'}")
            print(shlex.join(cell_command(a, cell, link)))
        return 0
    print(f"steptime: {a.workload}, {len(plan)} cells -> {a.out}", flush=True)
    records = [run_cell(a, cell, link) for cell, link in plan]
    text = markdown(records, a.workload)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    failed = [f"{r['cell']} on {r['link']}" for r in records if not r["ok"]]
    if failed:
        print(f"steptime: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
