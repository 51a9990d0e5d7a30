#!/usr/bin/python3
"""BenchScaleSmoke: bench/scale/run.py at cell 4x1, D = 1e5, a few hundred short rounds (seconds on
2 cores). Passes when the harness exits 0, its JSON has every field of a cell and of each
process filled in, and the exactness checks passed; then a cell with a bad worker flag must be
reported as failed (exit 1, pass false) within seconds, the daemons stopped. Also checks that the
nodes are not a full mesh (the sockets of each role), the barrier probe's percentiles and run.py's
growth fit (closed forms).

usage: smoke_test.py BUILD_DIR
"""
import json
import math
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
CELL_FIELDS = [
    "workers", "servers", "num_params", "rounds", "wall_s", "formed_s",
    "start_barrier_s", "start_barrier_min_s", "round_s", "mean_round_s", "steady_window_s",
    "scheduler_cpu_per_s", "server_cpu_per_round_s", "heartbeats_per_s_nominal",
    "heartbeats_received", "heartbeats_per_s", "union_pairs_per_reply", "union_of_wk",
    "scheduler_rss_mb", "server_rss_mb_max", "worker_rss_mb_max", "scheduler_fds",
    "server_fds_max", "worker_fds_max", "scheduler_sockets", "server_sockets_max",
    "worker_sockets_max", "worker_pss_mb_max", "worker_anon_mb_max",
    "server_anon_mb_max", "checks", "pushed_sum_workers", "pushed_sum_servers", "pass",
    "barrier_probes", "barrier_p50_ms", "barrier_p99_ms", "barrier_p50_ms_median"]
PROCESS_FIELDS = ["process", "role", "pid", "exit", "peak_rss_mb", "peak_rss_source", "cpu_s",
                  "pss_mb_max", "anon_mb_max", "steady_cpu_per_s", "fds_steady", "sockets_steady",
                  "fds_max", "samples"]
CHECKS = ["exit_0", "applied_exact", "rounds_exact", "union_in_bounds", "pushed_sum_match",
          "barrier_probes"]


def harness(build, out, *extra):
    argv = [sys.executable, os.path.join(SCALE, "run.py"), f"--build={build}", "--cells=4x1",
            "--d=1e5", "--rounds=300", "--timeout_s=120", f"--out={out}", *extra]
    t = time.time()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=240)
    print(r.stdout, end="")
    return r.returncode, time.time() - t


