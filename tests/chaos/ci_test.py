#!/usr/bin/python3
"""ChaosCI: the seeded chaos runs CI makes on every build (bench/chaos/run.py; docs/reliability.md).

Each run is a real `sieve launch` job on loopback (2 servers, 3 workers, synthetic D = 20000) under
the fault schedule its seed draws, and must hold every invariant (run.py exits 0):
  bsp-replicated  server kills (one killed again while it is rebuilt), pauses under the heartbeat
                  timeout, the checkpoint directory unwritable: final weights bitwise the clean run's
  asp             server kills, pauses, checkpoint directory: Σ pushed = Σ applied, exactly
  bsp-checkpoint  worker kills and rejoins, long pauses (declared dead), a checkpoint restore:
                  finished, replicas equal, recovered after every fault
  scheduler       faults, then SIGTERM to the scheduler: JOB_FAILED, every process gone in bound
A failure prints the run's table and its replay command (the schedule is kept under the printed
directory). Argument: the build directory.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "..", "..", "bench", "chaos", "run.py")

RUNS = [
    ["--mode=bsp-replicated", "--seed=101", "--duration=35",
     "--kinds=kill_server,double_kill_server,pause_short,ckpt_unwritable"],
    ["--mode=asp", "--seed=102", "--duration=25"],
    ["--mode=bsp-checkpoint", "--seed=103", "--duration=20", "--no_clean",
     "--kinds=kill_worker,pause_long,kill_server,pause_short"],
    ["--mode=scheduler", "--seed=104", "--duration=12", "--no_clean", "--terminal=term_scheduler"],
]


def main():
    build = os.path.abspath(sys.argv[1])
    root = tempfile.mkdtemp(prefix="sieve-chaos-ci-")
    failed = []
    for i, args in enumerate(RUNS):
        out = os.path.join(root, f"run{i}")
        cmd = [sys.executable, RUN, f"--build={build}", f"--out={out}", *args]
        print("$", " ".join(cmd), flush=True)
        code = subprocess.call(cmd)
        if code != 0:
            failed.append((args, out))
    for args, out in failed:
        print(f"FAILED: {' '.join(args)}; files and schedule kept in {out}")
    if not failed:
        subprocess.call(["rm", "-rf", root])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
