"""PythonCnnStepLR: examples/torch/cnn_steplr.py (a CNN of the user's own, torch's SGD with
momentum wrapped, StepLR stepped per epoch) under `sieve launch`, 2 servers and 2 workers,
1 epoch of Fashion-MNIST at batch 64, as its docstring runs it (with the interpreter running
this test: /usr/bin/python3 on Debian):
  - the job finishes (exit 0) after 468 rounds with test_acc >= 0.80 in the result line;
  - rank 0 printed its test accuracy (the same as the result line's) with StepLR's learning rate
    after the epoch, 0.05 * 0.5.

usage: cnn_example_test.py BUILD_DIR
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)


class PythonCnnStepLR(unittest.TestCase):
    def test_cnn_example_trains(self):
        script = os.path.join(cluster.source_dir(), "examples", "torch", "cnn_steplr.py")
        code, out = cluster.launch(BUILD, f"{sys.executable} {script} --epochs=1")
        result = cluster.check_finished(self, code, out, 60000 // 2 // 64, min_test_acc=0.80)
        m = re.search(r"\[worker 0\] epoch 1: lr (\S+) test accuracy (\S+)", out)
        self.assertIsNotNone(m, out[-4000:])
        self.assertEqual(float(m.group(1)), 0.025)
        self.assertEqual(m.group(2), result["test_acc"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
