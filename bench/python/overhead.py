#!/usr/bin/env python3
"""The Python worker's per-round overhead against sieve-worker's (the target: at most 1.2x).

Overhead = everything a round does but the batch, forward and backward: weight decay, error
feedback, selection, push/pull (the round trip to the servers included) and the metrics line.
Jobs of one server and one worker, FNN-3, topk at density 0.001 (k = 199), --max_rounds rounds,
alternating sieve-worker and examples/torch/fashion_mnist.py `--repeats` times in the same run
(same machine, same load). Both workers write a metrics line every round; per run, over the
rounds after the first 50, it reports the mean of (round wall time - t_compute): everything but
the batch, forward and backward, bookkeeping included (t_wall[i] - t_wall[i-1] is round i's wall
time; t_compute is the gradient's time in both workers), and the mean of t_select + t_comm (error
feedback + selection + push/pull). The summary takes the median of the runs.

usage: bench/python/overhead.py [--build=build] [--rounds=2000] [--repeats=3] [--density=0.001]
Prints one line per run, then the medians and the ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(build, worker_cmd, rounds, density, out, job_flags=None, skip=50):
    """One job of one server and one worker (worker_cmd None: sieve-worker); job_flags replace
    the FNN-3 / Top-k flags; the first `skip` rounds are left out. Returns the means of
    (t_select + t_comm, t_compute, round wall time - t_compute)."""
    argv = [os.path.join(build, "deploy", "sieve"), "launch", "--num_servers=1",
            "--num_workers=1", "--progress=off", f"--log_dir={out}"]
    if worker_cmd:
        argv.append(f"--worker_cmd={worker_cmd}")
    if job_flags is None:
        job_flags = ["--model=fnn3", "--epochs=1", "--compressor=topk", f"--density={density}",
                     "--lr=0.05"]
    argv += ["--", *job_flags, f"--max_rounds={rounds}", f"--metrics_out={out}/metrics.jsonl"]
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "worker", "python"),
               OMP_NUM_THREADS="1")
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stdout[-3000:]}")
    with open(f"{out}/metrics.jsonl") as f:
        lines = [json.loads(line) for line in f]
    # Round i's wall time is t_wall[i] - t_wall[i-1]; all of it but t_compute is overhead.
    walls = [b["t_wall"] - a["t_wall"] for a, b in zip(lines, lines[1:])][skip:]
    lines = lines[skip + 1:]
    whole = statistics.mean(w - m["t_compute"] for w, m in zip(walls, lines))
    overhead = statistics.mean(m["t_select"] + m["t_comm"] for m in lines)
    compute = statistics.mean(m["t_compute"] for m in lines)
    return overhead, compute, whole


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--density", type=float, default=0.001)
    a = ap.parse_args()
    script = os.path.join(ROOT, "examples", "torch", "fashion_mnist.py")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    root = tempfile.mkdtemp(prefix="sieve-bench-python-")
    results = {"cpp": [], "python": [], "cpp_whole": [], "python_whole": []}
    for i in range(a.repeats):
        for kind, cmd in (("cpp", None), ("python", f"{python} {script}")):
            o, c, whole = run(a.build, cmd, a.rounds, a.density, f"{root}/{kind}-{i}")
            results[kind].append(o)
            results[kind + "_whole"].append(whole)
            print(f"run {i} {kind:6s}: round minus compute {whole * 1e3:.3f} ms, t_select + "
                  f"t_comm {o * 1e3:.3f} ms, compute {c * 1e3:.3f} ms", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"sieve-worker overhead: {med['cpp_whole'] * 1e3:.3f} ms/round "
          f"(t_select + t_comm {med['cpp'] * 1e3:.3f} ms)")
    print(f"Python worker overhead: {med['python_whole'] * 1e3:.3f} ms/round "
          f"(t_select + t_comm {med['python'] * 1e3:.3f} ms)")
    print(f"ratio Python / C++: {med['python_whole'] / med['cpp_whole']:.2f} "
          f"(t_select + t_comm: {med['python'] / med['cpp']:.2f}); target <= 1.2")


if __name__ == "__main__":
    main()
