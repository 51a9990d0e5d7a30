#!/usr/bin/python3
"""The stall of a server failover: kill -9 of a server to the first completed round after it.

Runs `sieve launch` jobs of --model=synthetic (2 servers, 4 workers, BSP, the scheduler's
--replication=1, no restarts, no checkpoint directory) and kills server 0 with SIGKILL once the
job status (the scheduler's --status_file) shows the middle round. The stall is the longest
push/pull of the job (every worker's summary `max_pushpull_s`, from the summary files --summary_out writes: the round
in flight at the kill waits for the failover); it is printed beside the scheduler's
--heartbeat_timeout_ms (the target: stall <= 2 x the heartbeat timeout), with the rounds the
failed-over shard completed (the shard in the `shards` of the server that took it over: it must
complete every round, 0 lost) and an undisturbed run's longest push/pull, measured in the same
run.

Usage: /usr/bin/python3 bench/failover/stall.py [--build build] [--timeouts 1000,2000]
           [--repeats 2] [--json PATH]
Exit status: 0 when every job ended with exit 0 and lost no round, else 1.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

EPOCHS = 40
ROUNDS_PER_EPOCH = 100


def server_pid(launcher_pid, rank):
    """The launcher's child running sieve-server --rank=RANK, or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid != launcher_pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if args and args[0].endswith(b"sieve-server") and f"--rank={rank}".encode() in args:
            return int(entry)
    return None


def read_summaries(directory, role):
    """The summaries (dicts) the servers or workers (`role`) wrote to DIRECTORY/{role}-{rank}.json,
    in rank order; a killed process wrote none."""
    out = []
    for path in sorted(glob.glob(os.path.join(directory, f"{role}-*.json")),
                       key=lambda p: int(os.path.basename(p)[len(role) + 1:-len(".json")])):
        with open(path) as f:
            out.append(json.load(f))
    return out


def run(build, timeout_ms, kill):
    """One job; returns its worker summaries, the summary of the shard a server took over (its
    entry in that server's `shards`; {} when none did) and its exit code."""
    out_dir = tempfile.mkdtemp(prefix="sieve-stall-")
    args = [os.path.join(build, "deploy", "sieve"), "launch", "--num_servers=2", "--num_workers=4",
            "--progress=off", "--", "--replication=1", "--ordered_rounds", "--model=synthetic",
            "--num_params=20000", f"--epochs={EPOCHS}", f"--rounds_per_epoch={ROUNDS_PER_EPOCH}",
            "--compressor=topk", "--density=0.01", "--heartbeat_interval_ms=100",
            f"--heartbeat_timeout_ms={timeout_ms}", "--round_timeout_ms=60000",
            f"--summary_out={out_dir}/{{role}}-{{rank}}.json",
            f"--status_file={out_dir}/status.json", "--status_file_interval_ms=250"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    reader = threading.Thread(target=lambda: out.extend(p.stdout), daemon=True)
    reader.start()
    # The kill half-way through, by the job status (the slowest worker's round, rewritten every
    # 250 ms), never by a log line.
    half, killed_at = EPOCHS * ROUNDS_PER_EPOCH // 2, None
    while kill and killed_at is None and p.poll() is None:
        time.sleep(0.02)
        try:
            with open(os.path.join(out_dir, "status.json")) as f:
                status = json.load(f)
        except (OSError, ValueError):
            continue  # not written yet (or replaced just now)
        if int(status.get("progress", {}).get("round", 0)) >= half:
            pid = server_pid(p.pid, 0)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
    code = p.wait()
    reader.join()
    workers = read_summaries(out_dir, "worker")
    shards = [s for server in read_summaries(out_dir, "server") for s in server["shards"]]
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"code": code, "killed": killed_at is not None, "workers": workers,
            "shard": shards[0] if shards else {}, "log": "".join(out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--timeouts", default="1000,2000")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    ok, rows = True, []
    print(f"{'timeout_ms':>10} {'stall_s':>8} {'stall/timeout':>13} {'undisturbed_s':>13} "
          f"{'shard_rounds':>12} {'promoted_at':>11}")
    for timeout in [int(t) for t in a.timeouts.split(",")]:
        for _ in range(a.repeats):
            base = run(a.build, timeout, kill=False)
            r = run(a.build, timeout, kill=True)
            total = EPOCHS * ROUNDS_PER_EPOCH
            good = (base["code"] == 0 and r["code"] == 0 and r["killed"] and
                    len(r["workers"]) == 4 and r["shard"].get("rounds") == total)
            if not good:
                ok = False
                sys.stderr.write(r["log"][-4000:])
            stall = max(w["max_pushpull_s"] for w in r["workers"]) if r["workers"] else -1
            calm = max(w["max_pushpull_s"] for w in base["workers"]) if base["workers"] else -1
            row = {"heartbeat_timeout_ms": timeout, "stall_s": stall,
                   "stall_over_timeout": stall / (timeout / 1000.0), "undisturbed_s": calm,
                   "shard_rounds": r["shard"].get("rounds"),
                   "promoted_round": r["shard"].get("promoted_round"), "ok": good}
            rows.append(row)
            print(f"{timeout:>10} {stall:>8.3f} {row['stall_over_timeout']:>13.2f} {calm:>13.4f} "
                  f"{str(row['shard_rounds']):>12} {str(row['promoted_round']):>11}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
