"""PythonWorkload*: the workload scripts of examples/torch/ (resnet20.py, resnet18.py, lstm_lm.py,
char_transformer.py, sharing workload_common.py), tiny and short, on both backends:
  - under `sieve launch` (2 servers, 2 workers) each trains 20 steps and exits 0, and the
    launcher's `job finished:` line says 20 rounds, 2/2 workers and the script's metric
    (test_acc, perplexity and val_loss, val_loss); resnet20 also takes routed worker flags
    (`-- --compressor=gaussiank --density=0.01`, through the SIEVE_HELPXML probe);
  - as torch DDP ranks (`--backend=ddp --ddp_ranks=2`, gloo, started by the script itself) each
    trains 20 steps, exits 0 and prints `workload finished: backend=ddp workers=2 steps=20 ...`
    with the same metric;
  - resnet20 and lstm_lm with no communication (`--backend=none --ddp_ranks=2`, the compute-only
    bound): 20 steps, exit 0, a result JSON with backend none, 2 workers and the metric; rank
    0's metrics equal, to the last digit, those of rank 0 started alone (RANK=0 WORLD_SIZE=2,
    no other process): nothing from rank 1 reached it;
  - PythonWorkloadCorpus: the King James Bible's split by books is the documented one (the
    sha256 of each split's characters and word tokens, its verse count), and a missing corpus file
    or Fashion-MNIST directory ends the script with exit 1 and an error naming the Debian package.

usage: workloads_test.py BUILD_DIR [TEST_CLASS...]   (default: every class)
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)
EXAMPLES = os.path.join(cluster.source_dir(), "examples", "torch")
sys.path.insert(0, EXAMPLES)
import torch  # noqa: E402

import workload_common  # noqa: E402

STEPS = 20

# The pinned split (workload_common.kjv_split): verses, sha256 of chars(), sha256 of the words.
KJV_SPLIT = {
    "train": (24957, "768df64f6e42fab535d52efa4b0239129ba126458536f5ed91f8b39f35901e8e",
              "c3c426449d94364f66b3da1ee1a6a162de750630a79c31ece7ec8241c98c9619"),
    "valid": (3001, "77dbf0827b511a21e0a5d8ff7b65d60bf430592a52e6d18c2081da67238d7bfa",
              "7e997d6e7108987789dedac3846f19328603e9bb7bcbb7b1543120b496fc91e6"),
    "test": (3144, "be0e64b2548f13627aa41b4e25c5c0546921201b5f828d93ce7fc822a0efcc3b",
             "5f6d3d264f8112dd4a200fe5e203b688f66986eacef7157ac5bcd221ee66f589"),
}


def script(name):
    return os.path.join(EXAMPLES, name)


def run_ddp(name, args, timeout_s=120, backend="ddp", env_add=None):
    """Runs `SCRIPT --backend=BACKEND --ddp_ranks=2 ARGS` (BACKEND ddp or none) with `env_add`
    in its environment; returns (exit code, output)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(var, None)
    env.update(env_add or {})
    r = subprocess.run([sys.executable, script(name), f"--backend={backend}", "--ddp_ranks=2",
                        *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=timeout_s, cwd=cluster.source_dir())
    return r.returncode, r.stdout


def workload_result(out):
    """The fields of the last `workload finished:` line, as a dict of strings (or None)."""
    lines = [l for l in out.splitlines() if "workload finished:" in l]
    if not lines:
        return None
    return dict(f.split("=", 1) for f in lines[-1].split("workload finished:")[1].split()
                if "=" in f)


class WorkloadCase:
    """Mixed into a TestCase: SCRIPT with ARGS (tiny) on both backends; METRICS are checked."""

    SCRIPT = ""
    ARGS = ()
    ROUTED = ()  # worker flags given to sieve launch after `--`
    METRICS = ()
    COMPUTE_ONLY = False  # whether --backend=none is tested too

    def check_metrics(self, fields, out):
        for name in self.METRICS:
            self.assertIn(name, fields, out[-4000:])
            value = float(fields[name].rstrip("s"))
            self.assertTrue(math.isfinite(value), f"{name}={fields[name]}")
            if name == "test_acc":
                self.assertTrue(0.0 <= value <= 1.0, value)
            elif name == "perplexity":
                self.assertGreater(value, 1.0)
            else:
                self.assertGreater(value, 0.0)

    def test_sieve_launch(self):
        cmd = f"{sys.executable} {script(self.SCRIPT)} --max_steps={STEPS} {' '.join(self.ARGS)}"
        code, out = cluster.launch(BUILD, cmd, flags=self.ROUTED, timeout_s=300)
        result = cluster.check_finished(self, code, out, STEPS)
        self.check_metrics(result, out)
        mine = workload_result(out)
        self.assertIsNotNone(mine, out[-4000:])
        self.assertEqual(mine["backend"], "sieve")
        self.assertEqual(mine["steps"], str(STEPS))

    def test_ddp(self):
        code, out = run_ddp(self.SCRIPT, [f"--max_steps={STEPS}", *self.ARGS])
        self.assertEqual(code, 0, out[-4000:])
        result = workload_result(out)
        self.assertIsNotNone(result, out[-4000:])
        print(f"ddp: {result}")
        self.assertEqual(result["backend"], "ddp")
        self.assertEqual(result["workers"], "2")
        self.assertEqual(result["steps"], str(STEPS))
        self.check_metrics(result, out)

    def test_compute_only(self):
        if not self.COMPUTE_ONLY:
            self.skipTest("tested on resnet20 and lstm_lm")
        with tempfile.TemporaryDirectory() as tmp:
            results = []
            for name, env in (("both", None), ("alone", {"RANK": "0", "WORLD_SIZE": "2"})):
                path = os.path.join(tmp, f"{name}.json")
                code, out = run_ddp(self.SCRIPT, [f"--max_steps={STEPS}", *self.ARGS,
                                                  f"--result_json={path}"],
                                    backend="none", env_add=env)
                self.assertEqual(code, 0, out[-4000:])
                with open(path) as f:
                    results.append(json.load(f))
        both, alone = results
        print(f"compute only: {both}")
        self.assertEqual((both["backend"], both["workers"], both["steps"]), ("none", 2, STEPS))
        self.assertGreater(both["steps_per_s"], 0.0)
        self.check_metrics({k: str(v) for k, v in both["metrics"].items()}, str(both))
        self.assertEqual(both["metrics"], alone["metrics"])


class PythonWorkloadResnet20(WorkloadCase, unittest.TestCase):
    SCRIPT = "resnet20.py"
    ARGS = ("--width=4", "--batch_size=16", "--eval_limit=500")
    ROUTED = ("--compressor=gaussiank", "--density=0.01")
    METRICS = ("test_acc",)
    COMPUTE_ONLY = True


class PythonWorkloadResnet18(WorkloadCase, unittest.TestCase):
    SCRIPT = "resnet18.py"
    ARGS = ("--batch_size=8", "--eval_limit=200")
    METRICS = ("test_acc",)


class PythonWorkloadLstmLm(WorkloadCase, unittest.TestCase):
    SCRIPT = "lstm_lm.py"
    ARGS = ("--width=16", "--vocab=2000", "--eval_limit=2000")
    METRICS = ("perplexity", "val_loss", "test_perplexity")
    COMPUTE_ONLY = True


class PythonWorkloadCharTransformer(WorkloadCase, unittest.TestCase):
    SCRIPT = "char_transformer.py"
    ARGS = ("--width=32", "--layers=2", "--heads=2", "--context=32", "--batch_size=8",
            "--eval_limit=4000")
    METRICS = ("val_loss",)


class PythonWorkloadCharTransformerGroups(unittest.TestCase):
    """--dense_embeddings: the embedding and the positions (weight decay) and the 1-D tensors (no
    decay) in groups of their own with sieve_density=1.0; the other matrices, without the key,
    take the job's compressor. Every trainable parameter is in exactly one group."""

    def groups(self, *flags):
        import char_transformer
        w = char_transformer.CharTransformerWorkload()
        args = workload_common.make_parser(w, "").parse_args(
            ["--width=16", "--layers=1", "--heads=2", "--context=8", *flags])
        w.alphabet = ["a", "b", "c"]
        model = w.build_model(args)
        return model, w.optimizer(model, args).param_groups

    def test_dense_embeddings(self):
        model, groups = self.groups("--dense_embeddings", "--weight_decay=0.1")
        self.assertEqual(len(groups), 3)
        ids = [[id(p) for p in g["params"]] for g in groups]
        self.assertNotIn("sieve_density", groups[0])
        self.assertTrue(all(p.ndim == 2 for p in groups[0]["params"]))
        self.assertEqual(groups[0]["weight_decay"], 0.1)
        self.assertEqual(set(ids[1]), {id(model.embed.weight), id(model.position)})
        self.assertEqual((groups[1]["sieve_density"], groups[1]["weight_decay"]), (1.0, 0.1))
        self.assertTrue(all(p.ndim == 1 for p in groups[2]["params"]))
        self.assertEqual((groups[2]["sieve_density"], groups[2]["weight_decay"]), (1.0, 0.0))
        every = [i for g in ids for i in g]
        self.assertEqual(sorted(every), sorted(id(p) for p in model.parameters()))

    def test_default_is_two_groups_without_the_key(self):
        _, groups = self.groups()
        self.assertEqual(len(groups), 2)
        self.assertFalse(any("sieve_density" in g for g in groups))


class _CountingModel(torch.nn.Module):
    """Uniform logits over `vocabulary` tokens; counts the tokens it was asked to score."""

    def __init__(self, vocabulary):
        super().__init__()
        self.vocabulary, self.scored = vocabulary, 0

    def forward(self, x):
        self.scored += x.numel()
        return torch.zeros(*x.shape, self.vocabulary)


class PythonWorkloadCorpus(unittest.TestCase):
    def test_split_is_the_documented_one(self):
        splits = workload_common.kjv_split()
        digests = workload_common.split_digests(splits)
        for name, (verses, text_sha, words_sha) in KJV_SPLIT.items():
            self.assertEqual(len(splits[name]), verses, name)
            self.assertEqual(digests[name], (text_sha, words_sha), name)
        vocabulary = workload_common.word_vocabulary(splits["train"], 10000)
        self.assertEqual(len(vocabulary), 10000)
        self.assertEqual(vocabulary[:6], ["<unk>", ",", "the", "and", "of", "<eos>"])

    def test_missing_corpus_names_the_package(self):
        for name in ("lstm_lm.py", "char_transformer.py"):
            for backend in ("sieve", "ddp"):
                r = subprocess.run([sys.executable, script(name), f"--backend={backend}",
                                    "--corpus=/nonexistent/bible.data"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=60, env=cluster.worker_env(BUILD))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("/nonexistent/bible.data is missing", r.stderr)
                self.assertIn("apt-get install bible-kjv-text", r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_eval_limit_below_one_batch_is_refused_before_training(self):
        # char_transformer evaluates 16 windows of 128 characters, lstm_lm 10 windows of 35
        # words; a smaller --eval_limit once scored no window and reported val_loss=0.
        import char_transformer
        import lstm_lm
        for module, cls, batch, length in (
                (char_transformer, char_transformer.CharTransformerWorkload, 16, 128),
                (lstm_lm, lstm_lm.LstmLmWorkload, 10, 35)):
            workload = cls()
            args = workload_common.make_parser(workload, "").parse_args([])
            need = batch * (length + 1) - 1
            args.eval_limit = need
            workload.check_data(args)  # exactly one batch: accepted
            args.eval_limit = need - 1
            with self.assertRaisesRegex(workload_common.WorkloadError,
                                        f"--eval_limit={need - 1} is less than one evaluation "
                                        f"batch .* give at least {need}"):
                workload.check_data(args)
            # lm_evaluate at that boundary scores exactly one batch, and refuses one token less.
            tokens = torch.arange(need + 5) % 7
            model = _CountingModel(7)
            workload_common.lm_evaluate(model, tokens, batch, length, limit=need)
            self.assertEqual(model.scored, batch * length)
            with self.assertRaises(workload_common.WorkloadError):
                workload_common.lm_evaluate(model, tokens, batch, length, limit=need - 1)
        # From the command line: exit 1 before anything starts, the message, no traceback.
        r = subprocess.run([sys.executable, script("char_transformer.py"), "--backend=ddp",
                            "--eval_limit=2000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=60, env=cluster.worker_env(BUILD))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("char_transformer.py: error: --eval_limit=2000 is less than one evaluation "
                      "batch (16 windows of 128 tokens): give at least 2063", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_missing_fashion_mnist_names_the_package(self):
        r = subprocess.run([sys.executable, script("resnet20.py"), "--backend=ddp",
                            "--data_dir=/nonexistent"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60,
                           env=cluster.worker_env(BUILD))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("apt-get install dataset-fashion-mnist", r.stderr)
        self.assertTrue(re.search(r"^resnet20\.py: error: ", r.stderr, re.M), r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)