def check_growth_fit(bad):
    """run.py's growth fit against closed forms: t = 3 N^1.5 fits p = 1.5 exactly; N log N's
    exponent between 5 and 80 is log(80 ln 80 / (5 ln 5)) / log 16; a cell growing like N^2
    is reported ABOVE it, one like sqrt(N) within."""
    p = run.power_fit([5, 20, 80], [3 * n ** 1.5 for n in (5, 20, 80)])
    if p is None or abs(p - 1.5) > 1e-9:
        bad.append(f"power_fit of 3 N^1.5 gave {p}")
    ref = math.log(80 * math.log(80) / (5 * math.log(5))) / math.log(16)
    if abs(run.nlogn_exponent(5, 80) - ref) > 1e-12:
        bad.append("nlogn_exponent(5, 80) is not the closed form")

    def cell(w, s, t, probe=None):
        return {"num_params": 1e6, "pass": True, "workers": w, "servers": s, "formed_s": t,
                "start_barrier_s": t, "barrier_p50_ms": probe}
    square = run.growth_lines([cell(3, 1, 25.0, 25.0), cell(63, 16, 80.0 ** 2, 80.0 ** 2)])
    root = run.growth_lines([cell(3, 1, 5 ** 0.5), cell(63, 16, 80 ** 0.5)])
    if len(square) != 1 or "formed ~ N^2.00 (ABOVE" not in square[0]:
        bad.append(f"growth of N^2 not flagged: {square}")
    if len(square) != 1 or "barrier p50 ~ N^2.00 (ABOVE" not in square[0]:
        bad.append(f"growth of the barrier p50 as N^2 not flagged: {square}")
    if len(root) != 1 or "barrier p50" in root[0]:
        bad.append(f"a growth line of cells without a barrier probe fits its p50: {root}")
    if len(root) != 1 or "formed ~ N^0.50 (within" not in root[0]:
        bad.append(f"growth of sqrt(N) flagged: {root}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    bad = []
    check_growth_fit(bad)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "scale.json")
        # Heartbeats every 100 ms, so that a cell of about a second counts several per node.
        rc, secs = harness(build, out, "--heartbeat_interval_ms=100")
        if rc != 0:
            bad.append(f"the harness exited {rc}")
        doc = json.load(open(out))
        if not doc.get("pass") or len(doc.get("cells", [])) != 1:
            bad.append("the document does not pass with one cell")
        cell = doc["cells"][0]
        for k in CELL_FIELDS:
            if cell.get(k) is None:
                bad.append(f"cell field {k} missing or null")
        for k in CHECKS:
            if cell.get("checks", {}).get(k) is not True:
                bad.append(f"check {k} not passed")
        if (cell["workers"], cell["servers"], cell["num_params"]) != (4, 1, 100000):
            bad.append("the cell is not W=4 S=1 D=1e5")
        procs = cell.get("processes", [])
        if sorted(p["role"] for p in procs) != ["scheduler", "server"] + ["worker"] * 4:
            bad.append("not one scheduler, one server and four workers")
        for p in procs:
            for k in PROCESS_FIELDS:
                if p.get(k) is None:
                    bad.append(f"{p.get('process')}: field {k} missing or null")
            if p.get("exit") != 0:
                bad.append(f"{p.get('process')}: exit {p.get('exit')}")
        if not (0 < cell["formed_s"] <= cell["start_barrier_s"] < cell["wall_s"]):
            bad.append("formed_s <= start_barrier_s < wall_s does not hold")
        # The barrier probe (default 100 barriers per worker): p50 <= p99 on the cell's maxima.
        if cell["barrier_probes"] != 100 or not (
                0 < cell["barrier_p50_ms_median"] <= cell["barrier_p50_ms"] <=
                cell["barrier_p99_ms"]):
            bad.append(f"barrier probe {cell['barrier_probes']}: p50 median "
                       f"{cell['barrier_p50_ms_median']}, max p50 {cell['barrier_p50_ms']}, "
                       f"max p99 {cell['barrier_p99_ms']}")
        # Each of the W + S nodes sends one HEARTBEAT per --heartbeat_interval_ms (100 ms): the
        # scheduler's count over its life is at most that rate (a node's first comes one interval
        # after its start), and some arrived in a cell of several seconds.
        hb, nominal = cell.get("heartbeats_per_s"), cell["heartbeats_per_s_nominal"]
        if not cell.get("heartbeats_received") or hb is None or not 0 < hb <= 1.1 * nominal:
            bad.append(f"heartbeats {cell.get('heartbeats_received')} ({hb}/s) against "
                       f"{nominal}/s nominal")
        # No full mesh (net/node.cc, Talks): a worker holds a PUSH to the scheduler and to each of
        # the S servers, and the PULL those connect to, 2 (S + 1) + 1 sockets; a server
        # 2 (W + 1) + 1; the scheduler talks to all, 2 (W + S) + 1. A full mesh gives every node
        # the scheduler's count (11 here).
        for key, want in (("worker_sockets_max", 2 * (1 + 1) + 1),
                          ("server_sockets_max", 2 * (4 + 1) + 1),
                          ("scheduler_sockets", 2 * (4 + 1) + 1)):
            if cell.get(key) != want:
                bad.append(f"{key} {cell.get(key)}, expected {want}")
        print(f"smoke: good cell in {secs:.1f} s")

        out_bad = os.path.join(tmp, "bad.json")
        rc, secs = harness(build, out_bad, "--compute=bogus")
        doc = json.load(open(out_bad))
        if rc != 1 or doc.get("pass") is not False or doc["cells"][0]["checks"]["exit_0"]:
            bad.append(f"a cell whose workers exit 2 was not reported as failed (rc {rc})")
        if secs > 30:
            bad.append(f"the failed cell took {secs:.0f} s to stop")
    return run.verdict("smoke", bad)


if __name__ == "__main__":
    sys.exit(main())
