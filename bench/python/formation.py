#!/usr/bin/env python3
"""Job formation: how long `sieve launch` takes to form a job of 4 workers and finish its first
round, for 4 `sieve-worker`s against 4 Python workers (the README's user script shape:
sieve.torch.init(), a torch MLP, DistributedOptimizer), alternating `--repeats` times in the same
run (same machine, same load). Each job runs one round (`--max_rounds=1` for sieve-worker; the
Python script stops after one step) with 2 servers, so its wall time is the formation (process
start, imports, registration, node table, worker 0's INIT, start barrier, pull) plus one round
and the shutdown. Prints one line per run, the medians and the ratio Python / C++ (the
target: at most 2).

usage: bench/python/formation.py [--build=build] [--repeats=3] [--workers=4]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = '''
import torch, sieve.torch
sieve.torch.init()
torch.manual_seed(sieve.torch.rank())
model = torch.nn.Sequential(torch.nn.Linear(784, 200), torch.nn.ReLU(), torch.nn.Linear(200, 200),
                            torch.nn.ReLU(), torch.nn.Linear(200, 10))
opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                       model, density=0.001)
opt.zero_grad()
torch.nn.functional.cross_entropy(model(torch.randn(32, 784)), torch.randint(0, 10, (32,))).backward()
opt.step()
opt.finish()
'''


def run(build, workers, worker_cmd):
    argv = [os.path.join(build, "deploy", "sieve"), "launch", "--num_servers=2",
            f"--num_workers={workers}", "--progress=off"]
    if worker_cmd:
        argv += [f"--worker_cmd={worker_cmd}"]
    else:
        argv += ["--", "--model=fnn3", "--max_rounds=1", "--density=0.001"]
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stdout[-3000:]}")
    return seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    script = os.path.join(tempfile.mkdtemp(prefix="sieve-bench-formation-"), "one_round.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    times = {"cpp": [], "python": []}
    for i in range(a.repeats):
        for kind, cmd in (("cpp", None), ("python", f"{python} {script}")):
            times[kind].append(run(a.build, a.workers, cmd))
            print(f"run {i} {kind:6s}: {times[kind][-1]:.2f} s to form a job of {a.workers} "
                  "workers and finish one round", flush=True)
    cpp, py = statistics.median(times["cpp"]), statistics.median(times["python"])
    print(f"median: sieve-worker {cpp:.2f} s, Python {py:.2f} s; ratio Python / C++ "
          f"{py / cpp:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
