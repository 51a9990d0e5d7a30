#!/usr/bin/python3
"""Chaos run: a `sieve launch` job on loopback (synthetic model) under a random fault schedule drawn
from --seed, then the invariants of bench/chaos/chaos.py checked at its end. --mode=netns runs the
job with deploy/local/netns/run instead, every node in its own network namespace, so that links can
be cut (partition) and slowed (slow_link) for real; it needs root and iproute2 (exit 2 otherwise).

Steps: the schedule (with the job's config) is written to OUT/schedule.json before anything runs;
for a BSP mode a clean run of the same job (same seed, no faults, no emulated compute time) goes to
OUT/clean/; the chaos run goes to OUT/run/ with its faults injected by the schedule; then the
invariants, per-fault costs and OUT/result.json (seed, schedule, what each event did, the
invariants, pass). A run is replayed with --replay=OUT/schedule.json (same job, same events).

Invariants (each PASS, FAIL or n/a with the reason): no_hang (the launcher exits by the deadline
and every daemon within 10 s of it), outcome (JOB_FINISHED and exit 0; after a scheduler fault:
a non-zero exit within --exit_bound_s and no JOB_FINISHED, JOB_FAILED after SIGTERM), recovered
(after every fault the job status shows every node healthy again and the round advancing, within
--gate_s), conservation (Σ workers' pushed_sum − returned_sum = Σ over shards of the pushed_sum of
the shard's final holder, relative 1e-9; n/a when a worker process was killed, its pushes being in
no summary, or when a checkpoint restore lost rounds by design), replicas (every server's copies
equal their shard's final checksum; BSP: every worker's final replica equal, and each shard's
slice of it has that shard's CRC-32), bitwise (BSP: every worker's final weights bitwise those of
the clean run when every fault was one sieve absorbs), rss (per daemon process after a warm-up:
growth <= max(10 %, 8 MB)), log_rate (no process prints more than --lines_per_s lines in any
second of its output).

Harness self-tests: --tamper=weights|pushed_sum|copies|log_lines alters the run's files after the job and
before the checks (the matching invariant must fail); --claim_absorbed treats every fault as one
sieve absorbs (a checkpoint restore, which loses rounds, must then fail bitwise / conservation);
--recheck=OUT checks a finished run's files again (with --tamper) without running a job.

usage: run.py [--build=build] [--seed=1] [--duration=60] [--mode=bsp-replicated|asp|
              bsp-checkpoint|scheduler|netns] [--out=DIR] [--replay=schedule.json] [--servers=2]
              [--workers=3] [--model=synthetic|fnn3] [--num_params=20000] [--heartbeat_timeout_ms=1000 (netns: 2000)]
              [--compute=10ms]
              [--kinds=kill_server,pause_short,...] [--no_clean] [--tamper=...]
              [--claim_absorbed] [--recheck=OUT]
Exit status: 0 every invariant held, 1 a violation (named on stdout and in result.json), 2 usage.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402


def parse_ms(text):
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    if text.endswith("us"):
        return float(text[:-2]) / 1e6
    if text.endswith("s"):
        return float(text[:-1])
    raise ValueError(text)


def make_config(a):
    mode = chaos.MODES[a.mode]
    compute_s = parse_ms(a.compute) if a.compute not in ("", "0") else 0.0
    # ~2 ms of push/pull per round on a loaded 2-core machine beside the emulated compute.
    rounds = max(200, int(a.duration / (compute_s + 0.002)))
    # A real model's epoch is the workers' part of the data (sieve-worker --model=fnn3).
    rpe = 100 if a.model == "synthetic" else chaos.FNN3_TRAIN // a.workers // chaos.FNN3_BATCH
    kinds = None
    if a.kinds:
        kinds = {}
        for k in a.kinds.split(","):
            if k not in chaos.KINDS and k not in chaos.SKIPPED_KINDS:
                raise SystemExit(f"run.py: unknown fault kind {k!r} (known: {chaos.KINDS})")
            kinds[k] = 1
    timeout_ms = a.heartbeat_timeout_ms or mode.get("heartbeat_timeout_ms", 1000)
    replicated = any(f.startswith("--replication=") for f in mode["flags"])
    checkpoints = any(f.startswith("--checkpoint_every") for f in mode["flags"])
    config = {
        "seed": a.seed, "mode": a.mode, "duration": a.duration, "servers": a.servers,
        "workers": a.workers, "model": a.model, "num_params": a.num_params,
        "density": a.density,
        "heartbeat_interval_ms": max(50, timeout_ms // 10),
        "heartbeat_timeout_ms": timeout_ms, "compute": a.compute,
        "epochs": math.ceil(rounds / rpe), "rounds_per_epoch": rpe,
        "replication": 1 if replicated else 0, "checkpoints": checkpoints, "kinds": kinds,
        "worker_kill_absorbed": a.worker_kill_absorbed, "claim_absorbed": a.claim_absorbed,
    }
    if a.terminal:
        config["terminal"] = a.terminal
    schedule = chaos.make_schedule(config)
    kills = sum(2 if e["kind"] == "double_kill_server" else 1 for e in schedule["events"])
    config["max_restarts"] = 2 * kills + 4  # a long pause may end its process too
    return schedule


def print_result(result):
    print(f"\nchaos: seed {result['seed']} mode {result['mode']}: "
          f"{sum(1 for r in result['events'] if r.get('injected'))} of "
          f"{len(result['events'])} faults injected, run {result.get('run_s', 0):.1f} s")
    print(f"{'#':>3} {'kind':<19} {'target':<9} {'t_s':>6} {'hold_s':>6} {'round':>6} "
          f"{'recovery_s':>10} {'stall_s':>8}")
    for r in result["events"]:
        target = f"{r.get('role', '')} {r.get('rank', '')}"
        if not r.get("injected"):
            print(f"{r['i']:>3} {r['kind']:<19} {target:<9} not injected: "
                  f"{r.get('not_injected') or r.get('error')}")
            continue
        hold = r.get("held_s", r["hold"])  # a link fault's measured length
        print(f"{r['i']:>3} {r['kind']:<19} {target:<9} {r['t']:>6.1f} {hold:>6.2f} "
              f"{str(r.get('round_at')):>6} {str(r.get('recovery_s', '-')):>10} "
              f"{str(r.get('stall_s', '-')):>8}")
    print(f"median push/pull of the run: {result.get('median_comm_s')}")
    for inv in result["invariants"]:
        tag = {True: "PASS", False: "FAIL", None: "n/a "}[inv["ok"]]
        print(f"{tag} {inv['name']:<13} {inv['detail']}")
    print("PASS" if result["pass"] else
          "FAIL: " + ", ".join(i["name"] for i in result["invariants"] if i["ok"] is False))


def tamper(run_dir, what):
    """Alters one of the run's files the way a bug would (harness self-test)."""
    if what == "weights":
        path = os.path.join(run_dir, "weights-0.bin")
        with open(path, "r+b") as f:
            b = bytearray(f.read(4))
            b[0] ^= 1  # the last bit of the first weight's significand
            f.seek(0)
            f.write(b)
    elif what == "pushed_sum":
        path = os.path.join(run_dir, "server-0.json")
        s = chaos.read_json(path)
        s["pushed_sum"] = s["pushed_sum"] * (1 + 1e-7) + 1e-7
        with open(path, "w") as f:
            json.dump(s, f)
    elif what == "copies":
        for path in sorted(os.listdir(run_dir)):
            if path.startswith("server-") and path.endswith(".json"):
                s = chaos.read_json(os.path.join(run_dir, path))
                if s.get("copies"):
                    shard, crc = s["copies"].split(",")[0].split(":")
                    s["copies"] = f"{shard}:{int(crc, 16) ^ 1:08x}"
                    with open(os.path.join(run_dir, path), "w") as f:
                        json.dump(s, f)
                    return
        raise SystemExit("run.py: --tamper=copies: no server holds a copy")
    elif what == "log_lines":
        path = os.path.join(run_dir, "samples.json")
        s = chaos.read_json(path)
        s["lines_per_s"].setdefault("server 0", {})["1"] = 1000
        with open(path, "w") as f:
            json.dump(s, f)
    else:
        raise SystemExit(f"run.py: unknown --tamper {what!r} (weights, pushed_sum, copies, "
                         "log_lines)")


