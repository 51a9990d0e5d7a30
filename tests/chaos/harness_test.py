#!/usr/bin/python3
"""ChaosHarness: the chaos harness (bench/chaos) catches what it is meant to catch.

- A schedule is a function of the seed (same seed, same events; another seed, other events);
  kinds that need network namespaces are never drawn on loopback; a scheduler fault is last.
- --replay of a run's schedule.json runs the same events against the same job.
- A deliberately broken build (sieve-server-drops-a-round: a copy loses one replicated round's
  values and answers the workers with that round empty) fails bitwise.
- Broken runs fail the named invariant and exit 1: a worker's dumped weights with one bit flipped
  (bitwise, replicas), a server's copy checksum altered (replicas), a server's pushed_sum off by
  1e-7 (conservation), a log flood (log_rate), and a fault outside sieve's promises, a server
  killed without copies and restored from its checkpoint (rounds lost), claimed to be absorbed
  (bitwise).
Argument: the build directory.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos_tests  # noqa: E402
from chaos_tests import RUN, chaos  # noqa: E402

BUILD = None


def run(*args):
    p = subprocess.run([sys.executable, RUN, f"--build={BUILD}", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def result(out):
    with open(os.path.join(out, "result.json")) as f:
        r = json.load(f)
    return {i["name"]: i["ok"] for i in r["invariants"]}, r


def config(seed, mode="bsp-replicated", **kw):
    return chaos_tests.config(seed, mode, **{"heartbeat_timeout_ms": 1000, "replication": 1,
                                             "checkpoints": True, **kw})


class Schedule(unittest.TestCase):
    def test_same_seed_same_events_other_seed_other_events(self):
        a = chaos.make_schedule(config(5))
        self.assertEqual(a, chaos.make_schedule(config(5)))
        self.assertNotEqual(a["events"], chaos.make_schedule(config(6))["events"])
        self.assertGreater(len(a["events"]), 5)
        times = [e["at"] for e in a["events"]]
        self.assertEqual(times, sorted(times))

    def test_loopback_kinds_only_and_the_scheduler_last(self):
        kinds = {"partition": 1, "slow_link": 1, "kill_server": 1}
        s = chaos.make_schedule(config(7, kinds=kinds, terminal="kill_scheduler"))
        self.assertEqual({e["kind"] for e in s["events"][:-1]}, {"kill_server"})
        self.assertEqual(s["events"][-1]["kind"], "kill_scheduler")
        self.assertIn("partition", s["skipped_kinds"])


class FakeJob:
    """What the Injector's gate reads of a job: its clock, its process and a status file."""

    def __init__(self, status_path):
        self.status_path, self.ckpt, self.t0 = status_path, status_path + ".ckpt", None
        self.p = type("P", (), {"poll": staticmethod(lambda: None)})()

    def now(self):
        return 0.0 if self.t0 is None else __import__("time").time() - self.t0

    def status(self):
        with open(self.status_path) as f:
            return json.load(f)


def healthy_status(round_):
    servers = [{"role": "ROLE_SERVER", "rank": r, "state": "NODE_ALIVE", "primary_shards": [r],
                "backup_shards": [1 - r]} for r in range(2)]
    workers = [{"role": "ROLE_WORKER", "rank": r, "state": "NODE_ALIVE"} for r in range(3)]
    return {"phase": "JOB_RUNNING", "nodes": servers + workers, "progress": {"round": round_}}


class Gate(unittest.TestCase):
    """After a kill, a status written before the scheduler can have noticed the death (within
    the heartbeat timeout) does not count as recovered: the double kill of the ASP soak passed
    on one while the job was down a server."""

    def setUp(self):
        import time
        self.dir = tempfile.mkdtemp(prefix="sieve-chaos-gate-")
        self.path = os.path.join(self.dir, "status.json")
        with open(self.path, "w") as f:
            json.dump(healthy_status(10), f)
        cfg = config(5, heartbeat_timeout_ms=400)
        cfg.update(chaos.make_schedule(cfg)["config"])
        self.job = FakeJob(self.path)
        self.inj = chaos.Injector(self.job, {"events": [], "config": cfg}, gate_s=0.3)
        self.job.t0 = time.time()
        self.inj.wall0 = self.job.t0

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_a_kill_waits_out_the_heartbeat_timeout_other_faults_do_not(self):
        import time
        time.sleep(0.05)
        with open(self.path, "w") as f:  # written just after the fault, healthy, round moved on
            json.dump(healthy_status(11), f)
        self.assertAlmostEqual(self.inj._settle("double_kill_server"), 0.9)
        self.assertEqual(self.inj._settle("pause_short"), 0.0)
        ok, why = self.inj._gate(0.01, 10, self.inj._settle("kill_server"))
        self.assertFalse(ok, why)
        ok, _ = self.inj._gate(0.01, 10, self.inj._settle("pause_short"))
        self.assertTrue(ok)


class Processes(unittest.TestCase):
    """A process is its pid and its start time: a pid that a long run reuses names another
    process (the BSP soak's RSS check took a new worker's 129 MB for a killed one's growth)."""

    def test_a_pid_with_another_start_time_is_another_process(self):
        child = subprocess.Popen(["sleep", "30"])
        try:
            start = chaos.start_ticks(child.pid)
            self.assertIsNotNone(start)
            self.assertTrue(chaos.alive(child.pid, start))
            self.assertFalse(chaos.alive(child.pid, start + 1))
            self.assertTrue(chaos.alive(child.pid))
        finally:
            child.kill()
            child.wait()
        self.assertFalse(chaos.alive(child.pid, start))
        self.assertIsNone(chaos.start_ticks(child.pid))


