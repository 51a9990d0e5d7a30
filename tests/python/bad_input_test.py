"""PythonBadInput: bad input gets a clear Python exception and sends nothing.

Without a job: ErrorFeedback refuses float64, non-contiguous, wrongly sized arrays and tensors on
an unsupported device; sieve.torch.init() without SIEVE_SCHEDULER names the variable, a bad
SIEVE_RANK or an unknown routed flag is named. In a job (1 server; this process is its only
worker): DistributedOptimizer refuses a float64 model, a non-contiguous parameter, a model whose
size is not the job's D, a model on an unsupported device, something not an optimizer, an
optimizer an lr scheduler already wraps (and, once wrapped, add_param_group), and
Client.push_pull refuses bad replicas and a selection of another size, each with an error
naming the problem and the model untouched.
Afterwards the servers' weights are still their initial values (pulled, and the server's
--dump_shard), and the server applied no push. Two workers declaring different D: the second
gets sieve.Error (code INVALID_ARGUMENT, wire_code ERROR_BAD_REGISTRATION) naming both values.

usage: bad_input_test.py BUILD_DIR
"""

import os
import sys
import threading
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

    def test_init_without_a_scheduler_names_the_variable(self):
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("SIEVE_")}
        try:
            with self.assertRaisesRegex(ValueError, "SIEVE_SCHEDULER is not set"):
                sieve.torch.init()
            os.environ["SIEVE_SCHEDULER"] = "127.0.0.1:1"
            os.environ["SIEVE_RANK"] = "two"
            with self.assertRaisesRegex(ValueError, "--rank \\(from SIEVE_RANK\\)"):
                sieve.torch.init()
            del os.environ["SIEVE_RANK"]
            os.environ["SIEVE_WORKER_FLAGS"] = "--compressor=gaussiank --no_such_flag=1"
            with self.assertRaisesRegex(ValueError, "unknown flag --no_such_flag"):
                sieve.torch.init()
            os.environ["SIEVE_WORKER_FLAGS"] = "--compressor=gaussiank --density=0.01"
            job = sieve.torch.init(rank=3)
            self.assertEqual((job.scheduler, job.rank), ("127.0.0.1:1", 3))
            self.assertEqual((job.flags.compressor, job.flags.density), ("gaussiank", 0.01))
        finally:
            for k in list(os.environ):
                if k.startswith("SIEVE_"):
                    del os.environ[k]
            os.environ.update(saved)

    def test_workers_declaring_different_d_get_an_error_naming_both(self):
        c = cluster.Cluster(BUILD, num_servers=1, num_workers=2)
        try:
            first = sieve.torch.init(scheduler=c.address, rank=0, bind="127.0.0.1",
                                     host="127.0.0.1")
            # Registers first (the job's D is FNN-3's); connect() returns with the node table,
            # which waits for the second worker: in a thread.
            errors = []
            waiter = threading.Thread(target=lambda: cluster.capture(errors, first.connect, D))
            waiter.start()
            c.wait_for_log("scheduler", "worker registered")
            second = sieve.torch.init(scheduler=c.address, rank=1, bind="127.0.0.1",
                                      host="127.0.0.1")
            small = torch.nn.Linear(784, 10)
            before = [p.detach().clone() for p in small.parameters()]
            with self.assertRaises(sieve.Error) as e:
                sieve.torch.DistributedOptimizer(torch.optim.SGD(small.parameters(), lr=0.1),
                                                 small, job=second)
            self.assertIn("7850", str(e.exception))
            self.assertIn(str(D), str(e.exception))
            # The scheduler's refusal, by its codes (docs/protocol.md, "Errors").
            self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
            self.assertEqual(e.exception.wire_code, "ERROR_BAD_REGISTRATION")
            for p, b in zip(small.parameters(), before):
                self.assertTrue(torch.equal(p, b))
        finally:
            c.kill()
        waiter.join(60)  # the first worker's connect fails once the scheduler is gone
        self.assertFalse(waiter.is_alive())

    def test_job_refuses_bad_models_and_arrays_and_sends_nothing(self):
        c = cluster.Cluster(BUILD, num_servers=1, num_workers=1, server_flags=[
            "--model=fnn3", "--dump_shard=shard.bin"])
        try:
            job = sieve.torch.init(scheduler=c.address, rank=0, bind="127.0.0.1",
                                   host="127.0.0.1")
            client = job.connect(D)
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
                    sieve.torch.DistributedOptimizer(
                        torch.optim.SGD(model.parameters(), lr=0.1), model, job=job)
                self.assertIn(words, str(e.exception))
                self.assertEqual(before, [p.data_ptr() for p in model.parameters()])
            model = fnn3()
            with self.assertRaisesRegex(TypeError, "wraps a torch.optim.Optimizer"):
                sieve.torch.DistributedOptimizer(model, job=job)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.optim.lr_scheduler.StepLR(opt, 1)
            with self.assertRaisesRegex(ValueError, "create the torch.optim.lr_scheduler after"):
                sieve.torch.DistributedOptimizer(opt, model, job=job)
            with self.assertRaisesRegex(ValueError, "density must be in"):
                sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                 model, density=2.0, job=job)

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

            # Nothing reached the server; a server with --model keeps its own initial weights
            # (worker 0's offer is acknowledged and ignored).
            init = sieve.init_params("fnn3", 1)
            model = fnn3()
            opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                   model, job=job)
            self.assertIsInstance(opt, torch.optim.SGD)
            self.assertTrue(np.array_equal(model[0].weight.detach().numpy().reshape(-1),
                                           init[:784 * 200]))
            self.assertEqual(model[0].weight.data_ptr(), opt._sieve.flat.data_ptr())  # a view
            with self.assertRaisesRegex(ValueError, "add_param_group after DistributedOptimizer"):
                opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))]})
            self.assertEqual(len(opt.param_groups), 1)
            opt.finish(print_summary=False)
            codes = c.wait()
        finally:
            c.kill()
        self.assertEqual(set(codes.values()), {0}, c.logs())
        self.assertTrue(np.array_equal(np.fromfile(c.path("shard.bin"), dtype=np.float32), init))
        server = c.summary("server-0")
        self.assertIsNotNone(server, c.logs())
        self.assertEqual((server["rounds"], server["applied"], server["rejected"]), (0, 0, 0))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
