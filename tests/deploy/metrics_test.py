"""DeployMetricsEndpoint: every daemon's --metrics_port serves parseable Prometheus text whose
counters move during a run, and /healthz (the probes' endpoint) answers 200.

A local job (scheduler, one server, two workers, synthetic model, BSP) runs with metrics on. The
test scrapes every endpoint while the job runs and parses every scrape strictly (HELP/TYPE lines,
sample syntax, label escaping, histogram buckets cumulative and equal to _count). It then kills
worker 1 (SIGKILL) once it has trained a few rounds and checks that the scheduler and the server
count it in sieve_dead_nodes while worker 0 trains on to the end.

usage: metrics_test.py SCHEDULER SERVER WORKER
"""

import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SCHEDULER, SERVER, WORKER = None, None, None
DEADLINE_S = 90

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?,?\}})? (\S+)(?: (-?\d+))?$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(text):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    return float(text)


def parse_prometheus(text):
    """Strict parser of the text format 0.0.4. Returns {family: {"type", "samples": [(name,
    labels, value)]}}; raises ValueError on anything malformed."""
    families, current = {}, None
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                if not re.fullmatch(NAME, parts[2]):
                    raise ValueError(f"line {n}: bad metric name {parts[2]!r}")
                fam = families.setdefault(parts[2], {"type": "untyped", "samples": []})
                if parts[1] == "TYPE":
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ValueError(f"line {n}: bad TYPE line {line!r}")
                    if fam["samples"]:
                        raise ValueError(f"line {n}: TYPE after samples of {parts[2]}")
                    fam["type"] = parts[3]
                current = parts[2]
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"line {n}: bad sample {line!r}")
        name = m.group(1)
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        value = parse_value(m.group(3))
        family = name
        if current and name != current and name in (f"{current}_bucket", f"{current}_sum",
                                                    f"{current}_count"):
            family = current
        if family not in families:
            raise ValueError(f"line {n}: sample {name} without HELP/TYPE")
        families[family]["samples"].append((name, labels, value))
    for fname, fam in families.items():
        if fam["type"] == "counter":
            for _, _, v in fam["samples"]:
                if v < 0:
                    raise ValueError(f"counter {fname} is negative")
        if fam["type"] == "histogram":
            buckets = [(float(parse_value(l["le"])), v) for s, l, v in fam["samples"]
                       if s == f"{fname}_bucket"]
            count = [v for s, _, v in fam["samples"] if s == f"{fname}_count"]
            if not buckets or len(count) != 1 or buckets[-1][0] != math.inf:
                raise ValueError(f"histogram {fname}: missing buckets, +Inf or _count")
            if any(b[1] < a[1] or b[0] <= a[0] for a, b in zip(buckets, buckets[1:])):
                raise ValueError(f"histogram {fname}: buckets not cumulative")
            if buckets[-1][1] != count[0]:
                raise ValueError(f"histogram {fname}: +Inf bucket != _count")
    return families


def value(families, name, suffix=""):
    samples = [v for s, _, v in families[name]["samples"] if s == name + suffix]
    assert len(samples) == 1, (name, suffix, samples)
    return samples[0]


