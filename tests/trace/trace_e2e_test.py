"""TraceEndToEnd: a real job's timeline shows its straggler.

`sieve launch` runs a synthetic BSP job (2 servers, 2 workers, 40 rounds) with worker 1 slowed by
--straggler=1:delay:25ms and --trace_out=DIR/{role}-{rank}.json routed to every server and
worker; `sieve trace merge DIR` writes DIR/merged.json, read back with Python's json:
  - it follows the trace-event schema (every event has name, ph, ts, pid, tid; spans dur >= 0)
    and holds four processes, "server 0", "server 1", "worker 0" and "worker 1", one pid each;
  - every worker recorded the spans of every round (round, compute, select, push, wait, apply);
    every server an aggregate span per worker and round, and encode / reply spans;
  - the straggler shows: worker 1's compute spans, summed over the rounds, are far longer than
    worker 0's, and worker 0's wait spans far longer than worker 1's (it waits for worker 1's push
    each round), both by generous factors of what the emulated delay adds;
  - the files are on one timeline: a server handles a worker's push of round r after the worker
    started sending it and before the worker's wait for round r ended (20 ms of slack, 80 % of
    the rounds).
No absolute time is asserted.

usage: trace_e2e_test.py SIEVE
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SIEVE = None
ROUNDS = 40
DELAY_S = 0.025


def spans(events, pid, name):
    return [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["name"] == name]


def by_round(span_list):
    return {e["args"]["round"]: e for e in span_list}


class TraceEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sieve-trace-e2e-")
        cls.dir = os.path.join(cls.tmp.name, "traces")
        os.makedirs(cls.dir)
        cmd = [SIEVE, "launch", "--num_servers=2", "--num_workers=2", "--progress=off", "--",
               "--model=synthetic", "--num_params=100000", f"--rounds_per_epoch={ROUNDS}",
               "--epochs=1", "--compressor=topk", "--density=0.01",
               f"--straggler=1:delay:{int(DELAY_S * 1000)}ms",
               f"--trace_out={cls.dir}/{{role}}-{{rank}}.json", f"--trace_rounds=0:{ROUNDS}"]
        cls.launch = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=150)
        cls.merge = subprocess.run([SIEVE, "trace", "merge", cls.dir], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=60)
        cls.merged = None
        path = os.path.join(cls.dir, "merged.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                cls.merged = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.launch.returncode, 0, self.launch.stdout[-4000:])
        self.assertEqual(self.merge.returncode, 0, self.merge.stdout + self.merge.stderr)
        self.assertIsNotNone(self.merged)
        self.events = self.merged["traceEvents"]
        self.pids = {e["args"]["name"]: e["pid"] for e in self.events
                     if e["ph"] == "M" and e["name"] == "process_name"}

    def test_one_file_per_process_and_the_merge_says_so(self):
        names = sorted(os.listdir(self.dir))
        self.assertEqual(names, ["merged.json", "server-0.json", "server-1.json",
                                 "worker-0.json", "worker-1.json"])
        self.assertIn("4 processes (2 servers, 2 workers)", self.merge.stdout)
        self.assertEqual(self.merge.stderr, "")  # no note: every file whole

    def test_schema_and_processes(self):
        self.assertEqual(self.merged["displayTimeUnit"], "ms")
        for e in self.events:
            for key in ("name", "ph", "ts", "pid", "tid"):
                self.assertIn(key, e, e)
            if e["ph"] == "X":
                self.assertGreaterEqual(e["dur"], 0, e)
        self.assertEqual(sorted(self.pids), ["server 0", "server 1", "worker 0", "worker 1"])
        self.assertEqual(len(set(self.pids.values())), 4)
        meta = self.merged["sieve"]
        self.assertEqual(meta["format"], "sieve-trace-merged")
        self.assertEqual(meta["zero"], "start_barrier")
        aligned = {s["role"]: s["aligned_by"] for s in meta["sources"]}
        self.assertEqual(aligned, {"worker": "start_barrier", "server": "wall_clock"})

    def test_every_round_has_its_spans(self):
        for w in ("worker 0", "worker 1"):
            for name in ("round", "compute", "select", "push", "wait", "apply"):
                got = by_round(spans(self.events, self.pids[w], name))
                self.assertEqual(sorted(got), list(range(ROUNDS)), f"{w} {name}")
            for e in spans(self.events, self.pids[w], "round"):
                self.assertGreater(e["args"]["bytes_up"], 0, e)
                self.assertGreater(e["args"]["bytes_down"], 0, e)
        for s in ("server 0", "server 1"):
            agg = spans(self.events, self.pids[s], "aggregate")
            for w in (0, 1):
                rounds = sorted(e["args"]["round"] for e in agg if e["args"]["worker"] == w)
                self.assertEqual(rounds, list(range(ROUNDS)), f"{s} worker {w}")
            self.assertTrue(any(e["args"]["completed_round"] for e in agg))
            replies = spans(self.events, self.pids[s], "reply")
            updates = [e for e in replies if e["args"]["type"] == "UPDATE"]
            self.assertGreaterEqual(len(updates), 2 * ROUNDS, s)
            self.assertTrue(spans(self.events, self.pids[s], "encode"), s)

    def total(self, worker, name):
        return sum(e["dur"] for e in spans(self.events, self.pids[worker], name)) / 1e6

    def test_the_straggler_computes_longer_and_the_other_worker_waits(self):
        delay = ROUNDS * DELAY_S  # what --straggler adds to worker 1's compute in all
        c0, c1 = self.total("worker 0", "compute"), self.total("worker 1", "compute")
        w0, w1 = self.total("worker 0", "wait"), self.total("worker 1", "wait")
        msg = f"compute {c0:.3f}s / {c1:.3f}s, wait {w0:.3f}s / {w1:.3f}s (worker 0 / 1)"
        self.assertGreater(c1, 2 * c0, msg)
        self.assertGreater(c1 - c0, 0.5 * delay, msg)
        self.assertGreater(w0, 2 * w1, msg)
        self.assertGreater(w0, 0.5 * delay, msg)
        straggle = [e["args"]["straggle_ms"] for e in spans(self.events, self.pids["worker 1"],
                                                            "compute")]
        self.assertGreater(sum(straggle) / 1e3, 0.5 * delay)

    def test_servers_and_workers_share_one_timeline(self):
        # Generous: a worker descheduled as it leaves the barrier moves its zero by a few ms; a
        # broken alignment (the servers' 100+ ms offset ignored, a wrong unit) is far off.
        slack_us = 20000
        for w in (0, 1):
            pushes = by_round(spans(self.events, self.pids[f"worker {w}"], "push"))
            waits = by_round(spans(self.events, self.pids[f"worker {w}"], "wait"))
            for s in ("server 0", "server 1"):
                agg = {e["args"]["round"]: e for e in spans(self.events, self.pids[s], "aggregate")
                       if e["args"]["worker"] == w}
                inside = sum(1 for r in range(ROUNDS)
                             if pushes[r]["ts"] - slack_us <= agg[r]["ts"]
                             <= waits[r]["ts"] + waits[r]["dur"] + slack_us)
                self.assertGreaterEqual(inside, 0.8 * ROUNDS, f"{s}, worker {w}")


if __name__ == "__main__":
    SIEVE = sys.argv.pop(1)
    unittest.main()
