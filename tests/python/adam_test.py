"""PythonAdam: examples/torch/adam_mlp.py (FNN-3, torch's Adam wrapped by
sieve.torch.DistributedOptimizer, top-k at density 0.01) under `sieve launch`, 1 server and
2 workers, 1 epoch of Fashion-MNIST, with --metrics_out routed to the workers:
  - the job finishes (exit 0) with test_acc >= 0.75 in the launcher's result line;
  - on each rank the loss falls: round 0's is ln 10 within 0.2 (an untrained net), the last
    100 rounds' mean is below half of it and below half the first 50 rounds' mean;
  - every round pushed k = round(0.01 * D) pairs.

usage: adam_test.py BUILD_DIR
"""

import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

D = 199210  # FNN-3
ROUNDS = 60000 // 2 // 32


class PythonAdam(unittest.TestCase):
    def test_adam_trains(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-adam-")
        script = os.path.join(cluster.source_dir(), "examples", "torch", "adam_mlp.py")
        code, out = cluster.launch(BUILD, f"{sys.executable} {script} --epochs=1",
                                   [f"--metrics_out={out_dir}/metrics-{{rank}}.jsonl"],
                                   num_servers=1)
        cluster.check_finished(self, code, out, ROUNDS, min_test_acc=0.75)
        for r in (0, 1):
            m = cluster.read_jsonl(f"{out_dir}/metrics-{r}.jsonl")
            self.assertEqual([x["round"] for x in m], list(range(ROUNDS)), f"rank {r}")
            self.assertEqual({x["k"] for x in m}, {round(0.01 * D)})
            self.assertEqual({x["selected"] for x in m}, {round(0.01 * D)})
            first = sum(x["loss"] for x in m[:50]) / 50
            last = sum(x["loss"] for x in m[-100:]) / 100
            print(f"rank {r}: loss of round 0 {m[0]['loss']:.4f}, mean of rounds 0-49 {first:.4f}, of the last 100 {last:.4f}")
            self.assertAlmostEqual(m[0]["loss"], math.log(10), delta=0.2)
            self.assertLess(last, 0.5 * math.log(10))
            self.assertLess(last, 0.5 * first)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