def get(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status, r.read().decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ParserTest(unittest.TestCase):
    """The parser itself rejects what Prometheus rejects."""

    def test_rejects_malformed(self):
        good = "# HELP a_total x\n# TYPE a_total counter\na_total{role=\"w\"} 3\n"
        self.assertEqual(value(parse_prometheus(good), "a_total"), 3)
        for bad in ("a_total 3\n", "# TYPE a_total counter\na_total{role=w} 3\n",
                    "# TYPE a_total counter\na_total three\n",
                    "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                    "h_sum 1\nh_count 1\n"):
            with self.assertRaises(ValueError, msg=bad):
                parse_prometheus(bad)


class MetricsEndpointTest(unittest.TestCase):

    def test_counters_move_and_dead_nodes_count(self):
        ports = {role: free_port() for role in ("scheduler", "server", "worker0", "worker1")}
        zmq_port = free_port()
        common = ["--bind=127.0.0.1", "--host=127.0.0.1"]
        node = [f"--scheduler=127.0.0.1:{zmq_port}", "--heartbeat_interval_ms=200",
                "--heartbeat_timeout_ms=5000"]
        model = ["--model=synthetic", "--num_params=20000", "--seed=3"]
        argv = {
            "scheduler": [SCHEDULER, f"--port={zmq_port}", "--num_servers=1", "--num_workers=2",
                          "--min_workers=1", "--heartbeat_timeout_ms=1500"] + common,
            "server": [SERVER, "--consistency=bsp"] + model + node + common,
        }
        for r in (0, 1):
            argv[f"worker{r}"] = [WORKER, f"--rank={r}", "--compressor=topk", "--density=0.01",
                                  "--epochs=1", "--rounds_per_epoch=6000", "--progress=log",
                                  "--round_timeout_ms=20000"] + model + node + common
        procs = {}
        with tempfile.TemporaryDirectory(prefix="sieve-metrics-") as tmp:
            logs = {role: open(os.path.join(tmp, role + ".log"), "w+", encoding="utf-8")
                    for role in argv}
            try:
                for role, a in argv.items():
                    procs[role] = subprocess.Popen(a + [f"--metrics_port={ports[role]}"],
                                                   stdout=logs[role], stderr=subprocess.STDOUT)
                self.run_checks(ports, procs)
            finally:
                for p in procs.values():
                    if p.poll() is None:
                        p.kill()
                    p.wait()
                for role, f in logs.items():
                    f.seek(0)
                    print(f"--- {role} (rc {procs[role].returncode if role in procs else '-'})")
                    print(f.read()[-2000:])
                    f.close()
            self.assertEqual(procs["worker0"].returncode, 0)
            self.assertEqual(procs["server"].returncode, 0)
            self.assertEqual(procs["scheduler"].returncode, 0)

    def scrape(self, port):
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        self.assertEqual(status, 200)
        return parse_prometheus(text)

    def wait_for(self, what, fn, deadline):
        while time.monotonic() < deadline:
            try:
                result = fn()
                if result:
                    return result
            except OSError:
                pass
            time.sleep(0.02)
        self.fail(f"timed out waiting for {what}")

    def run_checks(self, ports, procs):
        deadline = time.monotonic() + DEADLINE_S
        # Health answers before the job has even formed.
        for role, port in ports.items():
            status, body = self.wait_for(f"{role} /healthz",
                                         lambda p=port: get(f"http://127.0.0.1:{p}/healthz"),
                                         deadline)
            self.assertEqual(status, 200)
            self.assertRegex(body, r'sieve_healthy\{role="\w+"\} 1')

        # Worker 0's and the server's counters move between scrapes while the job runs.
        for role in ("worker0", "server"):
            first = self.wait_for(f"{role} rounds > 0", lambda r=role: (
                lambda f: f if value(f, "sieve_rounds_total") > 0 else None)(
                    self.scrape(ports[r])), deadline)
            # Two rounds later, not one: a scrape may fall between a push's latency observation
            # and the rounds update it leads to, so one more round need not mean one more push.
            later = self.wait_for(f"{role} rounds moving", lambda r=role, f0=first: (
                lambda f: f if value(f, "sieve_rounds_total") >= value(
                    f0, "sieve_rounds_total") + 2 else None)(self.scrape(ports[r])), deadline)
            for name in ("sieve_bytes_sent_total", "sieve_bytes_received_total"):
                self.assertGreater(value(later, name), value(first, name), f"{role} {name}")
                self.assertEqual(later[name]["type"], "counter")
            for name in ("sieve_push_latency_seconds", "sieve_update_latency_seconds"):
                self.assertEqual(later[name]["type"], "histogram")
                self.assertGreater(value(later, name, "_count"), value(first, name, "_count"),
                                   f"{role} {name}")
            if role == "worker0":
                self.assertEqual(value(later, "sieve_target_k"), 200)  # 0.01 * 20000
                self.assertGreater(value(later, "sieve_selected_k"), 0)
            self.assertIn("sieve_staleness_max", later)
            info = later["sieve_info"]["samples"]
            self.assertEqual(len(info), 1)
            self.assertEqual(info[0][1]["role"], "worker" if role == "worker0" else "server")
            self.assertEqual(info[0][1]["rank"], "0")

        # A worker dies: the scheduler declares it dead, the server hears of it.
        self.wait_for("worker1 training", lambda: value(
            self.scrape(ports["worker1"]), "sieve_rounds_total") > 0, deadline)
        procs["worker1"].send_signal(signal.SIGKILL)
        procs["worker1"].wait()
        self.assertIsNone(procs["worker0"].poll(),
                          "worker 0 ended before worker 1 was killed: make the job longer")
        for role in ("scheduler", "server"):
            self.wait_for(f"{role} sieve_dead_nodes == 1", lambda r=role: value(
                self.scrape(ports[r]), "sieve_dead_nodes") == 1, deadline)
        for role in ("worker0", "server", "scheduler"):
            procs[role].wait(max(1.0, deadline - time.monotonic()))


if __name__ == "__main__":
    SCHEDULER, SERVER, WORKER = (os.path.abspath(a) for a in sys.argv[1:4])
    del sys.argv[1:4]
    unittest.main(verbosity=2)
