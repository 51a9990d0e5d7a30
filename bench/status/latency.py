#!/usr/bin/python3
"""How fast `sieve status` answers for a running job, by each route, measured in one run.

One `sieve launch` job of W workers and S servers (synthetic model, BSP, a 2 ms emulated compute
per round, a job token file, the scheduler's metrics port on) while a timer runs, every 0.5 s in
turn: `sieve status --scheduler=ADDR --job_token_file=F --json` (the protocol's STATUS_QUERY),
`sieve status --metrics=ADDR --json` (GET /v1/job) and `sieve --version` (the same program
started and ended, doing nothing: the floor a loaded machine's process start sets). Only calls
that saw the job running count. Prints each route's median, 90th percentile and maximum (the
target: <= 100 ms for a 64 x 16 job) and writes them with every sample to
results/bench/status-latency-<timestamp>.json.

    /usr/bin/python3 bench/status/latency.py [--build=build] [--cell=64x16] [--rounds=300]
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import free_ports  # noqa: E402  (consecutive free ports for the launcher)


def timed(argv):
    """(seconds, exit code, stdout) of one run of argv."""
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True)
    return time.monotonic() - t0, p.returncode, p.stdout


def running(stdout):
    try:
        return json.loads(stdout)["phase"] == "JOB_RUNNING"
    except (ValueError, KeyError):
        return False


def poll(routes, stop, samples):
    """Runs each route in turn every 0.5 s until `stop`; keeps the times of calls made while the
    job ran (the floor's whenever the route before it saw the job running)."""
    while not stop.is_set():
        seen_running = False
        for name, argv in routes:
            dt, code, out = timed(argv)
            if name == "floor":
                if seen_running and code == 0:
                    samples[name].append(dt)
            elif code == 0 and running(out):
                seen_running = True
                samples[name].append(dt)
        stop.wait(0.5)


def summary(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return {"calls": len(xs), "median_ms": statistics.median(xs) * 1e3,
            "p90_ms": xs[min(len(xs) - 1, int(0.9 * len(xs)))] * 1e3, "max_ms": xs[-1] * 1e3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cell", default="64x16", help="WxS")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--d", default="1000000")
    a = ap.parse_args()
    w, s = (int(x) for x in a.cell.split("x"))
    sieve = os.path.join(a.build, "deploy", "sieve")
    with tempfile.TemporaryDirectory(prefix="status-latency-") as tmp:
        token = os.path.join(tmp, "token")
        with open(token, "w", encoding="utf-8") as f:
            f.write("status-latency\n")
        sched_port = free_ports(2 + s + w)  # the scheduler's, then one per daemon's metrics
        metrics = sched_port + 1
        argv = [sieve, "launch", f"--num_servers={s}", f"--num_workers={w}", "--progress=off",
                f"--port={sched_port}", f"--metrics_port={metrics}",
                f"--job_token_file={token}", f"--log_dir={tmp}/logs", "--",
                "--model=synthetic", f"--num_params={a.d}", "--seed=1", "--consistency=bsp",
                "--server_threads=1", "--device=cpu", "--compressor=topk", "--density=0.001",
                f"--rounds_per_epoch={a.rounds}", "--epochs=1", "--eval_every=0",
                "--blas_threads=1", "--kernel_threads=1", "--straggler=delay:2ms"]
        routes = [
            ("scheduler", [sieve, "status", f"--scheduler=127.0.0.1:{sched_port}",
                           f"--job_token_file={token}", "--host=127.0.0.1", "--json"]),
            ("metrics", [sieve, "status", f"--metrics=127.0.0.1:{metrics}", "--json"]),
            ("floor", [sieve, "--version"]),
        ]
        samples, stop = {name: [] for name, _ in routes}, threading.Event()
        timer = threading.Thread(target=poll, args=(routes, stop, samples))
        timer.start()
        t0 = time.monotonic()
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        stop.set()
        timer.join()
        if p.returncode != 0:
            sys.exit(f"sieve launch exited {p.returncode}:\n{p.stderr[-3000:]}")
    result = {"bench": "status-latency", "cell": a.cell, "d": a.d, "rounds": a.rounds,
              "job_s": wall, "routes": {k: summary(v) for k, v in samples.items()},
              "samples_s": samples}
    print(f"{a.cell}, D={a.d}, job {wall:.1f} s")
    for name, sm in result["routes"].items():
        if sm:
            print(f"  {name:9s} {sm['calls']:3d} calls  median {sm['median_ms']:7.1f} ms  "
                  f"p90 {sm['p90_ms']:7.1f} ms  max {sm['max_ms']:7.1f} ms")
        else:
            print(f"  {name:9s} no call saw the job running")
    out_dir = os.path.join(ROOT, "results", "bench")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, time.strftime("status-latency-%Y%m%d-%H%M%S.json"))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"json: {path}")


if __name__ == "__main__":
    main()
