#!/usr/bin/python3
"""BenchScaleN64: the scale harness (bench/scale/run.py) at W = 64 workers and S = 16 servers
(N = 81 processes on this machine), D = 1e5, a few rounds, and the checks that fail without the
fixes of docs/scale.md, "What broke or grew":

  - no full mesh (net/node.cc, Talks): every worker holds exactly 2 (S + 1) + 1 = 35 sockets, every
    server 2 (W + 1) + 1 = 131 and the scheduler 2 (W + S) + 1 = 161, at steady state and at
    their maximum over the run; a full mesh gives every node 2 (N - 1) + 1 = 161;
  - cuBLAS loaded lazily (kernels/nn/cublas_library.h): every CPU worker's peak RSS is below
    --max_worker_rss_mb (default 120 MB; ~50 MB measured, 235 MB when cuBLAS was linked and
    loaded at start). That check can only fail on a build with the CUDA backend (SIEVE_CUDA ON or
    AUTO with nvcc): a CUDA-OFF build never maps cuBLAS, so there it passes either way;
  - the job forms within 30 s and trains to the end: every daemon exited 0, every server applied
    exactly W x rounds pushes, the pushed sums match (the harness's exactness checks);
  - the barrier probe ran on every worker: barrier_probes = N on each, 0 < p50 <= p99 <= the
    whole probe's time.

usage: n64_test.py BUILD_DIR [--max_worker_rss_mb=120]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# The scale harness under test, bench/scale/ (this file is tests/bench/scale/).
SCALE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "..", "bench", "scale"))
sys.path.insert(0, SCALE)
import run  # noqa: E402 (the harness, bench/scale/run.py)
# 150 rounds: the steady-state sample of every process lies between the last barrier and the first
# summary line; at 30 rounds that window was too short on a loaded machine (sockets_steady 0).
W, S, ROUNDS, PROBES = 64, 16, 150, 20
FORMED_LIMIT_S = 30.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--max_worker_rss_mb", type=float, default=120.0)
    a = ap.parse_args()
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "scale.json")
        argv = [sys.executable, os.path.join(SCALE, "run.py"), f"--build={a.build}",
                f"--cells={W}x{S}", "--d=1e5", f"--rounds={ROUNDS}",
                f"--barrier_probe={PROBES}", "--timeout_s=150", f"--out={out}"]
        t = time.time()
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=200)
        secs = time.time() - t
        print(r.stdout, end="")
        if r.returncode != 0:
            bad.append(f"the harness exited {r.returncode}")
        doc = json.load(open(out))
    cell = doc["cells"][0]
    if not cell.get("pass"):
        bad.append(f"the cell failed: {cell.get('problems')}")
    for k, v in cell.get("checks", {}).items():
        if v is not True:
            bad.append(f"check {k} not passed")
    procs = cell["processes"]
    roles = [p["role"] for p in procs]
    if (roles.count("scheduler"), roles.count("server"), roles.count("worker")) != (1, S, W):
        bad.append(f"not 1 scheduler, {S} servers and {W} workers")
    # The closed forms of docs/scale.md: a PUSH to each peer the node talks to and the PULL they
    # connect to, plus one socket of its own (net/node.cc).
    want = {"worker": 2 * (S + 1) + 1, "server": 2 * (W + 1) + 1, "scheduler": 2 * (W + S) + 1}
    full_mesh = 2 * (W + S) + 1
    for p in procs:
        name, role = p["process"], p["role"]
        if p["exit"] != 0:
            bad.append(f"{name}: exit {p['exit']}")
        for key in ("sockets_steady", "sockets_max"):
            if p.get(key) != want[role]:
                bad.append(f"{name}: {key} {p.get(key)}, expected 2 (peers + 1) + 1 = "
                           f"{want[role]} (a full mesh: {full_mesh})")
        if role == "worker":
            rss = p.get("peak_rss_mb")
            if rss is None or not 0 < rss < a.max_worker_rss_mb:
                bad.append(f"{name}: peak RSS {rss} MB, not below {a.max_worker_rss_mb} MB "
                           "(cuBLAS loaded by a CPU worker?)")
    formed = cell.get("formed_s")
    if formed is None or not 0 < formed <= FORMED_LIMIT_S:
        bad.append(f"formed in {formed} s, not within {FORMED_LIMIT_S} s")
    for name, kv in cell.get("worker_summaries", {}).items():
        try:
            n, p50, p99 = (int(kv["barrier_probes"]), float(kv["barrier_p50_ms"]),
                           float(kv["barrier_p99_ms"]))
            total_ms = float(kv["barrier_probe_s"]) * 1e3
        except (KeyError, ValueError):
            bad.append(f"{name}: no barrier probe fields in its summary line")
            continue
        # total_ms is printed with 3 decimals of seconds: allow its rounding.
        if n != PROBES or not 0 < p50 <= p99 <= total_ms + 0.5:
            bad.append(f"{name}: barrier_probes={n} p50={p50} p99={p99} probe {total_ms} ms")
    if cell.get("barrier_p50_ms") is None or cell.get("barrier_p99_ms") is None:
        bad.append("the cell has no barrier_p50_ms / barrier_p99_ms")
    rss = max((p["peak_rss_mb"] or 0) for p in procs if p["role"] == "worker")
    print(f"n64: W={W} S={S} in {secs:.1f} s: formed {formed} s, worker RSS max {rss:.1f} MB, "
          f"sockets worker/server/scheduler {cell.get('worker_sockets_max')}/"
          f"{cell.get('server_sockets_max')}/{cell.get('scheduler_sockets')}, barrier p50/p99 "
          f"{cell.get('barrier_p50_ms')}/{cell.get('barrier_p99_ms')} ms")
    return run.verdict("n64", bad)


if __name__ == "__main__":
    sys.exit(main())
