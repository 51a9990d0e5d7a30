"""PythonCheckpointRejoin: a worker's opt.state_dict() survives its process. Under
`sieve launch --max_restarts=1`, 2 servers and 2 workers of tests/python/user_script/mlp.py
(MLP_CKPT: rank R saves opt.state_dict() and its StepLR's state_dict() to a file before its round
300 and exits 3). The launcher restarts rank R; the fresh process rejoins the running job in
DistributedOptimizer, then loads the file. Once for R = 1, once for R = 0 (whose init started
the job):
  - the job finishes (exit 0, all 937 rounds, 2/2 workers, test_acc >= 0.80);
  - the error-feedback residual survived: its norm printed before the save and after the load is
    the same float (and not 0, so the load did restore it), as is the error feedback's momentum
    (state_dict()["sieve"]["momentum"]) and the StepLR learning rate;
  - the fresh process rejoined at the job's round (after round 300): the scheduler's job status
    (--status_file) shows the rank taken again once and finished, the servers counted one
    rejoin; its weights right after DistributedOptimizer are the servers' trained ones, not its
    own torch init (MLP_DUMP_DIR), and at the end every replica equals the servers' weights
    bitwise (--dump_weights, --dump_shard).
And for R = 1 twice more, each ending with exit 0 and the job's 937 rounds, none past them: once
entering only after rank 0 trained the job's last round (MLP_LATE; its round is the job's end),
once with the plain PyTorch loop that starts its epochs again (MLP_PLAIN_LOOP; the steps its loop
has left after the job's last round do nothing).

usage: checkpoint_rejoin_test.py BUILD_DIR
"""

import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402

SAVE_ROUND = 300
# The other rank waits before this round until the restarted one has rejoined (MLP_REJOINED): on
# a loaded machine a restart (Python, torch) took longer than the other rank's 637 rounds alone,
# and the restarted rank then "rejoined" a job that had ended (rounds=939, no rejoin counted).
WAIT_ROUND = 320


def check_rejoined(test, out_dir, rank):
    """Asserts that the scheduler's final job status shows worker `rank` taken again by one new
    process (lost, then rejoined or replaced) that finished, and the other rank never."""
    status = cluster.read_status(out_dir)
    test.assertEqual(status["phase"], "JOB_FINISHED", status)
    row = cluster.status_node(status, "worker", rank)
    other = cluster.status_node(status, "worker", 1 - rank)
    test.assertEqual(row["restarts"], 1, row)
    test.assertNotEqual(row["lost_reason"], "", row)
    test.assertEqual(row["state"], "NODE_FINISHED", row)
    test.assertEqual(other["restarts"], 0, other)
    print(f"worker {rank} was lost ({row['lost_reason']}) and rejoined")


def checkpoint_line(out, rank, what):
    m = re.search(rf"\[worker {rank}\] checkpoint {what}: residual_norm=(\S+) "
                  r"momentum_norm=(\S+) lr=(\S+) round=(\d+)", out)
    return m and (float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4)))


