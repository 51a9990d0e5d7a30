"""PythonBadInput: bad input gets a clear Python exception and sends nothing.

Without a job: ErrorFeedback refuses float64, non-contiguous, wrongly sized arrays and tensors on
an unsupported device. In a job (1 server; this process is its only worker): DistributedOptimizer
refuses a float64 model, a non-contiguous parameter, a model whose size is not the job's D and a
model on an unsupported device, and Client.push_pull refuses bad replicas and a selection of
another size, each with a ValueError naming the problem. Afterwards the servers' weights are still
their initial values (pulled, and the server's --dump_shard), and the server applied no push.

usage: bad_input_test.py BUILD_DIR
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import sieve  # noqa: E402
import sieve.torch  # noqa: E402

D = 199210  # FNN-3


def fnn3(dtype=torch.float32, device="cpu"):
    return torch.nn.Sequential(
        torch.nn.Linear(784, 200), torch.nn.ReLU(), torch.nn.Linear(200, 200), torch.nn.ReLU(),
        torch.nn.Linear(200, 10)).to(dtype=dtype, device=device)


class PythonBadInput(unittest.TestCase):
    def test_error_feedback_refuses_bad_arrays(self):
        ef = sieve.ErrorFeedback(16)
        cases = [
            (np.zeros(16), "float32"),
            (torch.zeros(16, dtype=torch.float64), "torch.float64"),
            (torch.zeros(32)[::2], "contiguous"),
            (np.zeros(32, dtype=np.float32)[::2], "C-contiguous"),
            (torch.zeros(15), "15 elements, expected 16"),
            (torch.zeros(16, device="meta"), "device 'meta'"),
            ("not an array", "NumPy array"),
        ]
        for bad, words in cases:
            with self.assertRaises((ValueError, TypeError)) as e:
                ef.accumulate(bad, 0.9, 0.1)
            self.assertIn(words, str(e.exception))
        m, r = ef.read_state()
        self.assertFalse(m.any() or r.any())  # nothing was accumulated
        with self.assertRaisesRegex(ValueError, "unknown compressor 'top-k'"):
            ef.select("top-k", 1)
        with self.assertRaisesRegex(ValueError, "k = 17 exceeds d = 16"):
            ef.select("topk", 17)

    def test_job_refuses_bad_models_and_arrays_and_sends_nothing(self):
        c = cluster.Cluster(BUILD, num_servers=1, num_workers=1, server_flags=[
            "--model=fnn3", "--dump_shard=shard.bin"])
        try:
            client = sieve.Client.connect(c.address, D, rank=0)
            self.assertEqual((client.rank, client.num_workers, client.num_servers,
                              client.num_params), (0, 1, 1, D))

            transposed = fnn3()
            transposed[2].weight = torch.nn.Parameter(torch.zeros(200, 200).t())
            bad_models = [
                (fnn3(torch.float64), "parameter 0.weight is torch.float64"),
                (transposed, "parameter 2.weight is not contiguous"),
                (torch.nn.Linear(784, 10), "the job has D = 199210 parameters but the model has "
                                           "7850"),
                (fnn3(device="meta"), "device 'meta'"),
            ]
            for model, words in bad_models:
                before = [p.data_ptr() for p in model.parameters()]
                with self.assertRaises(ValueError) as e:
                    sieve.torch.DistributedOptimizer(model, client=client)
                self.assertIn(words, str(e.exception))
                self.assertEqual(before, [p.data_ptr() for p in model.parameters()])

            sel = sieve.ErrorFeedback(D).select("topk", 10)
            bad_replicas = [
                (np.zeros(D), "weights must be float32"),
                (torch.zeros(D + 1), "weights has 199211 elements, expected 199210"),
                (torch.zeros(2 * D)[::2], "weights must be contiguous"),
                (torch.zeros(D, device="meta"), "device 'meta'"),
            ]
            for bad, words in bad_replicas:
                with self.assertRaises(ValueError) as e:
                    client.push_pull(0, sel, bad)
                self.assertIn(words, str(e.exception))
                with self.assertRaises(ValueError):
                    client.pull_dense(bad)
            small = sieve.ErrorFeedback(16).select("topk", 2)
            with self.assertRaisesRegex(ValueError, "selection was made from a vector of 16"):
                client.push_pull(0, small, np.zeros(D, dtype=np.float32))

            # Nothing reached the server: its weights are still the initial ones.
            init = sieve.init_params("fnn3", 1)
            w = np.zeros(D, dtype=np.float32)
            client.pull_dense(w)
            self.assertTrue(np.array_equal(w, init))
            model = fnn3()
            opt = sieve.torch.DistributedOptimizer(model, client=client)
            self.assertTrue(np.array_equal(model[0].weight.detach().numpy().reshape(-1),
                                           init[:784 * 200]))
            self.assertEqual(model[0].weight.data_ptr(), opt.flat.data_ptr())  # a view
            opt.finish(print_summary=False)
            client.close()
            codes = c.wait()
        finally:
            c.kill()
        self.assertEqual(set(codes.values()), {0}, c.logs())
        self.assertTrue(np.array_equal(np.fromfile(c.path("shard.bin"), dtype=np.float32), init))
        server_summary = [l for l in c.log("server-0").splitlines() if "summary:" in l][-1]
        self.assertIn(" rounds=0 applied=0 ", server_summary)
        self.assertIn(" rejected=0 ", server_summary)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
