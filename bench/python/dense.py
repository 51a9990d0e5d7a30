#!/usr/bin/env python3
"""The Python worker's dense round at D = 1.05e7 against sieve-worker's, per parameter.

Jobs of one server and one worker with --compressor=none (every round pushes and pulls the whole
vector, 42 MB each way): sieve-worker on --model=synthetic with the D of
examples/torch/synthetic_large.py (10,512,394), and that script itself (a wide MLP through
sieve.torch), alternating `--repeats` times in the same run (same machine, same load). Per run,
over the rounds after the first 5, it reports the mean of t_select + t_comm (error feedback and
selection, which is the whole vector here, plus push/pull) and of the round's wall time minus
t_compute. Prints one line per run, the medians and their ratio (target: Python <= 1.0x C++).

usage: /usr/bin/python3 bench/python/dense.py [--build=build] [--rounds=30] [--repeats=3]
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead  # noqa: E402  (the job runner and its metrics reading)

D = 10512394


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(overhead.ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    script = os.path.join(overhead.ROOT, "examples", "torch", "synthetic_large.py")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    root = tempfile.mkdtemp(prefix="sieve-bench-dense-")
    jobs = {
        "cpp": (None, ["--model=synthetic", f"--num_params={D}", "--compressor=none",
                       "--epochs=1", f"--rounds_per_epoch={a.rounds}"]),
        "python": (f"{python} {script}", ["--compressor=none", "--epochs=1",
                                          f"--rounds_per_epoch={a.rounds}"]),
    }
    res = {k: [] for k in jobs}
    whole = {k: [] for k in jobs}
    for i in range(a.repeats):
        for kind, (cmd, flags) in jobs.items():
            o, c, w = overhead.run(a.build, cmd, a.rounds, 1.0, f"{root}/{kind}-{i}", flags, 5)
            res[kind].append(o)
            whole[kind].append(w)
            print(f"run {i} {kind:6s}: t_select + t_comm {o * 1e3:.1f} ms "
                  f"({o / D * 1e9:.2f} ns/parameter), round minus compute {w * 1e3:.1f} ms, "
                  f"compute {c * 1e3:.1f} ms", flush=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    medw = {k: statistics.median(v) for k, v in whole.items()}
    for k in jobs:
        print(f"{k}: t_select + t_comm {med[k] * 1e3:.1f} ms/round ({med[k] / D * 1e9:.2f} "
              f"ns/parameter), round minus compute {medw[k] * 1e3:.1f} ms")
    print(f"ratio Python / C++ (t_select + t_comm): {med['python'] / med['cpp']:.2f}; "
          f"round minus compute: {medw['python'] / medw['cpp']:.2f}; target <= 1.0")


if __name__ == "__main__":
    main()
