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
    consistency: [bsp, asp]     # --consistency: bsp, asp, ssp, or ssp:N (SSP with --staleness=N);
                                # asp+inverse, ssp:N+inverse: also --staleness_lr=inverse;
                                # bsp+backup:N: BSP with --backup_workers=N (+return:
                                # also --late_pushes=return)
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
  tcp_cc: cubic                 # optional, netns cells only: every connection's TCP congestion
                                # control (default: the kernel's, recorded in the run's key)
  upload_queue: host            # optional, netns cells only: each node's own upload queue
                                # (netns/run --upload_queue; default 100ms, or host: 1000 frames)
  contraction_every: 10         # optional: contraction ratio and bounds every n rounds
  histogram_rounds: [0, 500]    # optional: residual histograms (rank 0) at these rounds
  timeout: 3600                 # per run, seconds
  worker_cmd: python3 mlp.py    # optional: every worker runs this command instead of sieve-worker
                                # (`sieve launch --worker_cmd`; local links only); the job reaches
                                # it in SIEVE_* variables, the worker flags it implements in
                                # SIEVE_WORKER_FLAGS (docs/worker-api.md, "Environment variables")

A cell id names its grid values: bsp-topk-d0.001-w4-1gbit+w3_100mbit-sw3_x3 is BSP, Top-k at
0.001, 4 workers on 1 Gbit/s links but worker 3 on 100 Mbit/s, worker 3 computing 3x slower
(ssp:2 reads ssp2, asp+inverse aspinverse, bsp+backup:1 bspbackup1; the -s part is left out without a straggler). An unknown consistency or
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

Each run's directory keeps its daemons' run summaries (summary-{role}-{rank}.json, their
--summary_out: docs/protocol.md "Run summaries"), which the tables are made from.

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
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare.config import (DEFAULT_TARGET, ConfigError, cells_of, check_flags,  # noqa: E402
                            is_local, load_config, runs_of)
from compare.plots import compact_png, plot  # noqa: E402
from compare.runner import (key_inputs, program_ids, reusable, run_command, run_one,  # noqa: E402
                            summarize, write_key)
from compare.table import aggregate, fmt, write_tables  # noqa: E402


def main():
    """The command: a ConfigError (a usage error, or daemons that cannot be asked for their flags)
    is printed as `sieve compare: MESSAGE` lines on stderr and ends it with its exit status (2 or
    1); argparse exits 2 on bad arguments itself."""
    a = parse_args()
    try:
        return compare(a)
    except ConfigError as e:
        for message in e.messages:
            print("sieve compare: " + message, file=sys.stderr)
        return e.exit_status


def parse_args():
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
    return p.parse_args()


def compare(a):
    """Runs the grid of the parsed arguments `a`; returns the exit status (1 when a run failed).
    ConfigError before anything runs when the config or a flag is bad."""
    if a.progress_every <= 0:
        raise ConfigError("--progress_every must be > 0")
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
