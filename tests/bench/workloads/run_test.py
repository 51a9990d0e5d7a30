#!/usr/bin/python3
"""Unit tests of bench/workloads/run.py's pure parts: the commands of a job, the reading of a
job's result files, the statistics and the Markdown table (against numbers worked out by hand).
Nothing is launched.

    /usr/bin/python3 -m unittest bench/workloads/run_test.py
    /usr/bin/python3 bench/workloads/run_test.py
"""

import contextlib
import io
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "bench", "workloads"))
import run  # noqa: E402


def record(workload, config, seed, value, ok=True, **more):
    """A job record as run_job writes it, with only what the tables read."""
    w = run.WORKLOADS[workload]
    r = {"workload": workload, "config": config, "seed": seed, "metric": w.metric,
         "metric_kind": w.kind, "value": value, "ok": ok, "wall_s": None, "steps": None,
         "bytes_pushed": None, "bytes_ratio": None}
    r.update(more)
    return r


class CommandTest(unittest.TestCase):
    def settings(self, **kw):
        return run.Settings(out="/o", build="/b", python="/usr/bin/python3", **kw)

    def test_sieve_job(self):
        job = run.Job("resnet20", "topk01", 1)
        argv, env, unset, script_cmd = run.job_command(job, self.settings())
        script = os.path.join(run.EXAMPLES, "resnet20.py")
        worker_cmd = (f"/usr/bin/python3 {script} --epochs=15 --seed=1 --compressor=topk "
                      "--density=0.001 --density_warmup=0.015625,0.004")
        self.assertEqual(argv, [
            "/b/deploy/sieve", "launch", "--num_servers=2", "--num_workers=4",
            "--progress=lines", "--log_dir=/o/runs/resnet20.topk01.seed1/logs",
            f"--worker_cmd={worker_cmd}", "--", "--consistency=bsp",
            "--summary_out=/o/runs/resnet20.topk01.seed1/summary/{role}-{rank}.json",
            "--status_file=/o/runs/resnet20.topk01.seed1/status.json",
            "--metrics_out=/o/runs/resnet20.topk01.seed1/metrics-0.jsonl", "--metrics_every=50",
            "--contraction_every=50"])
        # --contraction_every=0: no metrics lines.
        argv, _, _, _ = run.job_command(job, self.settings(contraction_every=0))
        self.assertFalse([a for a in argv if a.startswith(("--metrics", "--contraction"))])
        self.assertEqual(env, {})
        self.assertEqual(unset, ())
        self.assertEqual(" ".join(script_cmd), worker_cmd)
        self.assertEqual(run.job_paths(job, self.settings())["json"],
                         "/o/jobs/resnet20.topk01.seed1.json")

    def test_compute_job_is_the_script_alone_without_communication(self):
        job = run.Job("resnet20", "compute", 1)
        argv, env, unset, script_cmd = run.job_command(job, self.settings())
        self.assertEqual(argv, ["/usr/bin/python3", os.path.join(run.EXAMPLES, "resnet20.py"),
                                "--backend=none", "--ddp_ranks=4", "--epochs=15", "--seed=1",
                                "--result_json=/o/runs/resnet20.compute.seed1/ddp-result.json"])
        self.assertEqual(unset, run.DDP_OUTER_ENV)

    def test_nomask_configs_add_the_worker_flag_after_the_separator(self):
        for config, twin in (("topk01_nomask", "topk01"), ("gaussiank01_nomask", "gaussiank01")):
            job, settings = run.Job("lstm_lm", config, 1), self.settings(contraction_every=0)
            argv = run.job_command(job, settings)[0]
            self.assertEqual(argv[argv.index("--"):].count("--momentum_masking=false"), 1)
            self.assertNotIn("--momentum_masking=false", argv[:argv.index("--")])
            # The script's flags are its twin's: only the worker flag differs.
            self.assertEqual(run.script_flags(job, settings),
                             run.script_flags(run.Job("lstm_lm", twin, 1), settings))
            twin_argv = run.job_command(run.Job("lstm_lm", twin, 1), settings)[0]
            self.assertNotIn("--momentum_masking=false", twin_argv)

    def test_dense_and_topk1_have_no_warmup(self):
        for config, want in (("dense", ["--compressor=none", "--density_warmup="]),
                             ("topk1", ["--compressor=topk", "--density=0.01",
                                        "--density_warmup="]),
                             ("gaussiank01", ["--compressor=gaussiank", "--density=0.001",
                                              "--density_warmup=0.015625,0.004"])):
            flags = run.script_flags(run.Job("lstm_lm", config, 2), self.settings())
            self.assertEqual(flags, ["--epochs=6", "--seed=2"] + want, config)

    def test_ddp_job(self):
        job = run.Job("resnet18", "ddp", 2)
        argv, env, unset, script_cmd = run.job_command(job, self.settings(workers=3))
        flags = ["--backend=ddp", "--ddp_ranks=3", "--epochs=5", "--seed=2",
                 "--result_json=/o/runs/resnet18.ddp.seed2/ddp-result.json"]
        self.assertEqual(argv, ["/usr/bin/python3", os.path.join(run.EXAMPLES, "resnet18.py")]
                         + flags)
        self.assertEqual(script_cmd, argv)
        self.assertEqual(env, {})
        self.assertIn("RANK", unset)
        line = run.shell_line(argv, env, unset)
        self.assertTrue(line.startswith("env -uRANK "), line)

    def test_lengths_and_extra(self):
        job = run.Job("char_transformer", "dense", 1)
        self.assertEqual(run.script_flags(job, self.settings())[:2],
                         ["--max_steps=2000", "--seed=1"])
        flags = run.script_flags(job, self.settings(epochs=1, max_steps=10))
        self.assertEqual(flags[:3], ["--epochs=1", "--max_steps=10", "--seed=1"])
        common, per = run.parse_extra(["--eval_limit=500", "resnet20:--width=4 --batch_size=16"])
        self.assertEqual((common, per), (["--eval_limit=500"],
                                         {"resnet20": ["--width=4", "--batch_size=16"]}))
        s = self.settings(extra=common, extra_for=per)
        self.assertEqual(run.script_flags(run.Job("resnet20", "dense", 1), s)[-3:],
                         ["--eval_limit=500", "--width=4", "--batch_size=16"])
        self.assertEqual(run.script_flags(run.Job("resnet18", "dense", 1), s)[-1],
                         "--eval_limit=500")
        with self.assertRaisesRegex(run.UsageError, "unknown workload 'resnet'"):
            run.parse_extra(["resnet:--width=4"])

    def test_names(self):
        self.assertEqual(run.parse_names("all", run.CONFIGS, "config"), list(run.CONFIGS))
        self.assertEqual(run.parse_names("ddp,dense,ddp", run.CONFIGS, "config"),
                         ["ddp", "dense"])
        with self.assertRaisesRegex(run.UsageError, "unknown config 'topk5'"):
            run.parse_names("dense,topk5", run.CONFIGS, "config")
        with self.assertRaisesRegex(run.UsageError, "integers"):
            run.parse_seeds("1,x")
        jobs = run.grid(["resnet20", "lstm_lm"], ["dense", "ddp"], [1, 2])
        self.assertEqual(len(jobs), 8)
        self.assertEqual([j.key for j in jobs[:3]],
                         ["resnet20.dense.seed1", "resnet20.ddp.seed1", "lstm_lm.dense.seed1"])

    def run_main(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = run.main(argv)
            except SystemExit as e:
                code = e.code
        return code, out.getvalue(), err.getvalue()

    def test_usage_errors_exit_2(self):
        code, _, err = self.run_main(["--workloads=resnet", "--dry_run"])
        self.assertEqual(code, 2)
        self.assertIn("unknown workload 'resnet'", err)
        with tempfile.TemporaryDirectory() as tmp:
            code, _, err = self.run_main(["--workloads=resnet20", "--configs=topk1",
                                          f"--build={tmp}/nobuild", f"--out={tmp}/out"])
            self.assertEqual(code, 2)
            self.assertIn("nobuild/deploy/sieve does not exist", err)
            self.assertFalse(os.path.exists(f"{tmp}/out"))

    def test_dry_run_prints_every_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            code, out, _ = self.run_main(["--dry_run", f"--out={tmp}/out",
                                          f"--build={tmp}/nobuild"])
            self.assertEqual(code, 0)
            self.assertFalse(os.path.exists(f"{tmp}/out"))
        commands = [l for l in out.splitlines() if not l.startswith("#")]
        self.assertEqual(len(commands), 4 * 8 * 2)  # workloads x configs x seeds
        self.assertIn("# warning:", out)


class CollectTest(unittest.TestCase):
    def test_sieve_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = run.job_paths(run.Job("lstm_lm", "topk1", 1), run.Settings(out=tmp))
            os.makedirs(paths["summaries"])
            # rank 0 recorded perplexity and val_loss, not test_perplexity: from the status.
            worker0 = {"rank": 0, "rounds": 20, "bytes_up": 1000, "bytes_down": 3000,
                       "dense_bytes": 8000, "seconds": 4.5, "perplexity": 250.5,
                       "val_loss": 5.5234}
            worker1 = {"rank": 1, "rounds": 20, "bytes_up": 1200, "bytes_down": 3000,
                       "dense_bytes": 8000}
            for rank, s in enumerate((worker0, worker1)):
                with open(os.path.join(paths["summaries"], f"worker-{rank}.json"), "w") as f:
                    json.dump(s, f)
            with open(paths["status"], "w") as f:
                json.dump({"phase": "JOB_FINISHED", "failure": {"code": "OK", "message": ""},
                           "progress": {"round": "20", "bytes_pushed": "2200",
                                        "metrics": {"test_perplexity": 260.25}}}, f)
            got = run.collect_sieve(paths, run.WORKLOADS["lstm_lm"], 2)
        self.assertEqual(got["metrics"], {"perplexity": 250.5, "val_loss": 5.5234,
                                          "test_perplexity": 260.25})
        self.assertEqual(got["metrics_source"]["test_perplexity"], "status_file progress")
        self.assertEqual((got["bytes_pushed"], got["bytes_pulled"], got["dense_bytes"]),
                         (2200, 6000, 16000))
        self.assertAlmostEqual(got["bytes_ratio"], 2200 / 16000)
        self.assertEqual((got["steps"], got["job_phase"], got["job_failure"]),
                         (20, "JOB_FINISHED", None))

    def test_contraction_at_the_final_density(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = run.job_paths(run.Job("resnet20", "topk01", 1), run.Settings(out=tmp))
            os.makedirs(paths["run_dir"])
            self.assertIsNone(run.contraction_stats(paths["metrics"]))  # no file
            lines = [{"round": 0, "k": 400, "contraction": 0.5, "bound_1": 0.6, "bound_2": 0.36},
                     {"round": 50, "k": 100, "loss": 2.0},  # no ratio this round
                     {"round": 100, "k": 100, "contraction": 0.7, "bound_1": 0.9,
                      "bound_2": 0.81},
                     {"round": 150, "k": 100, "contraction": 0.9, "bound_1": 0.9,
                      "bound_2": 0.81}]
            with open(paths["metrics"], "w") as f:
                f.write("\n".join(json.dumps(m) for m in lines) + "\n{truncated\n")
            got = run.contraction_stats(paths["metrics"])
        # Only the rounds at the smallest k (after the warm-up) count.
        self.assertEqual((got["rounds"], got["k"]), (2, 100))
        self.assertAlmostEqual(got["mean"], 0.8)
        self.assertAlmostEqual(got["max"], 0.9)
        self.assertEqual((got["bound_1"], got["bound_2"]), (0.9, 0.81))
        self.assertAlmostEqual(got["above_bound_2"], 0.5)

    def test_sieve_without_summaries_uses_the_status(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = run.job_paths(run.Job("resnet20", "dense", 1), run.Settings(out=tmp))
            os.makedirs(paths["run_dir"])
            with open(paths["status"], "w") as f:
                json.dump({"phase": "JOB_FAILED", "failure": {"message": "worker 1 died"},
                           "progress": {"round": "7", "bytes_pushed": "123",
                                        "bytes_pulled": "456", "test_accuracy": 0.5}}, f)
            got = run.collect_sieve(paths, run.WORKLOADS["resnet20"], 2)
        self.assertEqual(got["metrics"], {"test_acc": 0.5})
        self.assertEqual((got["steps"], got["bytes_pushed"], got["bytes_pulled"]), (7, 123, 456))
        self.assertEqual(got["job_failure"], {"message": "worker 1 died"})

    def test_ddp_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = run.job_paths(run.Job("char_transformer", "ddp", 1), run.Settings(out=tmp))
            run.write_json(paths["ddp_result"], {"metrics": {"val_loss": 1.75}, "steps": 2000})
            got = run.collect_ddp(paths, run.WORKLOADS["char_transformer"])
            self.assertEqual((got["metrics"], got["steps"]), ({"val_loss": 1.75}, 2000))
            os.remove(paths["ddp_result"])
            self.assertEqual(run.collect_ddp(paths, run.WORKLOADS["char_transformer"])["metrics"],
                             {})


class TableTest(unittest.TestCase):
    def test_spread_and_difference(self):
        n, mean, std = run.spread([0.90, 0.92])
        self.assertEqual(n, 2)
        self.assertAlmostEqual(mean, 0.91)
        self.assertAlmostEqual(std, math.sqrt(2 * 0.01 ** 2))  # sample std: / (n - 1)
        self.assertEqual(run.spread([0.5]), (1, 0.5, None))
        self.assertEqual(run.spread([]), (0, None, None))
        self.assertAlmostEqual(run.difference("accuracy", 0.895, 0.91), -1.5)  # pp
        self.assertAlmostEqual(run.difference("perplexity", 126.0, 105.0), 20.0)  # %
        self.assertAlmostEqual(run.difference("loss", 1.23, 1.25), -0.02)  # nats
        self.assertIsNone(run.difference("loss", 1.0, None))

    def records(self):
        return [
            record("resnet20", "dense", 1, 0.90, wall_s=100.0, steps=50, bytes_pushed=4000,
                   bytes_ratio=1.0, contraction={"mean": 0.0, "bound_2": 0.0}),
            record("resnet20", "dense", 2, 0.92, wall_s=120.0, steps=50, bytes_pushed=4000,
                   bytes_ratio=1.0),
            record("resnet20", "topk01", 2, 0.90, bytes_pushed=30, bytes_ratio=0.0075,
                   contraction={"mean": 0.94, "bound_2": 0.998}),
            record("resnet20", "topk01", 1, 0.89, bytes_pushed=10, bytes_ratio=0.0025,
                   contraction={"mean": 0.96, "bound_2": 0.998}),
            record("resnet20", "gaussiank01", 1, None, ok=False),
            record("resnet20", "gaussiank01", 2, 0.88),
            record("resnet20", "compute", 1, 0.70, wall_s=40.0, steps=50),
            record("lstm_lm", "topk1", 1, 126.0),
            record("lstm_lm", "dense", 2, 110.0),
            record("lstm_lm", "dense", 1, 100.0),
            record("char_transformer", "ddp", 1, 1.22),
            record("char_transformer", "ddp", 2, 1.24),
            record("char_transformer", "dense", 1, 1.20),
            record("char_transformer", "dense", 2, 1.30),
        ]

    def test_summarize(self):
        tables = run.summarize(self.records())
        self.assertEqual(list(tables), ["resnet20", "lstm_lm", "char_transformer"])
        rows = {r["config"]: r for r in tables["resnet20"]["rows"]}
        self.assertEqual([r["config"] for r in tables["resnet20"]["rows"]],
                         ["dense", "topk01", "gaussiank01", "compute"])
        # The compute-only bound's model trained on 1/W of the data: its time only.
        compute = rows["compute"]
        self.assertEqual((compute["n"], compute["mean"], compute["diff"]), (1, None, None))
        self.assertAlmostEqual(compute["s_per_step"], 0.8)
        dense, topk, gk = rows["dense"], rows["topk01"], rows["gaussiank01"]
        self.assertAlmostEqual(dense["mean"], 0.91)
        self.assertIsNone(dense["diff"])
        self.assertAlmostEqual(dense["s_per_step"], (2.0 + 2.4) / 2)
        self.assertAlmostEqual(dense["wall_s"], 110.0)
        self.assertEqual(topk["seeds"], [1, 2])
        self.assertAlmostEqual(topk["mean"], 0.895)
        self.assertAlmostEqual(topk["std"], math.sqrt(2 * 0.005 ** 2))
        self.assertAlmostEqual(topk["diff"], -1.5)
        self.assertAlmostEqual(topk["bytes_pushed"], 20)
        self.assertAlmostEqual(topk["bytes_ratio"], 0.005)
        self.assertAlmostEqual(topk["contraction"], 0.95)
        self.assertAlmostEqual(topk["bound_2"], 0.998)
        self.assertIsNone(dense["contraction"])
        self.assertEqual((gk["n"], gk["seeds"], gk["failed"], gk["std"]), (1, [2], [1], None))
        self.assertAlmostEqual(gk["diff"], -3.0)
        lstm = {r["config"]: r for r in tables["lstm_lm"]["rows"]}
        self.assertAlmostEqual(lstm["dense"]["mean"], 105.0)
        self.assertAlmostEqual(lstm["topk1"]["diff"], 20.0)
        ct = {r["config"]: r for r in tables["char_transformer"]["rows"]}
        self.assertAlmostEqual(ct["dense"]["mean"], 1.25)
        self.assertAlmostEqual(ct["ddp"]["diff"], -0.02)

    def test_markdown(self):
        text = run.markdown(run.summarize(self.records()))
        lines = text.splitlines()
        self.assertIn("### resnet20: final test_acc (higher is better)", lines)
        self.assertIn("| dense | 1, 2 | 91.00 % ± 1.41 pp | reference | 4.0 kB | 1.0000 | — "
                      "| 1.8 min | 2.200 | — |", lines)
        self.assertIn("| topk01 | 1, 2 | 89.50 % ± 0.71 pp | −1.50 pp | 20 B | 0.0050 "
                      "| 0.9500 / 0.9980 | — | — | — |", lines)
        self.assertIn("| gaussiank01 | 2 | 88.00 % | −3.00 pp | — | — | — | — | — | 1 |", lines)
        self.assertIn("| compute | 1 | — | — | — | — | — | 40.0 s | 0.800 | — |", lines)
        self.assertIn("| topk1 | 1 | 126.00 | +20.00 % | — | — | — | — | — | — |", lines)
        self.assertIn("| ddp | 1, 2 | 1.2300 ± 0.0141 | −0.0200 nats | — | — | — | — | — "
                      "| — |", lines)

    def test_write_summary_reads_the_job_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            for r in self.records():
                run.write_json(os.path.join(tmp, "jobs", f"{r['workload']}.{r['config']}."
                                                         f"seed{r['seed']}.json"), r)
            text = run.write_summary(tmp)
            self.assertIn("| topk01 | 1, 2 | 89.50 % ± 0.71 pp | −1.50 pp |", text)
            self.assertTrue(os.path.isfile(os.path.join(tmp, "summary.md")))
            with open(os.path.join(tmp, "summary.json")) as f:
                self.assertEqual(list(json.load(f)), ["resnet20", "lstm_lm", "char_transformer"])
        with self.assertRaisesRegex(run.UsageError, "is .* a grid's --out"):
            run.load_records("/nonexistent")


if __name__ == "__main__":
    unittest.main()