class Runs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="sieve-chaos-harness-")
        cls.bsp = os.path.join(cls.root, "bsp")
        cls.bsp_code, cls.bsp_log = run("--mode=bsp-replicated", "--seed=201", "--duration=8",
                                        "--kinds=kill_server", f"--out={cls.bsp}")
        cls.asp = os.path.join(cls.root, "asp")
        cls.asp_code, cls.asp_log = run("--mode=asp", "--seed=202", "--duration=6",
                                        "--kinds=pause_short", f"--out={cls.asp}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def recheck(self, src, tamper):
        out = os.path.join(self.root, f"{os.path.basename(src)}-{tamper}")
        code, log = run(f"--recheck={src}", f"--out={out}", f"--tamper={tamper}")
        return code, log, result(out)[0]

    def test_the_untouched_runs_pass(self):
        self.assertEqual(self.bsp_code, 0, self.bsp_log)
        ok, r = result(self.bsp)
        self.assertTrue(ok["bitwise"], self.bsp_log)
        self.assertTrue(ok["replicas"], self.bsp_log)
        self.assertEqual(r["seed"], 201)
        self.assertTrue(any(e.get("injected") for e in r["events"]), self.bsp_log)
        self.assertEqual(self.asp_code, 0, self.asp_log)
        self.assertTrue(result(self.asp)[0]["conservation"], self.asp_log)

    def test_a_flipped_bit_in_a_dump_fails_bitwise_and_replicas(self):
        code, log, ok = self.recheck(self.bsp, "weights")
        self.assertEqual(code, 1, log)
        self.assertIs(ok["bitwise"], False, log)
        self.assertIs(ok["replicas"], False, log)
        self.assertIn("FAIL: ", log)

    def test_an_altered_copy_fails_replicas(self):
        code, log, ok = self.recheck(self.bsp, "copies")
        self.assertEqual(code, 1, log)
        self.assertIs(ok["replicas"], False, log)

    def test_a_push_lost_from_the_sums_fails_conservation(self):
        code, log, ok = self.recheck(self.asp, "pushed_sum")
        self.assertEqual(code, 1, log)
        self.assertIs(ok["conservation"], False, log)

    def test_a_log_flood_fails_log_rate(self):
        code, log, ok = self.recheck(self.asp, "log_lines")
        self.assertEqual(code, 1, log)
        self.assertIs(ok["log_rate"], False, log)

    def test_replay_runs_the_same_events(self):
        out = os.path.join(self.root, "replay")
        code, log = run(f"--replay={os.path.join(self.bsp, 'schedule.json')}", f"--out={out}",
                        "--no_clean")
        self.assertEqual(code, 0, log)
        with open(os.path.join(self.bsp, "schedule.json")) as a, \
                open(os.path.join(out, "schedule.json")) as b:
            self.assertEqual(json.load(a), json.load(b))
        first, again = result(self.bsp)[1], result(out)[1]
        key = [(e["kind"], e.get("role"), e.get("rank")) for e in first["events"]]
        self.assertEqual(key, [(e["kind"], e.get("role"), e.get("rank")) for e in again["events"]])

    def test_a_broken_build_fails_bitwise(self):
        # A deliberately broken sieve-server (tests/chaos/CMakeLists.txt: a copy loses the values
        # of one replicated round and answers the workers with that round empty), run through
        # `sieve launch --bin_dir` beside this build's scheduler and worker.
        bins = os.path.join(self.root, "broken-bin")
        os.makedirs(bins)
        for name, path in (("sieve-scheduler", "scheduler/sieve-scheduler"),
                           ("sieve-worker", "worker/sieve-worker"),
                           ("sieve-server", "tests/chaos/sieve-server-drops-a-round")):
            os.symlink(os.path.join(BUILD, path), os.path.join(bins, name))
        out = os.path.join(self.root, "broken")
        code, log = run("--mode=bsp-replicated", "--seed=206", "--duration=8",
                        "--kinds=pause_short", f"--bin_dir={bins}", f"--out={out}")
        ok, _ = result(out)
        self.assertEqual(code, 1, log)
        # The workers trained on replicas that missed a round; the copy itself heals, as later
        # rounds write the same indices' values again. The clean run used this build's server.
        self.assertIs(ok["bitwise"], False, log)

    def test_a_checkpoint_restore_claimed_absorbed_fails_bitwise(self):
        # Without copies a killed server restores its checkpoint: the rounds since are lost, a
        # fault outside sieve's promises. Claimed absorbed, the bitwise check must catch it.
        out = os.path.join(self.root, "restore")
        code, log = run("--mode=bsp-checkpoint", "--seed=203", "--duration=8",
                        "--kinds=kill_server", "--claim_absorbed", f"--out={out}")
        ok, r = result(out)
        self.assertTrue(any(e.get("injected") for e in r["events"]), log)
        self.assertEqual(code, 1, log)
        self.assertIs(ok["bitwise"], False, log)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
