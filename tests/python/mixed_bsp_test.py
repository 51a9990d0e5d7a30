"""PythonMixedBsp: one sieve-worker (rank 0) and one Python worker (rank 1,
examples/torch/fashion_mnist.py) train FNN-3 in one BSP job on 2 servers. Both finish the same
rounds, and at the end the servers' weights (--dump_shard, concatenated) and each worker's
replica (--dump_weights) are bitwise equal.

usage: mixed_bsp_test.py BUILD_DIR
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)
JOB = ["--model=fnn3", "--epochs=1", "--max_rounds=400", "--compressor=gaussiank",
       "--density=0.004", "--lr=0.1"]


class PythonMixedBsp(unittest.TestCase):
    def test_mixed_job_ends_with_equal_replicas(self):
        import numpy as np
        c = cluster.Cluster(BUILD, num_servers=2, num_workers=2, server_flags=[
            "--model=fnn3", "--consistency=bsp", "--dump_shard=shard-{rank}.bin"])
        try:
            c.start_worker(0, [os.path.join(BUILD, "worker", "sieve-worker"), *JOB,
                               "--dump_weights=replica-{rank}.bin"])
            script = os.path.join(cluster.source_dir(), "examples", "torch", "fashion_mnist.py")
            c.start_worker(1, [sys.executable, script, *JOB, "--dump_weights=replica-{rank}.bin"])
            codes = c.wait()
        finally:
            c.kill()
        self.assertEqual(set(codes.values()), {0}, f"{codes}\n{c.logs()}")
        for r in (0, 1):
            s = c.summary(f"worker-{r}")
            self.assertIsNotNone(s, c.logs())
            self.assertEqual(s["rounds"], 400)
        server = cluster.check_replicas(self, c.dir, 2, 2, 199210)
        init = __import__("sieve").init_params("fnn3", 1)
        self.assertGreater(np.abs(server - init).max(), 0.01)  # it trained


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
