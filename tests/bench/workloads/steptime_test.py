"""BenchWorkloadsSteptime: bench/workloads/steptime.py without running a job: the cells parsed
from --cells (bad ones refused), each cell's command (sieve through netns/run --worker_cmd with
the density from the first round and the momentum kept, DDP through --ddp_cmd, the compute-only
bound as local ranks outside the namespaces), the round split read from a metrics file (rounds
after the first 5, medians, a cut-short last line skipped) and the Markdown table against the
compute-only bound, each checked against values computed here.

usage: steptime_test.py
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "workloads"))
import run  # noqa: E402
import steptime  # noqa: E402


def args(**kw):
    a = steptime.make_parser().parse_args(["--workload=lstm_lm"])
    a.out, a.build = "/o", "/b"
    for k, v in kw.items():
        setattr(a, k, v)
    return a


class CellsTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(steptime.parse_cells("dense,topk:0.001,gaussiank:0.01,ddp,compute"),
                         [("dense", "sieve", "none", None), ("topk:0.001", "sieve", "topk", 0.001),
                          ("gaussiank:0.01", "sieve", "gaussiank", 0.01),
                          ("ddp", "ddp", None, None), ("compute", "none", None, None)])
        for bad in ("topk", "topk:0", "topk:1.5", "randomk:0.1", "dens", ""):
            with self.assertRaises(steptime.UsageError, msg=bad):
                steptime.parse_cells(bad)

    def test_commands(self):
        a = args(steps=30, workers=3, servers=1, extra="--width=16")
        script = os.path.join(run.EXAMPLES, "lstm_lm.py")
        netns = os.path.join(run.REPO, "deploy", "local", "netns", "run")
        sieve = steptime.cell_command(a, ("topk:0.001", "sieve", "topk", 0.001), "1gbit")
        self.assertEqual(sieve[:7], [netns, "--build=/b", "--num_workers=3", "--link=1gbit",
                                     "--quiet", "--log_dir=/o/runs/1gbit.topk_0.001/logs",
                                     "--timeout=1800"])
        self.assertEqual(sieve[7:9], ["--num_servers=1",
                                      f"--worker_cmd=/usr/bin/python3 {script} --max_steps=30 "
                                      "--eval_every=0 --result_json=/o/runs/1gbit.topk_0.001/"
                                      "result.json --width=16 --compressor=topk "
                                      "--density_warmup= --density=0.001"])
        self.assertEqual(sieve[9:], ["--", "--consistency=bsp", "--momentum_masking=false",
                                     "--metrics_out=/o/runs/1gbit.topk_0.001/metrics-0.jsonl",
                                     "--metrics_every=1"])
        ddp = steptime.cell_command(a, ("ddp", "ddp", None, None), "100mbit")
        self.assertEqual(ddp[-1], f"--ddp_cmd=/usr/bin/python3 {script} --max_steps=30 "
                         "--eval_every=0 --result_json=/o/runs/100mbit.ddp/result.json "
                         "--width=16 --backend=ddp")
        self.assertNotIn("--", ddp)
        compute = steptime.cell_command(a, ("compute", "none", None, None), "")
        self.assertEqual(compute, ["/usr/bin/python3", script, "--max_steps=30", "--eval_every=0",
                                   "--result_json=/o/runs/loopback.compute/result.json",
                                   "--width=16", "--backend=none", "--ddp_ranks=3"])

    def test_dry_run_runs_compute_once_and_the_rest_per_link(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = steptime.main(["--workload=lstm_lm", "--links=1gbit,100mbit", "--dry_run",
                                  "--cells=dense,ddp,compute", "--out=/nonexistent/x"])
        self.assertEqual(code, 0)
        heads = [l for l in out.getvalue().splitlines() if l.startswith("# ")]
        self.assertEqual(heads, ["# dense on 1gbit", "# dense on 100mbit", "# ddp on 1gbit",
                                 "# ddp on 100mbit", "# compute on loopback"])
        self.assertFalse(os.path.exists("/nonexistent/x"))


class SplitTest(unittest.TestCase):
    def test_medians_after_the_first_rounds(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.jsonl")
            with open(path, "w") as f:
                for r in range(10):  # rounds 0-4 slow (start-up), 5-9: 1, 2, 3, 4, 100 ms
                    t = 1.0 if r < 5 else [0.001, 0.002, 0.003, 0.004, 0.1][r - 5]
                    f.write(json.dumps({"round": r, "t_compute": t, "t_select": t / 2,
                                        "t_comm": 2 * t, "bytes_up": 1000 + r}) + "\n")
                f.write('{"round": 10, "t_comp')  # a line cut short
            s = steptime.round_split(path)
        self.assertEqual(s["rounds"], 5)
        self.assertAlmostEqual(s["t_compute"], 0.003)
        self.assertAlmostEqual(s["t_select"], 0.0015)
        self.assertAlmostEqual(s["t_comm"], 0.006)
        self.assertEqual(s["bytes_up"], 1007)
        self.assertIsNone(steptime.round_split(os.path.join(tmp, "absent.jsonl")))

    def test_markdown_against_the_compute_bound(self):
        records = [
            {"cell": "topk:0.001", "link": "1gbit", "ok": True, "steps_per_s": 4.0,
             "split": {"t_compute": 0.2, "t_select": 0.01, "t_comm": 0.04, "bytes_up": 2500}},
            {"cell": "ddp", "link": "1gbit", "ok": False, "steps_per_s": None, "split": None},
            {"cell": "compute", "link": "loopback", "ok": True, "steps_per_s": 5.0,
             "split": None}]
        lines = steptime.markdown(records, "lstm_lm").splitlines()
        self.assertIn("| 1gbit | topk:0.001 | 0.250 | 1.25 | 200.0 ms | 10.0 ms | 40.0 ms "
                      "| 2.5 kB |", lines)
        self.assertIn("| 1gbit | ddp | failed | — | — | — | — | — |", lines)
        self.assertIn("| loopback | compute | 0.200 | 1.00 | — | — | — | — |", lines)


if __name__ == "__main__":
    unittest.main()
