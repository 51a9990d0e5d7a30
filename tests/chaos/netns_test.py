#!/usr/bin/python3
"""ChaosNetns: the chaos harness's netns mode (bench/chaos/run.py --mode=netns; docs/reliability.md)
injects partitions and slow links for real, and sieve absorbs them.

- Schedules (no job): the netns mode draws partition and slow_link (and pause_short) and never
  the kinds that need a restarted process; no link fault targets the scheduler; a partition is
  held for 0.2-0.5 x the heartbeat timeout, a slow link 1-3 s; the same seed gives the same
  schedule; the loopback modes still never draw a link fault.
- One seeded run (seed 45, ~45 s in all): 2 servers and 3 workers, each in its own network
  namespace (deploy/local/netns/run), BSP --ordered_rounds, heartbeat timeout 2 s; a server's and
  a worker's link cut (0.9 s, 0.5 s), three slow links (two workers', a server's) and a short
  pause of a server (tc's blackhole qdisc / tbf at 1 Mbit/s on both ends of the node's link):
  every invariant PASS, the final weights bitwise those of the clean run, exit 0, no namespace of
  the run left, every daemon seen (pid, RSS, lines) under netns/run.
A job that fails before its first fault is run once more (that says nothing about the faults). The
run is skipped without root or working `ip netns` (exit 77 when nothing else failed).
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
SEED = 45


def config(seed, mode="netns", **kw):
    return chaos_tests.config(seed, mode, **{"heartbeat_timeout_ms": 2000, "replication": 0,
                                             "checkpoints": False, **kw})


class Schedule(unittest.TestCase):
    def test_link_faults_drawn_never_at_the_scheduler(self):
        drawn = set()
        for seed in range(1, 21):
            s = chaos.make_schedule(config(seed))
            self.assertEqual(s, chaos.make_schedule(config(seed)))
            for e in s["events"]:
                drawn.add(e["kind"])
                self.assertIn(e["kind"], ("partition", "slow_link", "pause_short"), e)
                self.assertIn(e["role"], ("server", "worker"), e)
                n = 2 if e["role"] == "server" else 3
                self.assertLess(e["rank"], n, e)
                i = chaos.node_index(s["config"], e["role"], e["rank"])
                self.assertTrue(1 <= i <= 5, e)
                if e["kind"] == "partition":
                    self.assertTrue(0.4 <= e["hold"] <= 1.0, e)  # 0.2-0.5 x the timeout
                    self.assertTrue(chaos.absorbed("partition", s["config"], e["hold"]))
                elif e["kind"] == "slow_link":
                    self.assertTrue(1.0 <= e["hold"] <= 3.0, e)
            self.assertIn("kill_server", s["skipped_kinds"])
            self.assertNotIn("partition", s["skipped_kinds"])
        self.assertEqual(drawn, {"partition", "slow_link", "pause_short"})

    def test_kinds_asked_for_that_need_a_restart_are_skipped(self):
        kinds = {"kill_server": 1, "kill_worker": 1, "pause_long": 1, "partition": 1}
        s = chaos.make_schedule(config(3, kinds=kinds))
        self.assertEqual({e["kind"] for e in s["events"]}, {"partition"})

    def test_node_index(self):
        c = config(1)
        self.assertEqual(chaos.node_index(c, "scheduler", 0), 0)
        self.assertEqual(chaos.node_index(c, "server", 1), 2)
        self.assertEqual(chaos.node_index(c, "worker", 0), 3)
        self.assertEqual(chaos.node_index(c, "worker", 2), 5)

    def test_loopback_modes_still_skip_link_faults(self):
        kinds = {"partition": 1, "slow_link": 1, "pause_short": 1}
        s = chaos.make_schedule(config(7, mode="bsp-replicated", kinds=kinds, replication=1))
        self.assertEqual({e["kind"] for e in s["events"]}, {"pause_short"})
        self.assertIn("slow_link", s["skipped_kinds"])

    def test_a_partition_as_long_as_the_timeout_is_not_absorbed(self):
        self.assertFalse(chaos.absorbed("partition", config(1), 2.0))
        self.assertTrue(chaos.absorbed("slow_link", config(1)))


class Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = chaos.netns_unusable()
        if why:
            raise unittest.SkipTest(why)
        cls.root = tempfile.mkdtemp(prefix="sieve-chaos-netns-")
        for attempt in (1, 2):
            cls.out = os.path.join(cls.root, f"run{attempt}")
            p = subprocess.run([sys.executable, RUN, f"--build={BUILD}", "--mode=netns",
                                f"--seed={SEED}", "--duration=30", f"--out={cls.out}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            cls.code, cls.log = p.returncode, p.stdout
            print(cls.log)
            path = os.path.join(cls.out, "result.json")  # none when the clean run failed
            cls.result = None
            if os.path.exists(path):
                with open(path) as f:
                    cls.result = json.load(f)
            # A job that failed before its first fault says nothing about the faults (a machine
            # stalled past the heartbeat timeout, docs/reliability.md "Known limits"): once more.
            if cls.code == 0 or cls.result and any(e.get("injected")
                                                   for e in cls.result["events"]):
                break
            print(f"ChaosNetns: the job failed before its first fault; running it again "
                  f"(kept: {cls.out})")
        if cls.result is None:
            raise AssertionError(f"run.py wrote no result.json (exit {cls.code}):\n{cls.log}")

    @classmethod
    def tearDownClass(cls):
        if cls.code == 0 and cls.out.endswith("run1"):
            shutil.rmtree(cls.root, ignore_errors=True)
        else:
            print(f"kept: {cls.root} (replay: {RUN} --replay={cls.out}/schedule.json)")

    def test_every_invariant_passes_bitwise_included(self):
        self.assertEqual(self.code, 0, self.log)
        ok = {i["name"]: i["ok"] for i in self.result["invariants"]}
        self.assertEqual(set(ok.values()), {True}, self.log)
        self.assertTrue(self.result["pass"])

    def test_partitions_and_slow_links_were_injected_and_healed(self):
        injected = [e for e in self.result["events"] if e.get("injected")]
        kinds = [e["kind"] for e in injected]
        self.assertGreaterEqual(kinds.count("partition"), 1, self.log)
        self.assertGreaterEqual(kinds.count("slow_link"), 1, self.log)
        for e in injected:
            self.assertTrue(e.get("recovered"), e)
            if e["kind"] not in chaos.LINK_KINDS:
                continue
            qdisc = "blackhole" if e["kind"] == "partition" else "tbf rate"
            adds = [h for h in e["how"] if " add " in h]
            dels = [h for h in e["how"] if " del " in h]
            self.assertEqual(len(adds), 2, e)
            self.assertTrue(all(qdisc in h for h in adds), e)
            self.assertTrue(any(f"-n{e['node']} tc " in h and "dev eth0 " in h for h in adds), e)
            self.assertTrue(any("-sw tc " in h and f"dev p{e['node']} " in h for h in adds), e)
            self.assertEqual(len(dels), 2, e)
            if e["kind"] == "partition":
                self.assertLess(e["held_s"], 2.0, e)

    def test_nothing_left_behind(self):
        with open(os.path.join(self.out, "run", "samples.json")) as f:
            samples = json.load(f)
        self.assertEqual(samples["leftover"], [])
        self.assertTrue(samples["netns"])
        self.assertEqual(chaos.namespaces(samples["netns"]), [])
        # Every daemon was seen under netns/run (pid, RSS) and its lines counted per process.
        roles = sorted({(r[0], r[1]) for r in samples["pids"].values()})
        self.assertEqual(roles, [("scheduler", 0), ("server", 0), ("server", 1), ("worker", 0),
                                 ("worker", 1), ("worker", 2)])
        self.assertTrue(all(samples["rss_kb"].get(pid) for pid in samples["pids"]))
        self.assertIn("worker 2", samples["lines_per_s"])


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    r = unittest.main(verbosity=2, exit=False).result
    if r.wasSuccessful() and r.skipped:
        print("SKIPPED:", "; ".join(sorted({why for _, why in r.skipped})))
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)
