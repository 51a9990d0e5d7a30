"""PythonUserScript: a user's own script (tests/python/user_script/mlp.py: a 784-128-10 MLP,
torch's SGD with momentum wrapped by sieve.torch.DistributedOptimizer, torch's StepLR), written
from docs/worker-api.md only, launched by `sieve launch --worker_cmd` with no model flags on the
servers, 2 servers and 2 workers, 1 epoch of Fashion-MNIST:
  - the job finishes (exit 0) and the launcher's result line says test_acc >= 0.80;
  - the initial weights are rank 0's torch init: each rank seeds torch differently, and rank 1's
    weights right after wrapping equal rank 0's own init (bitwise), not rank 1's;
  - the replicas equal the servers' weights bitwise (--dump_weights routed to the workers,
    --dump_shard to the servers), and the servers trained away from the init.

usage: user_script_test.py BUILD_DIR
"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402

D = cluster.USER_SCRIPT_D  # 101770


class PythonUserScript(unittest.TestCase):
    def test_user_script_trains_from_rank0_init_with_equal_replicas(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-userscript-")
        code, out = cluster.launch(
            BUILD, f"{sys.executable} {cluster.user_script()}",
            cluster.dump_flags(out_dir),
            env={"MLP_DUMP_DIR": out_dir})
        cluster.check_finished(self, code, out, cluster.USER_SCRIPT_ROUNDS, min_test_acc=0.80)
        self.assertIn("starts from worker 0's initial weights", out)  # no --model on servers

        # The job's initial weights are rank 0's torch init.
        init = [torch.load(f"{out_dir}/init-{r}.pt") for r in (0, 1)]
        wrapped = [torch.load(f"{out_dir}/wrapped-{r}.pt") for r in (0, 1)]
        self.assertEqual(init[0].numel(), D)
        self.assertFalse(torch.equal(init[0], init[1]), "the ranks' own inits should differ")
        for r in (0, 1):
            self.assertTrue(torch.equal(wrapped[r], init[0]),
                            f"rank {r}'s weights after wrapping are not rank 0's init")
        self.assertFalse(torch.equal(wrapped[1], init[1]))

        # The replicas are the servers' weights, bitwise; training moved them.
        server = cluster.check_replicas(self, out_dir, 2, 2, D)
        self.assertGreater(np.abs(server - init[0].numpy()).max(), 0.01)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
