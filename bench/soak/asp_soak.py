#!/usr/bin/env python3
"""ASP soak: a local cluster (1 scheduler, S servers, W workers, FNN-3 on Fashion-MNIST, Top-k,
ASP) trains for about --minutes while the RSS of every process is sampled from /proc. Passes when
every process exits 0, no process logged an ERROR/FATAL line, and every process's RSS is flat:
after a warm-up (the first --warmup fraction of the run), the mean RSS of the last minute exceeds
the mean of the first minute after warm-up by at most --tolerance_mb. Also reports each process's
RSS slope (least squares, MB/min) over the post-warm-up samples.

The run length is set by calibration: a 2-epoch job with the same cluster measures the training
loop's seconds per epoch (worker 0's summary `seconds`, start-up excluded), then the soak runs
ceil(minutes·60 / that) epochs, so it ends on its own (a clean finish
is part of the test). Results: a table on stdout and JSON under results/bench/.

usage: asp_soak.py [--build=build] [--minutes=10] [--workers=8] [--servers=2]
                   [--sample_s=5] [--warmup=0.1] [--tolerance_mb=4]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import threading
import time

DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Proc:
    def __init__(self, name, argv):
        self.name = name
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.errors = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            # glog severity prefix: E (error) or F (fatal) followed by the date (e.g. E1129 ...).
            if re.match(r"^[EF]\d{4} ", line):
                self.errors.append(line.rstrip("\n"))

    def wait_line(self, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            for line in self.lines:
                if needle in line:
                    return line
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        return None


def start_cluster(a, epochs):
    b = a.build
    sched = Proc("scheduler", [f"{b}/scheduler/sieve-scheduler", "--port=0", "--bind=127.0.0.1",
                               "--host=127.0.0.1", f"--num_servers={a.servers}",
                               f"--num_workers={a.workers}"])
    line = sched.wait_line("listening on ", 15)
    if line is None:
        sys.exit("soak: the scheduler did not start:\n" + "\n".join(sched.lines))
    addr = line.split("listening on ")[1].strip()
    common = [f"--scheduler={addr}", "--bind=127.0.0.1", "--host=127.0.0.1", "--model=fnn3",
              "--seed=1"]
    procs = [sched]
    for s in range(a.servers):
        procs.append(Proc(f"server{s}", [f"{b}/server/sieve-server", *common, f"--rank={s}",
                                         "--consistency=asp"]))
    for w in range(a.workers):
        procs.append(Proc(f"worker{w}", [f"{b}/worker/sieve-worker", *common, f"--rank={w}",
                                         "--compressor=topk", "--density=0.01", "--lr=0.05",
                                         "--batch_size=32", f"--epochs={epochs}",
                                         "--eval_every=0", "--progress=log"]))
    return procs


def run(a, epochs, sample_s):
    procs = start_cluster(a, epochs)
    t0 = time.time()
    samples = {p.name: [] for p in procs}
    while any(p.p.poll() is None for p in procs):
        now = time.time() - t0
        for p in procs:
            if p.p.poll() is None:
                kb = rss_kb(p.p.pid)
                if kb is not None:
                    samples[p.name].append((now, kb))
        time.sleep(sample_s)
        if now > a.minutes * 60 * 3 + 600:
            for p in procs:
                p.p.kill()
            sys.exit("soak: the job ran 3x longer than planned; killed")
    for p in procs:
        p.t.join(timeout=5)
    return procs, samples, time.time() - t0


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def slope_mb_per_min(pts):
    if len(pts) < 3:
        return float("nan")
    xs = [t / 60 for t, _ in pts]
    ys = [kb / 1024 for _, kb in pts]
    mx, my = mean(xs), mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--sample_s", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--tolerance_mb", type=float, default=4)
    a = ap.parse_args()
    if not os.path.exists(DATA):
        sys.exit(f"soak: {DATA} missing (Debian package dataset-fashion-mnist)")

    procs, _, _ = run(a, 2, 1)
    if any(p.p.returncode != 0 for p in procs):
        sys.exit("soak: calibration job failed:\n" + "\n".join(
            f"[{p.name}] {l}" for p in procs for l in p.lines[-5:]))
    summary = [l for l in procs[1 + a.servers].lines if "sieve-worker summary:" in l]
    m = re.search(r" seconds=([0-9.]+)", summary[-1]) if summary else None
    if m is None:
        sys.exit("soak: no worker summary in the calibration job")
    per_epoch = float(m.group(1)) / 2
    epochs = max(1, math.ceil(a.minutes * 60 / per_epoch))
    print(f"calibration: {per_epoch:.1f} s per epoch -> {epochs} epochs for ~{a.minutes:g} min",
          flush=True)

    procs, samples, wall = run(a, epochs, a.sample_s)
    ok = True
    rows = []
    warm = wall * a.warmup
    print(f"\nsoak: {a.workers} workers, {a.servers} servers, ASP, {epochs} epochs, "
          f"{wall / 60:.1f} min wall")
    print(f"{'process':<10} {'exit':>4} {'errors':>6} {'rss first min MB':>17} "
          f"{'rss last min MB':>16} {'growth MB':>10} {'slope MB/min':>13} {'peak MB':>8}")
    for p in procs:
        pts = [(t, kb) for t, kb in samples[p.name] if t >= warm]
        end = pts[-1][0] if pts else 0
        first = [kb / 1024 for t, kb in pts if t < warm + 60]
        last = [kb / 1024 for t, kb in pts if t > end - 60]
        growth = mean(last) - mean(first)
        peak = max((kb for _, kb in samples[p.name]), default=0) / 1024
        flat = not math.isnan(growth) and growth <= a.tolerance_mb
        good = p.p.returncode == 0 and not p.errors and flat
        ok = ok and good
        rows.append({"process": p.name, "exit": p.p.returncode, "errors": p.errors[:5],
                     "rss_first_min_mb": mean(first), "rss_last_min_mb": mean(last),
                     "growth_mb": growth, "slope_mb_per_min": slope_mb_per_min(pts),
                     "peak_mb": peak, "samples": len(samples[p.name]), "pass": good})
        print(f"{p.name:<10} {p.p.returncode:>4} {len(p.errors):>6} {mean(first):>17.1f} "
              f"{mean(last):>16.1f} {growth:>10.2f} {slope_mb_per_min(pts):>13.3f} {peak:>8.1f}"
              f"{'' if good else '  FAIL'}")
    os.makedirs("results/bench", exist_ok=True)
    out = time.strftime("results/bench/soak-%Y%m%d-%H%M%S.json")
    with open(out, "w") as f:
        json.dump({"workers": a.workers, "servers": a.servers, "epochs": epochs,
                   "wall_s": wall, "tolerance_mb": a.tolerance_mb, "warmup": a.warmup,
                   "processes": rows, "pass": ok}, f, indent=1)
    print(f"\n{'PASS' if ok else 'FAIL'}: every process exited 0, logged no error and kept a flat "
          f"RSS (growth <= {a.tolerance_mb} MB)" if ok else "\nFAIL")
    print("json:", out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
