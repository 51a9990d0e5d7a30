"""PythonBackupWorkers: BSP with one backup worker (sieve-server --backup_workers=1) and a slow
Python worker. Ranks 0 and 1 are sieve-workers, rank 2 runs examples/torch/fashion_mnist.py with
every optimizer step delayed by 50 ms, so the rounds close at the two fast pushes. Everyone ends
at the job's last round with exit 0; the Python worker skipped rounds; nothing pushed is lost or
doubled, with the servers applying its late pushes in later rounds (--late_pushes=apply: what the
workers pushed equals what the servers aggregated) or refusing them and the worker returning
them to its residual (return: pushed less returned equals aggregated); every replica equals the
servers' weights bitwise.

usage: backup_workers_test.py BUILD_DIR
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)
ROUNDS = 120
JOB = ["--model=fnn3", "--epochs=1", f"--max_rounds={ROUNDS}", "--compressor=gaussiank",
       "--density=0.004", "--lr=0.1", "--dump_weights=replica-{rank}.bin"]
# The example script, its optimizer's step slowed (an emulated straggler in the user's script).
SLOW_SCRIPT = """
import runpy, sys, time
import sieve.torch as st
script = sys.argv[1]
step = st._Sieve.step
def slow(self, closure=None):
    time.sleep(0.05)
    return step(self, closure)
st._Sieve.step = slow
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


class PythonBackupWorkers(unittest.TestCase):
    def test_slow_python_worker_skips_rounds_and_loses_nothing(self):
        for mode in ("apply", "return"):
            with self.subTest(late_pushes=mode):
                self.run_job(mode)

    def run_job(self, mode):
        c = cluster.Cluster(BUILD, num_servers=2, num_workers=3, server_flags=[
            "--model=fnn3", "--consistency=bsp", "--backup_workers=1",
            f"--late_pushes={mode}", "--dump_shard=shard-{rank}.bin"])
        try:
            for rank in (0, 1):
                c.start_worker(rank, [os.path.join(BUILD, "worker", "sieve-worker"), *JOB])
            script = os.path.join(cluster.source_dir(), "examples", "torch", "fashion_mnist.py")
            c.start_worker(2, [sys.executable, "-c", SLOW_SCRIPT, script, *JOB])
            codes = c.wait()
        finally:
            c.kill()
        self.assertEqual(set(codes.values()), {0}, f"{codes}\n{c.logs()}")
        workers = [c.summary(f"worker-{r}") for r in range(3)]
        for w in workers:
            self.assertIsNotNone(w, c.logs())
            self.assertEqual(w["rounds"], ROUNDS, c.logs())
        slow = workers[2]
        self.assertGreater(slow["skipped_rounds"], 0, c.logs())
        self.assertEqual(slow["missed_slices"] > 0, mode == "return", c.logs())
        servers = [c.summary(f"server-{r}") for r in range(2)]
        pushed = sum(w["pushed_sum"] - w["returned_sum"] for w in workers)
        applied = sum(s["pushed_sum"] for s in servers)
        self.assertAlmostEqual(pushed, applied, delta=1e-5 * (1 + abs(pushed)))
        for s in servers:
            self.assertIn("2:", s["late_workers"], c.logs())
            self.assertGreater(s["late_pushes"], 0, c.logs())
        cluster.check_replicas(self, c.dir, 2, 3, 199210)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
