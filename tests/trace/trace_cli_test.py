"""TraceCommandLine: `sieve trace` and the daemons' trace flags on the command line (no job).
  - `sieve trace merge DIR [--out=FILE]` merges sieve trace files (exit 0; DIR/merged.json by
    default, FILE with --out=FILE or --out FILE), notes files it skips on stderr, and exits 1
    naming a truncated file (writing nothing) and for a directory without traces;
  - usage errors exit 2 with the usage; --help exits 0; `sieve --help` lists the subcommand;
  - sieve-worker and sieve-server exit 2 on a bad --trace_rounds, naming the flag, and list
    --trace_out and --trace_rounds in --help.

usage: trace_cli_test.py SIEVE SIEVE_WORKER SIEVE_SERVER
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SIEVE = WORKER = SERVER = None


def run(*argv):
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    return p.returncode, p.stdout, p.stderr


def trace_text(role, rank, zero, wall_us):
    """A small trace as sieve's writer lays it out."""
    return json.dumps({
        "traceEvents": [
            {"name": "process_name", "ph": "M", "ts": 0, "pid": 7, "tid": 0,
             "args": {"name": f"{role} {rank}"}},
            {"name": "compute", "ph": "X", "ts": 0, "dur": 5.5, "pid": 7, "tid": 1,
             "args": {"round": 0}},
        ],
        "displayTimeUnit": "ms",
        "sieve": {"format": "sieve-trace", "version": 1, "role": role, "rank": rank,
                  "zero": zero, "zero_wall_us": wall_us, "complete": True},
    })


class TraceCommandLine(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="sieve-trace-cli-")
        self.dir = self.tmp.name
        self.write("worker-0.json", trace_text("worker", 0, "start_barrier", 1.7e15))
        self.write("worker-1.json", trace_text("worker", 1, "start_barrier", 1.7e15 + 3e6))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w", encoding="utf-8") as f:
            f.write(text)

    def load(self, path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def test_merge_writes_merged_json(self):
        self.write("notes.json", '{"not": "a trace"}')
        self.write("worker-2.json.tmp", "{")  # an unfinished trace
        code, out, err = run(SIEVE, "trace", "merge", self.dir)
        self.assertEqual(code, 0, out + err)
        self.assertIn("2 processes (0 servers, 2 workers)", out)
        self.assertIn("notes.json: not a sieve trace", err)
        self.assertIn("worker-2.json.tmp: an unfinished trace", err)
        merged = self.load(os.path.join(self.dir, "merged.json"))
        compute = [e for e in merged["traceEvents"] if e["name"] == "compute"]
        self.assertEqual(len(compute), 2)
        self.assertEqual(compute[0]["ts"], compute[1]["ts"])  # one start barrier
        self.assertNotEqual(compute[0]["pid"], compute[1]["pid"])

    def test_out_flag(self):
        for args in (["--out=" + os.path.join(self.dir, "a.trace")],
                     ["--out", os.path.join(self.dir, "b.trace")]):
            code, out, err = run(SIEVE, "trace", "merge", self.dir, *args)
            self.assertEqual(code, 0, out + err)
        for name in ("a.trace", "b.trace"):
            self.assertEqual(len(self.load(os.path.join(self.dir, name))["sieve"]["sources"]), 2)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "merged.json")))

    def test_truncated_file_fails_naming_it(self):
        text = trace_text("worker", 2, "start_barrier", 1.7e15)
        self.write("worker-2.json", text[: len(text) // 2])
        code, out, err = run(SIEVE, "trace", "merge", self.dir)
        self.assertEqual(code, 1, out + err)
        self.assertIn(os.path.join(self.dir, "worker-2.json") + ": not valid JSON", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "merged.json")))

    def test_no_traces_fails(self):
        empty = os.path.join(self.dir, "empty")
        os.makedirs(empty)
        code, _, err = run(SIEVE, "trace", "merge", empty)
        self.assertEqual(code, 1)
        self.assertIn("no *.json trace files in", err)
        code, _, err = run(SIEVE, "trace", "merge", os.path.join(self.dir, "missing"))
        self.assertEqual(code, 1)
        self.assertIn("missing is not a directory", err)

    def test_usage(self):
        for argv in ([], ["merge"], ["split", self.dir], ["merge", self.dir, self.dir],
                     ["merge", self.dir, "--bogus"], ["merge", self.dir, "--out"],
                     ["merge", self.dir, "--out="]):
            code, out, err = run(SIEVE, "trace", *argv)
            self.assertEqual(code, 2, f"{argv}: {out}{err}")
            self.assertIn("usage: sieve trace merge DIR [--out=FILE]", err, argv)
        for argv in (["--help"], ["merge", "--help"], ["merge", self.dir, "-h"]):
            code, out, _ = run(SIEVE, "trace", *argv)
            self.assertEqual(code, 0, argv)
            self.assertIn("usage: sieve trace merge DIR [--out=FILE]", out)
        code, out, _ = run(SIEVE, "--help")
        self.assertEqual(code, 0)
        self.assertIn("  trace ", out)

    def test_daemons_refuse_bad_trace_rounds(self):
        for daemon, name in ((WORKER, "sieve-worker"), (SERVER, "sieve-server")):
            for bad in ("5:5", "9:3", "x", "10"):
                code, out, err = run(daemon, f"--trace_rounds={bad}")
                self.assertEqual(code, 2, f"{name} {bad}: {out}{err}")
                self.assertIn(f"{name}: --trace_rounds: ", err)
                self.assertIn(f"'{bad}'", err)
            code, out, _ = run(daemon, "--help")
            self.assertEqual(code, 0)
            section = out[out.index("Output and metrics"):]
            self.assertIn("--trace_out=", section)
            self.assertIn("--trace_rounds=0:100", section)


if __name__ == "__main__":
    SIEVE, WORKER, SERVER = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main()