def finish(out, schedule, record, run_s, tamper_what, bounds):
    run_dir = os.path.join(out, "run")
    clean_dir = os.path.join(out, "clean")
    if tamper_what:
        tamper(run_dir, tamper_what)
    median = chaos.fault_costs(run_dir, record)
    invariants = chaos.check(run_dir, schedule, record,
                             clean_dir if os.path.isdir(clean_dir) else None, bounds)
    config = schedule["config"]
    total = config["epochs"] * config["rounds_per_epoch"]
    restores, rejoins = [], []
    for rank, srv in sorted(chaos.summaries(run_dir, "server").items()):
        if srv.get("restored_round", -1) >= 0 and not config["replication"]:
            resumed = total - srv["rounds"]
            restores.append({"rank": rank, "restored_round": srv["restored_round"],
                             "resumed_at": resumed,
                             "rounds_lost": resumed - srv["restored_round"]})
    for rank, w in sorted(chaos.summaries(run_dir, "worker").items()):
        if w.get("first_round"):
            rejoins.append({"rank": rank, "first_round": w["first_round"]})
    result = {"seed": config["seed"], "mode": config["mode"], "schedule": schedule,
              "events": record, "run_s": run_s, "median_comm_s": median,
              "costs": chaos.summarize_costs(record), "invariants": invariants,
              "checkpoint_restores": restores, "worker_rejoins": rejoins,
              "tampered": tamper_what or None,
              "pass": all(i["ok"] is not False for i in invariants),
              "replay": f"bench/chaos/run.py --replay={os.path.join(out, 'schedule.json')}"}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print_result(result)
    for r in restores:
        print(f"server {r['rank']} restored its checkpoint of round {r['restored_round']} and "
              f"resumed at round {r['resumed_at']}: {r['rounds_lost']} rounds lost")
    print(f"result: {os.path.join(out, 'result.json')}; replay: {result['replay']}")
    return 0 if result["pass"] else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60.0,
                    help="seconds of training the job is sized for (faults add their stalls)")
    ap.add_argument("--mode", default="bsp-replicated", choices=sorted(chaos.MODES))
    ap.add_argument("--out")
    ap.add_argument("--replay")
    ap.add_argument("--recheck")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--model", default="synthetic", choices=("synthetic", "fnn3"),
                    help="synthetic (D = --num_params) or FNN-3 on Fashion-MNIST (D = 199210)")
    ap.add_argument("--num_params", type=int, default=20000)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--heartbeat_timeout_ms", type=int,
                    help="default 1000; 2000 in the netns mode (see chaos.MODES)")
    ap.add_argument("--compute", default="10ms", help="emulated compute per round (--straggler)")
    ap.add_argument("--kinds", help="comma-separated fault kinds (default: the mode's)")
    ap.add_argument("--terminal", choices=sorted(chaos.TERMINAL),
                    help="end the schedule with this scheduler fault")
    ap.add_argument("--no_clean", action="store_true", help="no clean run (no bitwise check)")
    ap.add_argument("--worker_kill_absorbed", action="store_true",
                    help="count a worker kill as absorbed in the bitwise check")
    ap.add_argument("--claim_absorbed", action="store_true",
                    help="self-test: treat every fault as absorbed by sieve")
    ap.add_argument("--tamper", help="self-test: weights, pushed_sum, copies or log_lines")
    ap.add_argument("--bin_dir", help="the daemons to run (sieve launch --bin_dir; loopback "
                                      "modes only; default: the build's)")
    ap.add_argument("--gate_s", type=float, default=45.0)
    ap.add_argument("--exit_bound_s", type=float, default=15.0)
    ap.add_argument("--lines_per_s", type=int, default=50)
    a = ap.parse_args()
    bounds = {"exit_bound_s": a.exit_bound_s, "lines_per_s": a.lines_per_s}

    if a.recheck:
        out = a.out or a.recheck
        if out != a.recheck:
            shutil.copytree(a.recheck, out, dirs_exist_ok=True)
        schedule = chaos.read_json(os.path.join(out, "schedule.json"))
        record = chaos.read_json(os.path.join(out, "events.json"))
        if schedule is None or record is None:
            print(f"run.py: {out} holds no schedule.json/events.json", file=sys.stderr)
            return 2
        samples = chaos.read_json(os.path.join(out, "run", "samples.json")) or {}
        return finish(out, schedule, record, samples.get("end_s", 0.0), a.tamper, bounds)

    if a.replay:
        schedule = chaos.read_json(a.replay)
        if schedule is None:
            print(f"run.py: cannot read {a.replay}", file=sys.stderr)
            return 2
    else:
        schedule = make_config(a)
    config = schedule["config"]
    if chaos.MODES[config["mode"]].get("launcher") == "netns":
        why = chaos.netns_unusable()
        if why:
            print(f"run.py: --mode={config['mode']}: {why}", file=sys.stderr)
            return 2
    out = a.out or time.strftime(f"results/bench/chaos-{config['mode']}-s{config['seed']}-"
                                 "%Y%m%d-%H%M%S")
    build = os.path.abspath(a.build)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with open(os.path.join(out, "schedule.json"), "w") as f:
        json.dump(schedule, f, indent=1)
    print(f"chaos: seed {config['seed']} mode {config['mode']}, "
          f"{config['epochs'] * config['rounds_per_epoch']} rounds, {len(schedule['events'])} "
          f"faults scheduled; schedule: {os.path.join(out, 'schedule.json')}", flush=True)

    deadline = config["duration"] * 4 + 120
    if config["mode"] != "asp" and not a.no_clean:
        clean = chaos.Job(config, os.path.join(out, "clean"), build, faults=False,
                          deadline_s=deadline)
        clean.start()
        if not clean.wait(deadline) or clean.code != 0:
            print(f"chaos: the clean run failed (exit {clean.code}):\n" + "".join(clean.tail[-30:]))
            return 1
        print(f"chaos: clean run {clean.end_s:.1f} s", flush=True)

    job = chaos.Job(config, os.path.join(out, "run"), build, deadline_s=deadline,
                    bin_dir=a.bin_dir)
    job.start()
    inj = chaos.Injector(job, schedule, gate_s=a.gate_s)
    inj.start()
    job.wait(deadline)
    inj.thread.join(timeout=a.gate_s + 10)
    job.save()
    with open(os.path.join(out, "events.json"), "w") as f:
        json.dump(inj.record, f, indent=1)
    code = finish(out, schedule, inj.record, job.end_s, a.tamper, bounds)
    if code:
        if job.severe:
            print("first error lines of the chaos run:\n" + "".join(job.severe[:20]))
        print("last output lines of the chaos run:\n" + "".join(job.tail[-20:]))
    return code


if __name__ == "__main__":
    sys.exit(main())
