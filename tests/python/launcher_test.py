"""PythonLauncher: `sieve launch --worker_cmd` with the user's script
(tests/python/user_script/mlp.py), at the launcher's level:
  - a routed worker flag the script does not implement (--histogram_rounds=10, sieve-worker's
    only) is a usage error before anything starts: exit 2, a message naming the flag and the
    command, no daemon output;
  - --straggler=1:delay:5ms reaches the script: rank 1 stalls 5 ms after each round's compute
    (its summary's straggler and straggle_s >= 937 x 5 ms), rank 0 not at all;
  - --min_workers=1 (the scheduler's) with 2 workers, rank 1 killing itself with SIGKILL before
    its round 300 (MLP_KILL=1:300): the launcher lets it go, the job finishes with exit 0, its
    result line says workers=1/2 and names the lost worker, rank 0 did all 937 rounds, and each
    server applied exactly 937 + 300 pushes (rank 1's rounds 0-299, none after);
  - a script that never calls opt.finish() (MLP_NO_FINISH): sieve.torch finishes at exit, each
    worker writes its summary (--summary_out) after all 937 rounds, the job finishes (exit 0,
    2/2); the worker flags routed to it (--density=0.02 --metrics_out=... --wire_values=bf16
    --wire=v4) win over the script's density=0.01: every round of both ranks pushed
    k = round(0.02 * D) pairs in 6 bytes each (raw indices, bf16 values);
  - an uncaught exception in rank 1's script at round 100 (MLP_RAISE=1:100) fails the job:
    exit 1, the result line names worker 1, the server applied no round past 100;
  - rank 1's model has another D (MLP_WIDEN=1: 129 hidden units): the job fails (exit 1) with
    an error naming both sizes.

usage: launcher_test.py BUILD_DIR
"""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

ROUNDS, D, KILL_ROUND = cluster.USER_SCRIPT_ROUNDS, cluster.USER_SCRIPT_D, 300


class PythonLauncher(unittest.TestCase):
    def test_unimplemented_worker_flag_is_refused_before_anything_starts(self):
        cmd = f"{sys.executable} {cluster.user_script()}"
        code, out = cluster.launch(BUILD, cmd, ["--histogram_rounds=10"], timeout_s=120)
        self.assertEqual(code, 2, out[-4000:])
        self.assertIn(f"--histogram_rounds is not implemented by the worker command '{cmd}'",
                      out)
        for role in ("[scheduler]", "[server", "[worker"):
            self.assertNotIn(role, out)  # nothing started
        self.assertIsNone(cluster.job_result(out))

    def test_straggler_slows_the_named_rank_only(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-launcher-")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   ["--straggler=1:delay:5ms", cluster.summary_flag(out_dir)],
                                   num_servers=1)
        self.assertEqual(code, 0, out[-4000:])
        workers = cluster.summaries(out_dir, "worker")
        self.assertEqual(sorted(workers), [0, 1], out[-4000:])
        self.assertEqual(workers[1]["straggler"], "delay:5ms")
        self.assertGreaterEqual(workers[1]["straggle_s"], ROUNDS * 0.005 * 0.99)
        self.assertEqual(workers[0]["straggler"], "")
        self.assertEqual(workers[0]["straggle_s"], 0)
        for r in (0, 1):
            self.assertEqual(workers[r]["rounds"], ROUNDS)
            self.assertEqual(workers[r]["errors_retried"], 0)

    def test_min_workers_lets_a_killed_worker_go(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-launcher-")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   ["--min_workers=1", cluster.summary_flag(out_dir)],
                                   env={"MLP_KILL": f"1:{KILL_ROUND}"})
        cluster.check_finished(self, code, out, ROUNDS, workers="1/2", min_test_acc=0.75)
        self.assertIn("lost worker 1 (killed by signal 9", out)
        final = out.rstrip().splitlines()[-1]
        self.assertRegex(final, r"workers=1/2; lost worker 1 \(killed by signal 9")
        workers = cluster.summaries(out_dir, "worker")
        self.assertEqual(sorted(workers), [0], out[-4000:])  # the killed rank 1 wrote none
        self.assertEqual(workers[0]["rounds"], ROUNDS)
        servers = cluster.summaries(out_dir, "server")
        self.assertEqual([servers[r]["applied"] for r in sorted(servers)],
                         [ROUNDS + KILL_ROUND] * 2)

    def test_finish_at_exit_and_routed_flags(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-launcher-")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   ["--density=0.02", f"--metrics_out={out_dir}/m-{{rank}}.jsonl",
                                    "--wire_values=bf16", "--wire=v4",
                                    cluster.summary_flag(out_dir)],
                                   num_servers=1, env={"MLP_NO_FINISH": "1"})
        self.assertEqual(code, 0, out[-4000:])
        k = round(0.02 * D)
        for r in (0, 1):
            m = cluster.read_jsonl(f"{out_dir}/m-{r}.jsonl")
            self.assertEqual(len(m), ROUNDS)
            self.assertEqual({(x["k"], x["selected"]) for x in m}, {(k, k)}, f"rank {r}")
            # --wire_values=bf16 --wire=v4 reached the script: each push is k raw uint32 indices
            # and k 2-byte values plus its header (fp32 would be 8 bytes a pair, v5 indices ~1-2).
            for x in m:
                self.assertGreaterEqual(x["bytes_up"], 6 * k, f"rank {r}")
                self.assertLess(x["bytes_up"], 6 * k + 256, f"rank {r}")
        workers = cluster.summaries(out_dir, "worker")
        self.assertEqual(sorted(workers), [0, 1], out[-4000:])
        for r in (0, 1):
            self.assertEqual(workers[r]["rounds"], ROUNDS, f"rank {r}")
        cluster.check_finished(self, code, out, ROUNDS)

    def test_uncaught_exception_fails_the_job(self):
        out_dir = tempfile.mkdtemp(prefix="sieve-launcher-")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   [cluster.summary_flag(out_dir)], num_servers=1,
                                   env={"MLP_RAISE": "1:100"})
        self.assertEqual(code, 1, out[-4000:])
        self.assertIn("RuntimeError: MLP_RAISE: rank 1 fails at round 100", out)
        final = out.rstrip().splitlines()[-1]
        self.assertRegex(final, r"^sieve launch: job FAILED: worker 1 .*exited with code 1")
        self.assertIsNone(cluster.job_result(out))
        rounds = [s["rounds"] for s in cluster.summaries(out_dir, "server").values()]
        self.assertTrue(all(r <= 101 for r in rounds), rounds)

    def test_workers_of_different_d_fail_the_job_naming_both(self):
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   num_servers=1, env={"MLP_WIDEN": "1"})
        self.assertEqual(code, 1, out[-4000:])
        wide = 784 * 129 + 129 + 129 * 10 + 10
        lines = [l for l in out.splitlines() if f"D = {D}" in l and f"D = {wide}" in l]
        self.assertTrue(lines, out[-4000:])
        print(lines[0])
        self.assertIn("job FAILED", out.rstrip().splitlines()[-1])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
