#!/usr/bin/python3
"""What `opt.step()` costs against forward + backward on a real model (the target: resnet18 with
Top-k 0.001, at most 15 %).

Runs examples/torch/resnet18.py (torchvision's resnet18, D = 11.2 M) as the one worker of a
1-server job under `sieve launch --worker_cmd` for `--steps` steps at a fixed density (no warm-up,
no evaluation), with a metrics line every step. sieve.torch writes per step t_compute (from the
end of the previous step() to the start of this one: the batch, forward and backward, all the
script does between steps) and t_wall; everything else of a step's wall time is the step itself
(the wrapped optimizer's update, error feedback, selection, push/pull with the round trip to the
server, the buffers, the bookkeeping). Over the steps after the first `--skip`, per run: the
mean step share = (wall - t_compute) / t_compute, and the means of t_select (update and
selection) and t_comm (push/pull). `--repeats` runs, the median printed last.

usage: /usr/bin/python3 bench/python/step_share.py [--build=build] [--steps=60] [--skip=10]
       [--repeats=2] [--density=0.001] [--threads=2] [--batch_size=64]
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step_share(lines, skip):
    """(share, t_compute, t_select, t_comm, step) means over the metrics lines after `skip`:
    step = wall - t_compute, share = step / t_compute. Round i's wall time is t_wall[i] -
    t_wall[i-1], so the first line has none."""
    walls = [b["t_wall"] - a["t_wall"] for a, b in zip(lines, lines[1:])][skip:]
    used = lines[skip + 1:]
    if not used:
        raise ValueError(f"{len(lines)} metrics lines: none left after skipping {skip}")
    compute = statistics.mean(m["t_compute"] for m in used)
    step = statistics.mean(w - m["t_compute"] for w, m in zip(walls, used))
    return (step / compute, compute, statistics.mean(m["t_select"] for m in used),
            statistics.mean(m["t_comm"] for m in used), step)


def run(a, out):
    script = [a.python, os.path.join(ROOT, "examples", "torch", "resnet18.py"),
              f"--max_steps={a.steps}", "--compressor=topk", f"--density={a.density}",
              "--density_warmup=", "--eval_every=0", "--eval_limit=64", f"--threads={a.threads}",
              f"--batch_size={a.batch_size}"]
    argv = [os.path.join(a.build, "deploy", "sieve"), "launch", "--num_servers=1",
            "--num_workers=1", "--progress=off", f"--log_dir={out}",
            f"--worker_cmd={shlex.join(script)}", "--", f"--metrics_out={out}/metrics.jsonl"]
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "worker", "python"))
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{shlex.join(argv)} failed:\n{r.stdout[-3000:]}")
    with open(f"{out}/metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch_size", type=int, default=64)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="sieve-bench-step-share-")
    shares = []
    for i in range(a.repeats):
        share, compute, select, comm, step = step_share(run(a, f"{root}/run-{i}"), a.skip)
        shares.append(share)
        print(f"run {i}: step {step * 1e3:.1f} ms = {share * 100:.1f} % of forward+backward "
              f"{compute * 1e3:.1f} ms (t_select {select * 1e3:.1f} ms, t_comm "
              f"{comm * 1e3:.1f} ms)", flush=True)
    print(f"median step share: {statistics.median(shares) * 100:.1f} % of forward+backward "
          f"(resnet18, topk {a.density}; target <= 15 %)")


if __name__ == "__main__":
    main()
