#!/usr/bin/env python3
"""ASP soak: a local cluster (1 scheduler, S servers, W workers, FNN-3 on Fashion-MNIST, Top-k,
ASP) trains for about --minutes while the RSS of every process is sampled from /proc. Passes when
the scheduler's job status (--status_file) ends JOB_FINISHED, every process exits 0, no process
logged an ERROR/FATAL line, and every process's RSS is flat: after a warm-up (the first --warmup
fraction of the run), the mean RSS of the last minute exceeds the mean of the first minute after
warm-up by at most --tolerance_mb. Also reports each process's RSS slope (least squares, MB/min)
over the post-warm-up samples.

The run length is set by calibration: a 2-epoch job with the same cluster measures the training
loop's seconds per epoch (`seconds` of worker 0's summary, the file its --summary_out wrote;
start-up excluded), then the soak runs
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
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import daemon_ports  # noqa: E402 (bench/common/daemon_ports.py)

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

    def wait_port_file(self, path, timeout):
        """The HOST:PORT this scheduler wrote to its --port_file `path`, or None when it exited
        first or `timeout` passed."""
        return daemon_ports.wait_port_file(path, timeout, lambda: self.p.poll() is None, 0.05)


def read_json(path):
    """A file a daemon wrote for programs, or None when there is none: the scheduler's job status
    (its --status_file, docs/protocol.md "Job status"), a worker's end-of-run summary (its
    --summary_out)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def start_cluster(a, epochs, work_dir):
    b = a.build
    port_file = os.path.join(work_dir, "scheduler.port")
    sched = Proc("scheduler", [f"{b}/scheduler/sieve-scheduler", "--port=0", "--bind=127.0.0.1",
                               "--host=127.0.0.1", f"--num_servers={a.servers}",
                               f"--num_workers={a.workers}", f"--port_file={port_file}",
                               f"--status_file={os.path.join(work_dir, 'status.json')}"])
    addr = sched.wait_port_file(port_file, 15)
    if addr is None:
        code = sched.p.poll()
        how = f"exited {code} before writing its port file" if code is not None else \
            "wrote no port file within 15 s"
        sys.exit(f"soak: the scheduler did not start ({how}):\n" + "\n".join(sched.lines))
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
                                         "--eval_every=0", "--progress=log",
                                         f"--summary_out={work_dir}/worker-{{rank}}.json"]))
    return procs


def run(a, epochs, sample_s):
    """Runs one job; returns its processes, RSS samples, wall time, the scheduler's final job
    status (None when it wrote none) and worker 0's summary (None when it wrote none)."""
    work_dir = tempfile.mkdtemp(prefix="sieve-soak-")
    procs = start_cluster(a, epochs, work_dir)
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
    status = read_json(os.path.join(work_dir, "status.json"))
    summary = read_json(os.path.join(work_dir, "worker-0.json"))
    shutil.rmtree(work_dir, ignore_errors=True)
    return procs, samples, time.time() - t0, status, summary


def failure(status):
    """The job's failure as its status tells it: "CODE node=server 1: MESSAGE", or a note."""
    if status is None:
        return "the scheduler wrote no job status"
    f = status.get("failure") or {}
    if status.get("phase") != "JOB_FAILED":
        return f"job phase {status.get('phase')}"
    node = ""
    if f.get("node_id", -1) != -1:
        node = f" node={f.get('role', '').removeprefix('ROLE_').lower()} {f.get('rank')}"
    return f"{f.get('code')}{node}: {f.get('message')}"


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

    procs, _, _, status, summary = run(a, 2, 1)
    if any(p.p.returncode != 0 for p in procs):
        sys.exit(f"soak: calibration job failed ({failure(status)}):\n" + "\n".join(
            f"[{p.name}] {l}" for p in procs for l in p.lines[-5:]))
    if summary is None:
        sys.exit("soak: worker 0 wrote no summary in the calibration job")
    per_epoch = summary["seconds"] / 2
    epochs = max(1, math.ceil(a.minutes * 60 / per_epoch))
    print(f"calibration: {per_epoch:.1f} s per epoch -> {epochs} epochs for ~{a.minutes:g} min",
          flush=True)

    procs, samples, wall, status, _ = run(a, epochs, a.sample_s)
    phase = status.get("phase") if status else None
    ok = phase == "JOB_FINISHED"
    if not ok:
        print(f"soak: the job did not finish ({failure(status)})")
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
                   "phase": phase, "processes": rows, "pass": ok}, f, indent=1)
    print(f"\n{'PASS' if ok else 'FAIL'}: the job finished, every process exited 0, logged no "
          f"error and kept a flat RSS (growth <= {a.tolerance_mb} MB)" if ok else "\nFAIL")
    print("json:", out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
