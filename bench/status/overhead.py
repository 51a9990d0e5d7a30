#!/usr/bin/python3
"""The job status's cost, measured in one run: the same job on two builds, alternated, and the
latency of `sieve status` against the running job.

    /usr/bin/python3 bench/status/overhead.py --base=BASE_BUILD [--build=build] [--cells=64x16]
        [--rounds=150] [--repeats=2] [--d=1e6]

BASE_BUILD is a build of the tree without the job status (e.g. a git worktree of the commit
before it, built with `cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
-DSIEVE_BUILD_TESTS=OFF -DSIEVE_BUILD_BENCH=OFF && ninja -C build sieve sieve-scheduler
sieve-server sieve-worker`). Each repeat runs the cell three times (the order alternates): on the base build, on this
build ("new", the same flags), and on this build with the metrics ports on and `sieve status`
polled ("polled"), with `sieve launch`: synthetic model of D parameters, Top-k at density 0.001, BSP, each worker's compute
an emulated 2 ms (--straggler=delay:2ms, as bench/scale/run.py), one BLAS and kernel thread.
Round time: from every worker's --metrics_out lines (a documented file), the mean time of the
rounds after the first 10 % (t_wall), the median over the workers. In the polled run every
daemon serves its metrics port, and `sieve status --json` is timed every 0.5 s while the job runs (wall time of the whole command: start, HTTP GET, parse, print). The bytes a report adds
to a HEARTBEAT come from bench_heartbeat_bytes. Prints the ratios and writes
results/bench/status-overhead-<timestamp>.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import daemon_ports  # noqa: E402 (bench/common/daemon_ports.py)


def free_ports(n):
    """A base port P with P..P+n-1 free now (`sieve launch --metrics_port=P` gives each of the
    job's n daemons one of them)."""
    for base in range(20000, 60000 - n, n + 7):
        if daemon_ports.ports_free(base, n, "0.0.0.0"):
            return base
    sys.exit("overhead: no free range of ports for the daemons' metrics")


def round_time(metrics_dir, workers):
    """Median over workers of the mean steady round time (s), or None."""
    means = []
    for r in range(workers):
        path = os.path.join(metrics_dir, f"m-{r}.jsonl")
        if not os.path.exists(path):
            continue
        rows = []
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
        rows = [x for x in rows if x.get("t_wall") is not None]
        rows.sort(key=lambda x: x["round"])
        if len(rows) < 10:
            continue
        first = rows[len(rows) // 10]
        last = rows[-1]
        if last["round"] > first["round"]:
            means.append((last["t_wall"] - first["t_wall"]) / (last["round"] - first["round"]))
    return statistics.median(means) if means else None


def time_status(sieve, port, stop, out):
    """Times `sieve status --json` every 0.5 s until `stop`, while the job runs."""
    while not stop.is_set():
        t0 = time.monotonic()
        p = subprocess.run([sieve, "status", f"--metrics=127.0.0.1:{port}", "--json"],
                           capture_output=True, text=True)
        dt = time.monotonic() - t0
        if p.returncode == 0:
            try:
                phase = json.loads(p.stdout)["phase"]
            except (ValueError, KeyError):
                phase = None
            if phase == "JOB_RUNNING":
                out.append(dt)
        stop.wait(0.5)


def run_job(build, w, s, d, rounds, with_status, label):
    sieve = os.path.join(build, "deploy", "sieve")
    with tempfile.TemporaryDirectory(prefix="status-ab-") as tmp:
        port = free_ports(1 + s + w)
        argv = [sieve, "launch", f"--num_servers={s}", f"--num_workers={w}", "--progress=off",
                f"--log_dir={tmp}/logs"]
        if with_status:
            argv.append(f"--metrics_port={port}")
        argv += ["--", "--model=synthetic", f"--num_params={d}", "--seed=1", "--consistency=bsp",
                 "--server_threads=1", "--device=cpu", "--compressor=topk", "--density=0.001",
                 f"--rounds_per_epoch={rounds}", "--epochs=1", "--eval_every=0",
                 "--blas_threads=1", "--kernel_threads=1", "--straggler=delay:2ms",
                 f"--metrics_out={tmp}/m-{{rank}}.jsonl"]
        latencies, stop = [], threading.Event()
        timer = None
        if with_status:
            timer = threading.Thread(target=time_status, args=(sieve, port, stop, latencies))
            timer.start()
        t0 = time.monotonic()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        stop.set()
        if timer:
            timer.join()
        if p.returncode != 0:
            sys.exit(f"{label}: sieve launch exited {p.returncode}:\n{p.stderr[-3000:]}")
        rt = round_time(tmp, w)
        print(f"  {label:6s} round {rt * 1e3:8.3f} ms  job {wall:6.1f} s" +
              (f"  sieve status: {len(latencies)} calls, median {statistics.median(latencies) * 1e3:.1f}"
               f" ms, max {max(latencies) * 1e3:.1f} ms" if latencies else ""), flush=True)
        return {"round_s": rt, "wall_s": wall, "status_latency_s": latencies}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cells", default="64x16")
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--d", default="1e6")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    d = int(float(a.d))
    hb = subprocess.run([os.path.join(a.build, "bench", "status", "bench_heartbeat_bytes")],
                        capture_output=True, text=True, check=True).stdout
    print(hb, end="")
    result = {"bench": "status-overhead", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "cpus": os.cpu_count(), "argv": sys.argv, "heartbeat_bytes": hb.strip().split("\n"),
              "cells": []}
    for cell in a.cells.split(","):
        w, s = (int(x) for x in cell.split("x"))
        print(f"cell {w}x{s}, D={d}, {a.rounds} rounds:", flush=True)
        runs = []
        for r in range(a.repeats):
            # new: the same job; polled: the same again with the scheduler's metrics port on and
            # `sieve status` run every 0.5 s (so every daemon's metrics endpoint is on too).
            order = [("base", a.base, False), ("new", a.build, False), ("polled", a.build, True)]
            if r % 2:
                order.reverse()
            pair = {}
            for label, build, status in order:
                pair[label] = run_job(build, w, s, d, a.rounds, status, label)
            runs.append(pair)
        ratios = [p["new"]["round_s"] / p["base"]["round_s"] for p in runs
                  if p["new"]["round_s"] and p["base"]["round_s"]]
        polled = [p["polled"]["round_s"] / p["base"]["round_s"] for p in runs
                  if p["polled"]["round_s"] and p["base"]["round_s"]]
        lat = [x for p in runs for x in p["polled"]["status_latency_s"]]
        summary = {"W": w, "S": s, "D": d, "rounds": a.rounds, "runs": runs,
                   "round_ratio_new_over_base": ratios,
                   "round_ratio_polled_over_base": polled,
                   "status_latency_median_s": statistics.median(lat) if lat else None,
                   "status_latency_max_s": max(lat) if lat else None}
        result["cells"].append(summary)
        print(f"  round time new/base: " + ", ".join(f"{x:.3f}" for x in ratios) +
              (f" (mean {statistics.mean(ratios):.3f})" if ratios else "") +
              "; polled/base: " + ", ".join(f"{x:.3f}" for x in polled) +
              (f"; sieve status median {summary['status_latency_median_s'] * 1e3:.1f} ms, max "
               f"{summary['status_latency_max_s'] * 1e3:.1f} ms over {len(lat)} calls" if lat else ""))
    out = a.out or os.path.join(ROOT, "results", "bench",
                                time.strftime("status-overhead-%Y%m%d-%H%M%S.json"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