class PythonCheckpointRejoin(unittest.TestCase):
    def restart(self, rank):
        out_dir = tempfile.mkdtemp(prefix="sieve-ckpt-")
        path = os.path.join(out_dir, f"rank{rank}.pt")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   [*cluster.dump_flags(out_dir), cluster.status_flag(out_dir),
                                    cluster.summary_flag(out_dir)],
                                   launcher_flags=["--max_restarts=1"],
                                   env={"MLP_CKPT": f"{path}:{rank}:{SAVE_ROUND}",
                                        "MLP_REJOINED": f"{out_dir}/rejoined:{WAIT_ROUND}",
                                        "MLP_DUMP_DIR": out_dir})
        cluster.check_finished(self, code, out, cluster.USER_SCRIPT_ROUNDS, min_test_acc=0.80)
        self.assertIn(f"restarting worker {rank} (exited with code 3)", out)
        check_rejoined(self, out_dir, rank)
        saved = checkpoint_line(out, rank, "saved")
        loaded = checkpoint_line(out, rank, "loaded")
        self.assertIsNotNone(saved, out[-4000:])
        self.assertIsNotNone(loaded, out[-4000:])
        print(f"rank {rank} saved at round {saved[3]}: residual norm {saved[0]!r}, momentum norm "
              f"{saved[1]!r}; loaded at round {loaded[3]}: {loaded[0]!r}, {loaded[1]!r}")
        self.assertEqual(saved[3], SAVE_ROUND)
        self.assertGreater(saved[0], 0.0)
        self.assertGreater(saved[1], 0.0)
        self.assertEqual(loaded[0], saved[0], "the residual's norm changed across the restart")
        self.assertEqual(loaded[1], saved[1], "the momentum's norm changed across the restart")
        self.assertEqual(loaded[2], saved[2])
        self.assertGreater(loaded[3], SAVE_ROUND)  # rejoined where the job was
        servers = cluster.summaries(out_dir, "server")
        self.assertEqual(sorted(servers), [0, 1], out[-4000:])
        for s in servers.values():
            self.assertEqual(s["rejoins"], 1)
        # The fresh process got the servers' trained weights, not its own init (rank 0's
        # offer of its init is for the job's start only), and ends with the servers' weights.
        own = torch.load(f"{out_dir}/init-{rank}.pt")
        rejoined = torch.load(f"{out_dir}/wrapped-{rank}.pt")
        self.assertGreater((rejoined - own).abs().max().item(), 0.01)
        server = cluster.check_replicas(self, out_dir, 2, 2, cluster.USER_SCRIPT_D)
        self.assertGreater(np.abs(server - rejoined.numpy()).max(), 0.0)  # trained on after

    def test_rank1_restarts(self):
        self.restart(1)

    def restart_rank1(self, env):
        """Runs the job with rank 1 saving its checkpoint before round SAVE_ROUND and restarted
        (MLP_CKPT), the hooks in env(out_dir) added; checks it finished with all rounds and
        returns (output, the round at which the restarted rank 1 loaded its checkpoint)."""
        out_dir = tempfile.mkdtemp(prefix="sieve-ckpt-rank1-")
        code, out = cluster.launch(BUILD, f"{sys.executable} {cluster.user_script()}",
                                   [cluster.status_flag(out_dir)],
                                   launcher_flags=["--max_restarts=1"],
                                   env={"MLP_CKPT": f"{out_dir}/rank1.pt:1:{SAVE_ROUND}",
                                        **env(out_dir)})
        cluster.check_finished(self, code, out, cluster.USER_SCRIPT_ROUNDS, min_test_acc=0.80)
        self.assertIn("restarting worker 1 (exited with code 3)", out)
        check_rejoined(self, out_dir, 1)
        loaded = checkpoint_line(out, 1, "loaded")
        self.assertIsNotNone(loaded, out[-4000:])
        return out, loaded[3]

    def test_rank1_rejoins_a_finished_job(self):
        # MLP_LATE: the restarted rank 1 enters the job only after rank 0 has trained its last
        # round. It has nothing left to train: its round is the job's end (sieve.torch clamps the
        # join round as sieve-worker does), it trains no round and the job ends with exit 0.
        out, join = self.restart_rank1(lambda d: {"MLP_LATE": f"{d}/late"})
        self.assertEqual(join, cluster.USER_SCRIPT_ROUNDS, out[-4000:])

    def test_rank1_plain_loop_ends_at_the_jobs_last_round(self):
        # MLP_PLAIN_LOOP: the restarted rank 1 rejoins the running job at round J and its script
        # loops over every epoch's batches from the first. It trains rounds J .. 936 with rank 0;
        # its last J step() calls find the job at its last round and do nothing (without that it
        # would train J rounds alone after rank 0 finished).
        rounds = cluster.USER_SCRIPT_ROUNDS
        out, join = self.restart_rank1(lambda d: {"MLP_REJOINED": f"{d}/rejoined:{WAIT_ROUND}",
                                                  "MLP_PLAIN_LOOP": "1"})
        self.assertGreater(join, SAVE_ROUND)
        self.assertLess(join, rounds)
        self.assertIn(f"[worker 0] plain loop: round={rounds} steps_past_end=0", out)
        self.assertIn(f"[worker 1] plain loop: round={rounds} steps_past_end={join}", out)
        self.assertIn(f"worker 1 is at the job's last round ({rounds})", out)

    def test_rank0_restarts(self):
        self.restart(0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
