#!/usr/bin/env python3
"""Unit tests of `sieve compare`'s pure parts (deploy/local/compare/, no daemons): the table's
aggregation (mean ± sample std, time to target, deltas against the BSP dense cell, staleness)
against hand-computed values, a run's summary read back from the servers' and workers' summary
files (--summary_out, faked here), the cache key, the config check and the flag check.
Exit 77 (skipped) when python3-yaml is missing (scripts/setup installs it)."""
import contextlib
import io
import json
import math
import os
import sys
import tempfile
import unittest

try:
    import yaml  # noqa: F401  (compare.config imports it)
except ImportError:
    print("SKIPPED: python3-yaml missing (run scripts/setup)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "deploy", "local"))
from compare import config, plots, runner, table  # noqa: E402


def cell(consistency, compressor, workers=4, link="local", straggler="none"):
    c = {"consistency": consistency, "compressor": compressor,
         "density": 1.0 if compressor == "none" else 0.001, "workers": workers, "link": link,
         "straggler": straggler}
    c["id"] = "%s-%s-d%s-w%d-%s" % (consistency, compressor, config.fmt_density(c["density"]),
                                   workers, link)
    return c


def run_summary(c, seed, status="ok", **values):
    s = {k: c[k] for k in config.GRID_KEYS}
    s.update({"run": f"{c['id']}-seed{seed}", "cell": c["id"], "seed": seed, "status": status})
    s.update(values)
    return s


def touch(path):
    with open(path, "w") as f:
        f.write("{}")


def write_summary(cell_dir, role, rank, **fields):
    """A run's end-of-run summary file as a server or worker writes it (--summary_out, here
    runner.summary_pattern), with these fields."""
    with open(runner.summary_pattern(cell_dir).format(role=role, rank=rank), "w") as f:
        json.dump(dict(rank=rank, **fields), f)


def exit_code_and_stderr(fn, *args):
    """The exit status and stderr `sieve compare` ends with when fn(*args) raises the library's
    config.ConfigError (its main() prints each message as below); (None, stderr) otherwise."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            fn(*args)
        except config.ConfigError as e:
            for message in e.messages:
                print("sieve compare: " + message, file=sys.stderr)
            return e.exit_status, err.getvalue()
    return None, err.getvalue()


class AggregateTest(unittest.TestCase):
    def setUp(self):
        self.dense = cell("bsp", "none")
        self.asp = cell("asp", "topk")
        self.other = cell("bsp", "none", workers=2)  # another group: not asp's baseline
        self.runs = [
            run_summary(self.dense, 1, test_acc=0.80, train_s=10.0, time_to_target_s=None),
            run_summary(self.dense, 2, test_acc=0.84, train_s=14.0, time_to_target_s=None),
            run_summary(self.asp, 1, test_acc=0.85, train_s=6.0, time_to_target_s=4.0,
                        max_staleness=3, mean_staleness=0.5),
            run_summary(self.asp, 2, test_acc=0.87, train_s=6.0, time_to_target_s=5.0,
                        max_staleness=5, mean_staleness=0.7),
            run_summary(self.asp, 3, test_acc=0.83, train_s=9.0, time_to_target_s=None,
                        max_staleness=2, mean_staleness=0.9),
            run_summary(self.asp, 4, status="failed(1)", test_acc=0.10, train_s=1.0),
            run_summary(self.other, 1, test_acc=0.50, train_s=1.0),
        ]
        self.rows = {r["cell"]: r for r in table.aggregate([self.dense, self.asp, self.other],
                                                        self.runs, 0.85)}

    def test_mean_and_sample_std_over_finished_runs(self):
        d = self.rows[self.dense["id"]]
        self.assertEqual((d["runs"], d["runs_ok"], d["status"]), (2, 2, "ok"))
        self.assertAlmostEqual(d["test_acc"], 0.82)
        self.assertAlmostEqual(d["test_acc_std"], math.sqrt(2 * 0.02 ** 2 / 1))
        self.assertAlmostEqual(d["train_s"], 12.0)
        self.assertAlmostEqual(d["train_s_std"], math.sqrt(8.0))
        a = self.rows[self.asp["id"]]  # the failed run counts in runs, not in the means
        self.assertEqual((a["runs"], a["runs_ok"], a["status"]), (4, 3, "failed(1 of 4)"))
        self.assertAlmostEqual(a["test_acc"], 0.85)
        self.assertAlmostEqual(a["test_acc_std"], 0.02)
        self.assertAlmostEqual(a["train_s"], 7.0)
        self.assertAlmostEqual(a["train_s_std"], math.sqrt(3.0))

    def test_time_to_target_over_the_runs_that_reached_it(self):
        a = self.rows[self.asp["id"]]
        self.assertEqual(a["target_reached"], 2)
        self.assertAlmostEqual(a["time_to_target_s"], 4.5)
        self.assertAlmostEqual(a["time_to_target_s_std"], math.sqrt(0.5))
        md = table.md_row(a)
        self.assertEqual(md[5], "4.5 ± 0.7 (2 of 3)")
        self.assertEqual(table.md_row(self.rows[self.dense["id"]])[5], "not reached")

    def test_deltas_against_the_bsp_dense_cell_of_the_same_group(self):
        a = self.rows[self.asp["id"]]
        self.assertEqual(a["base_cell"], self.dense["id"])
        self.assertAlmostEqual(a["acc_delta_vs_base"], 0.03)
        self.assertAlmostEqual(a["time_ratio_vs_base"], 7.0 / 12.0)
        md = table.md_row(a)
        self.assertEqual(md[3], "0.8500 ± 0.0200")
        self.assertEqual(md[4], "+3.00 pp")
        self.assertEqual(md[7], "0.58×")
        self.assertEqual(self.rows[self.other["id"]]["base_cell"], self.other["id"])

    def test_staleness_max_of_maxima_mean_of_means(self):
        a = self.rows[self.asp["id"]]
        self.assertEqual(a["max_staleness"], 5)
        self.assertAlmostEqual(a["mean_staleness"], 0.7)
        self.assertEqual(table.md_row(a)[9], "5 / 0.7")
        self.assertEqual(table.md_row(self.rows[self.dense["id"]])[9], "-")

    def test_near_chance_is_flagged(self):
        c = cell("bsp", "topk")
        runs = [run_summary(c, 1, test_acc=0.11, near_chance=True),
                run_summary(c, 2, test_acc=0.85, near_chance=False)]
        rows = table.aggregate([c], runs, 0.85)
        self.assertEqual(rows[0]["status"], "ok, near chance (1 of 2)")
        with tempfile.TemporaryDirectory() as d:  # from worker 0's summary
            run = config.runs_of({"name": "x"}, [c])[0]
            write_summary(d, "worker", 1, test_acc=0.1, near_chance=1)
            self.assertFalse(runner.summarize(run, d, 0, 1.0, 0.85)["near_chance"])
            write_summary(d, "worker", 0, test_acc=0.1, near_chance=1)
            s = runner.summarize(run, d, 0, 1.0, 0.85)
            self.assertTrue(s["near_chance"])
            self.assertEqual(s["test_acc"], 0.1)
            write_summary(d, "worker", 0, test_acc=0.85)  # near_chance is there only when 1
            self.assertFalse(runner.summarize(run, d, 0, 1.0, 0.85)["near_chance"])


class MetricsTest(unittest.TestCase):
    ROWS = [
        {"round": 0, "epoch": 0, "loss": 2.0, "t_compute": 1, "t_select": 0, "t_comm": 1},
        {"round": 9, "epoch": 0, "loss": 1.0, "test_acc": 0.70, "t_wall": 5.0},
        {"round": 19, "epoch": 1, "loss": 0.5, "test_acc": 0.86, "t_wall": 11.0},
        {"round": 29, "epoch": 2, "loss": 0.4, "test_acc": 0.90, "t_wall": 16.0},
    ]

    def test_time_to_target_is_the_first_evaluation_at_or_above_it(self):
        self.assertEqual(runner.time_to_target(self.ROWS, 0.85), 11.0)
        self.assertEqual(runner.time_to_target(self.ROWS, 0.86), 11.0)
        self.assertEqual(runner.time_to_target(self.ROWS, 0.70), 5.0)
        self.assertIsNone(runner.time_to_target(self.ROWS, 0.95))

    def test_wall_times_fall_back_to_summed_round_times(self):
        old = [{"t_compute": 1.0, "t_select": 0.5, "t_comm": 0.5}, {"t_compute": 2.0}]
        self.assertEqual(runner.wall_times(old), [2.0, 4.0])
        self.assertEqual(runner.wall_times(self.ROWS)[1:], [5.0, 11.0, 16.0])

    def test_staleness_from_server_summaries(self):
        with tempfile.TemporaryDirectory() as d:
            write_summary(d, "server", 0, lo=0, hi=5, max_staleness=3, staleness_sum=10,
                          released=20, pushed_sum=1.0)
            write_summary(d, "worker", 0, rounds=30, seconds=16.5)
            write_summary(d, "server", 1, lo=5, hi=9, max_staleness=5, staleness_sum=30,
                          released=20, pushed_sum=1.0)
            with open(os.path.join(d, "log.txt"), "w") as f:  # logs are not read
                f.write("[server 2] rank=2 max_staleness=9\n")
            servers = runner.summaries(d, "server")
            self.assertEqual(sorted(servers), [0, 1])
            self.assertEqual(runner.staleness(servers), (5, 1.0))
            self.assertEqual(runner.summaries(d, "worker")[0]["seconds"], 16.5)
            run = config.runs_of({"name": "x"}, [cell("asp", "topk")])[0]
            s = runner.summarize(run, d, 0, 20.0, 0.85)
            self.assertEqual((s["train_s"], s["max_staleness"], s["mean_staleness"]),
                             (16.5, 5, 1.0))
        # BSP: every server reports max_staleness 0 and releases nothing.
        bsp = {0: {"max_staleness": 0, "staleness_sum": 0, "released": 0}}
        self.assertEqual(runner.staleness(bsp), (0, None))

    def test_runs_write_their_summaries_into_their_directory(self):
        cfg = {"name": "t", "flags": {"model": "synthetic"}}
        run = config.runs_of(cfg, [cell("bsp", "topk")])[0]
        cmd = runner.run_command(cfg, run, "/x/cells/c", "/b", "/r")
        self.assertIn("--summary_out=/x/cells/c/summary-{role}-{rank}.json", cmd)
        # Where the summaries go does not define the run: the same key from another directory.
        self.assertNotIn("summary_out", runner.key_inputs(cfg, run, "/x", {})["flags"])

    def test_accuracy_points_and_their_mean_over_seeds(self):
        pts = plots.accuracy_points(self.ROWS)
        self.assertEqual(pts, [(5.0, 1, 0.70), (11.0, 2, 0.86), (16.0, 3, 0.90)])
        other = [(7.0, 1, 0.80), (13.0, 2, 0.90)]
        mean = plots.mean_curve([pts, other])
        self.assertEqual(len(mean), 2)
        for got, want in zip(mean, [(6.0, 1, 0.75), (12.0, 2, 0.88)]):
            for g, w in zip(got, want):
                self.assertAlmostEqual(g, w)
        self.assertEqual(plots.mean_curve([]), [])

    def test_smoothing_is_a_trailing_moving_average(self):
        self.assertEqual(plots.smooth([1.0, 2.0, 3.0, 4.0], 2), [1.0, 1.5, 2.5, 3.5])
        self.assertEqual(plots.smooth([1.0, 3.0], 1), [1.0, 3.0])

    def test_metrics_tail_reads_only_complete_new_lines(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics-0.jsonl")
            tail = runner.MetricsTail(path)
            tail.poll()  # no file yet
            self.assertIsNone(tail.last)
            with open(path, "w") as f:
                f.write('{"round": 0, "epoch": 0, "loss": 2.0, "test_acc": 0.5}\n{"round": 1,')
            tail.poll()
            self.assertEqual((tail.last["round"], tail.last_acc), (0, 0.5))
            with open(path, "a") as f:
                f.write(' "epoch": 0, "loss": 1.5, "test_acc": null}\n')
            tail.poll()
            self.assertEqual((tail.last["round"], tail.last["loss"], tail.last_acc), (1, 1.5, 0.5))

    def test_deferred_evaluation_rows_are_read_in_round_order(self):
        # --eval_deferred: rounds 1 and 3 were evaluated after the last round (4), each row
        # with its own round's t_wall.
        lines = ['{"round": 0, "epoch": 0, "loss": 2.0, "test_acc": null, "t_wall": 1.0}',
                 '{"round": 2, "epoch": 0, "loss": 1.5, "test_acc": null, "t_wall": 3.0}',
                 '{"round": 4, "epoch": 1, "loss": 1.0, "test_acc": 0.9, "t_wall": 5.0}',
                 '{"round": 1, "epoch": 0, "loss": 1.8, "test_acc": 0.6, "t_wall": 2.0}',
                 '{"round": 3, "epoch": 1, "loss": 1.2, "test_acc": 0.85, "t_wall": 4.0}']
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics-0.jsonl")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            rows = runner.read_metrics(path)
            self.assertEqual([r["round"] for r in rows], [0, 1, 2, 3, 4])
            self.assertEqual(runner.time_to_target(rows, 0.84), 4.0)
            tail = runner.MetricsTail(path)
            tail.poll()
            self.assertEqual((tail.last["round"], tail.last_acc), (4, 0.9))

    def test_progress_line(self):
        self.assertEqual(runner.progress_line("[1/2] x", None, None, 3, 4.2),
                         "sieve compare: [1/2] x: starting (4 s)")
        self.assertEqual(runner.progress_line("[1/2] x", self.ROWS[2], 0.86, 3, 12.0),
                         "sieve compare: [1/2] x: epoch 2/3, round 20, loss 0.5, "
                         "test_acc 0.8600 (12 s)")


class CacheKeyTest(unittest.TestCase):
    CFG = {"name": "t", "servers": 1, "flags": {"model": "synthetic", "epochs": 2, "lr": 0.1}}
    PROGRAMS = {"sieve": "a", "sieve-worker": "b"}

    def inputs(self, cfg, programs=None, cell_dir="/x/cells/c"):
        run = config.runs_of(cfg, [cell("bsp", "topk")])[0]
        return runner.key_inputs(cfg, run, cell_dir, programs or self.PROGRAMS)

    def finished(self, d, inputs):
        runner.write_key(d, inputs)
        touch(os.path.join(d, "cell.json"))

    def test_unchanged_run_is_reused_anywhere(self):
        with tempfile.TemporaryDirectory() as d:
            self.finished(d, self.inputs(self.CFG))
            self.assertEqual(runner.reusable(d, self.inputs(self.CFG, cell_dir="/moved/c")),
                             (True, None))

    def test_changed_flag_reruns_and_says_what_changed(self):
        with tempfile.TemporaryDirectory() as d:
            self.finished(d, self.inputs(self.CFG))
            cfg = dict(self.CFG, flags={"model": "synthetic", "epochs": 1, "lr": 0.05})
            ok, why = runner.reusable(d, self.inputs(cfg))
            self.assertFalse(ok)
            self.assertEqual(why, "changed: --epochs 2 -> 1; --lr 0.1 -> 0.05")

    def test_other_grid_settings_rebuilt_programs_and_repeats_change_the_key(self):
        base = runner.cache_key(self.inputs(self.CFG))
        self.assertNotEqual(base, runner.cache_key(self.inputs(dict(self.CFG, servers=2))))
        self.assertNotEqual(base, runner.cache_key(self.inputs(dict(self.CFG, contraction_every=5))))
        rebuilt = self.inputs(self.CFG, programs={"sieve": "a", "sieve-worker": "c"})
        self.assertNotEqual(base, runner.cache_key(rebuilt))
        self.assertEqual(runner.key_changes(self.inputs(self.CFG), rebuilt), ["rebuilt sieve-worker"])
        seeded = config.runs_of(dict(self.CFG, repeats=2), [cell("bsp", "topk")])
        self.assertEqual([r["seed"] for r in seeded], [1, 2])
        self.assertEqual(seeded[1]["id"], "bsp-topk-d0.001-w4-local-seed2")

    def test_unfinished_or_keyless_runs_rerun(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(runner.reusable(d, self.inputs(self.CFG)), (False, None))
            touch(os.path.join(d, "cell.json"))
            ok, why = runner.reusable(d, self.inputs(self.CFG))
            self.assertFalse(ok)
            self.assertIn("no cache key", why)


class ConfigAndFlagCheckTest(unittest.TestCase):
    def test_unknown_top_level_key_exits_2_and_suggests(self):
        code, err = exit_code_and_stderr(config.check_config, {"name": "x", "repeat": 3}, "g.yaml")
        self.assertEqual(code, 2)
        self.assertIn("unknown key 'repeat'", err)
        self.assertIn("did you mean 'repeats'", err)

    def test_bad_values_exit_2(self):
        for bad in ({"repeats": 0}, {"target_accuracy": 1.5}, {"grid": {"worker": [2]}}):
            code, _ = exit_code_and_stderr(config.check_config, dict({"name": "x"}, **bad), "g")
            self.assertEqual(code, 2, bad)
        self.assertEqual(config.check_config({"name": "x", "repeats": 3}, "g")["repeats"], 3)

    def test_helpxml_parse(self):
        xml = ("<?xml version=\"1.0\"?><AllFlags><program>sieve-worker</program>"
               "<flag><file>a.cc</file><name>epochs</name><meaning>m</meaning>"
               "<default>10</default><current>10</current><type>int32</type></flag>"
               "<flag><file>a.cc</file><name>lr</name><meaning>m</meaning>"
               "<default>0.1</default><current>0.1</current><type>double</type></flag>"
               "</AllFlags>")
        self.assertEqual(config.parse_helpxml(xml), {"epochs": "int32", "lr": "double"})

    def test_flags_no_daemon_defines_or_of_the_wrong_type(self):
        known = {"sieve-server": {"density": "double", "seed": "uint64"},
                 "sieve-worker": {"density": "double", "epochs": "int32", "ef": "bool"}}
        ok = {"density": 0.1, "epochs": 3, "ef": True, "seed": 2}
        self.assertEqual(config.flag_errors("c1", ok, known), [])
        errors = config.flag_errors("c1", {"desnity": 0.1, "epochs": "two", "seed": -1, "ef": "maybe"},
                                known)
        self.assertEqual(errors, [
            "cell c1: flag --desnity is not defined by any daemon (sieve-server, sieve-worker)"
            " (did you mean 'density'?)",
            "cell c1: --epochs=two is not a valid int32 (for sieve-worker)",
            "cell c1: --seed=-1 is not a valid uint64 (for sieve-server)",
            "cell c1: --ef=maybe is not a valid bool (for sieve-worker)"])


class HeterogeneityAxesTest(unittest.TestCase):
    """The straggler and per-worker link axes, and ssp:N."""
    CFG = {"name": "s", "flags": {"model": "synthetic"},
           "grid": {"consistency": ["bsp", "ssp:2", "asp"], "compressor": ["none"],
                    "workers": [4], "link": ["1gbit", "1gbit,3:100mbit"],
                    "straggler": ["none", "3:x3"]}}

    def test_cells_ids_and_flags(self):
        cells = config.cells_of(self.CFG)
        self.assertEqual(len(cells), 12)
        ids = [c["id"] for c in cells]
        self.assertIn("ssp2-none-d1-w4-1gbit+w3_100mbit-sw3_x3", ids)
        self.assertIn("bsp-none-d1-w4-1gbit", ids)  # no straggler: no -s part
        c = next(c for c in cells if c["id"] == "ssp2-none-d1-w4-1gbit+w3_100mbit-sw3_x3")
        run = config.runs_of(self.CFG, [c])[0]
        flags = config.run_flags(self.CFG, run, "/x")
        self.assertEqual((flags["consistency"], flags["staleness"], flags["straggler"]),
                         ("ssp", 2, "3:x3"))
        cmd = runner.run_command(self.CFG, run, "/x", "/b", "/r")
        self.assertIn("--link=1gbit,3:100mbit", cmd)
        plain = config.run_flags(self.CFG, config.runs_of(self.CFG, [cells[0]])[0], "/x")
        self.assertNotIn("straggler", plain)
        self.assertNotIn("staleness", plain)
        self.assertEqual(config.id_part("3:delay:5ms,exp:2ms"), "w3_delay5ms+exp2ms")
        # exclude: the slow link and the straggler together are left out (3 scenarios, not 4).
        cfg = dict(self.CFG, exclude=[{"link": "1gbit,3:100mbit", "straggler": "3:x3"}])
        left = [c["id"] for c in config.cells_of(cfg)]
        self.assertEqual(len(left), 9)
        self.assertNotIn("ssp2-none-d1-w4-1gbit+w3_100mbit-sw3_x3", left)
        self.assertIn("ssp2-none-d1-w4-1gbit-sw3_x3", left)

    def test_tcp_cc_goes_to_netns_runs_and_into_their_key(self):
        """tcp_cc: netns/run gets --tcp_cc; a netns run's key holds the congestion control (the
        configured one, else the kernel's default read from /proc), a loopback run's none; a
        name the kernel lacks exits 2 naming it."""
        cells = config.cells_of(self.CFG)
        net = config.runs_of(self.CFG, [cells[0]])[0]
        self.assertNotIn("--tcp_cc", " ".join(runner.run_command(self.CFG, net, "/x", "/b", "/r")))
        default = runner.key_inputs(self.CFG, net, "/x", {})["launcher"]["tcp_cc"]
        self.assertEqual(default, "default:" + " ".join(config.read_words(config.DEFAULT_CC)))
        cfg = dict(self.CFG, tcp_cc="reno")
        self.assertEqual(config.check_config(cfg, "g")["tcp_cc"], "reno")
        self.assertIn("--tcp_cc=reno", runner.run_command(cfg, net, "/x", "/b", "/r"))
        self.assertEqual(runner.key_inputs(cfg, net, "/x", {})["launcher"]["tcp_cc"], "reno")
        local = dict(self.CFG, grid=dict(self.CFG["grid"], link=["local"]))
        run = config.runs_of(local, [config.cells_of(local)[0]])[0]
        self.assertNotIn("tcp_cc", runner.key_inputs(local, run, "/x", {})["launcher"])
        code, err = exit_code_and_stderr(config.check_config, dict(self.CFG, tcp_cc="nonesuch"),
                                         "g")
        self.assertEqual(code, 2)
        self.assertIn("'nonesuch' is not a TCP congestion control this kernel has", err)

    def test_upload_queue_goes_to_netns_runs_and_into_their_key(self):
        """upload_queue: netns/run gets --upload_queue; a netns run's key holds the queue (the
        configured one, else netns/run's 100ms), a loopback run's none; a value that is neither a
        time nor host exits 2 naming it."""
        cells = config.cells_of(self.CFG)
        net = config.runs_of(self.CFG, [cells[0]])[0]
        plain = runner.run_command(self.CFG, net, "/x", "/b", "/r")
        self.assertNotIn("--upload_queue", " ".join(plain))
        self.assertEqual(runner.key_inputs(self.CFG, net, "/x", {})["launcher"]["upload_queue"],
                         "100ms")
        cfg = dict(self.CFG, upload_queue="host")
        self.assertEqual(config.check_config(cfg, "g")["upload_queue"], "host")
        self.assertIn("--upload_queue=host", runner.run_command(cfg, net, "/x", "/b", "/r"))
        self.assertNotEqual(runner.cache_key(runner.key_inputs(cfg, net, "/x", {})),
                            runner.cache_key(runner.key_inputs(self.CFG, net, "/x", {})))
        local = dict(cfg, grid=dict(self.CFG["grid"], link=["local"]))
        run = config.runs_of(local, [config.cells_of(local)[0]])[0]
        self.assertNotIn("upload_queue", runner.key_inputs(local, run, "/x", {})["launcher"])
        for bad in ("deep", 5, "100"):
            code, err = exit_code_and_stderr(config.check_config,
                                             dict(self.CFG, upload_queue=bad), "g")
            self.assertEqual(code, 2)
            self.assertIn(f"'upload_queue': {bad!r} is not a queue", err)

    @staticmethod
    def consistency_grid(name, consistencies, workers):
        """A synthetic top-k scenario whose grid varies the consistency over `consistencies`."""
        return {"name": name, "flags": {"model": "synthetic"},
                "grid": {"consistency": consistencies, "compressor": ["topk"],
                         "workers": [workers]}}

    def cells_and_flags(self, cfg, want_ids):
        """Checks that the cells of `cfg` have the ids `want_ids`; returns each one's run flags."""
        cells = config.cells_of(cfg)
        self.assertEqual([c["id"] for c in cells], want_ids)
        return [config.run_flags(cfg, config.runs_of(cfg, [c])[0], "/x") for c in cells]

    def assert_consistency_usage_errors(self, cfg, cases, flags, flags_says):
        """Each (consistency, message) of `cases` alone on the consistency axis of `cfg` is a usage
        error saying the message; so is `cfg` with `flags` added to its flags (flags_says)."""
        for bad, says in cases:
            bad_cfg = dict(cfg, grid=dict(cfg["grid"], consistency=[bad]))
            code, err = exit_code_and_stderr(config.check_config, bad_cfg, "grid.yaml")
            self.assertEqual(code, 2, bad)
            self.assertIn(says, err)
        both = dict(cfg, flags=dict(cfg["flags"], **flags))
        code, err = exit_code_and_stderr(config.check_config, both, "grid.yaml")
        self.assertEqual(code, 2)
        self.assertIn(flags_says, err)

    def test_staleness_lr_axis(self):
        """asp+inverse and ssp:N+inverse pass --staleness_lr=inverse; bsp+inverse, ssp+inverse
        with flags: staleness_lr, and a bound on asp are usage errors."""
        cfg = self.consistency_grid("s", ["asp", "asp+inverse", "ssp:2+inverse"], 2)
        flags = self.cells_and_flags(cfg, ["asp-topk-d0.001-w2-local",
                                           "aspinverse-topk-d0.001-w2-local",
                                           "ssp2inverse-topk-d0.001-w2-local"])
        self.assertNotIn("staleness_lr", flags[0])
        self.assertEqual((flags[1]["consistency"], flags[1]["staleness_lr"]), ("asp", "inverse"))
        self.assertNotIn("staleness", flags[1])
        self.assertEqual((flags[2]["consistency"], flags[2]["staleness"],
                          flags[2]["staleness_lr"]), ("ssp", 2, "inverse"))
        self.assert_consistency_usage_errors(
            cfg, [("bsp+inverse", "unknown consistency 'bsp+inverse'"),
                  ("asp:2", "unknown consistency 'asp:2'"),
                  ("asp+sqrt", "unknown consistency 'asp+sqrt'")],
            {"staleness_lr": "inverse"}, "'flags: staleness_lr' and a consistency ...+inverse")

    def test_backup_workers_axis(self):
        """bsp+backup:N passes --backup_workers=N; on asp/ssp, N >= workers, N = 0 and the same
        set in flags are usage errors."""
        cfg = self.consistency_grid("b", ["bsp", "bsp+backup:1", "bsp+backup:2+return"], 4)
        flags = self.cells_and_flags(cfg, ["bsp-topk-d0.001-w4-local",
                                           "bspbackup1-topk-d0.001-w4-local",
                                           "bspbackup2return-topk-d0.001-w4-local"])
        self.assertNotIn("backup_workers", flags[0])
        self.assertEqual((flags[1]["consistency"], flags[1]["backup_workers"]), ("bsp", 1))
        self.assertNotIn("late_pushes", flags[1])
        self.assertEqual((flags[2]["backup_workers"], flags[2]["late_pushes"]), (2, "return"))
        self.assert_consistency_usage_errors(
            cfg, [("asp+backup:1", "unknown consistency 'asp+backup:1'"),
                  ("bsp+backup:4", "needs 1 <= backup workers < the cell's 4 workers"),
                  ("bsp+backup:0", "needs 1 <= backup workers"),
                  ("bsp+return", "unknown consistency 'bsp+return'")],
            {"backup_workers": 1}, "'flags: backup_workers' and a consistency bsp+backup:N")

    def test_baseline_is_the_bsp_dense_cell_of_the_same_scenario(self):
        slow = cell("bsp", "none", straggler="3:x3")
        asp_slow = cell("asp", "topk", straggler="3:x3")
        fast = cell("bsp", "none")
        runs = [run_summary(slow, 1, test_acc=0.8, train_s=30.0),
                run_summary(fast, 1, test_acc=0.8, train_s=10.0),
                run_summary(asp_slow, 1, test_acc=0.8, train_s=15.0)]
        for c in (slow, asp_slow):
            c["id"] += "-s" + config.id_part(c["straggler"])
        for r, c in zip(runs, (slow, fast, asp_slow)):
            r["cell"] = c["id"]
        rows = {r["cell"]: r for r in table.aggregate([slow, fast, asp_slow], runs, 0.85)}
        self.assertEqual(rows[asp_slow["id"]]["base_cell"], slow["id"])
        self.assertAlmostEqual(rows[asp_slow["id"]]["time_ratio_vs_base"], 0.5)

    def test_bad_values_are_rejected_naming_them(self):
        cases = [
            ({"straggler": ["3:slow"]}, "unknown straggler spec 'slow' in '3:slow'"),
            ({"straggler": ["x0.5"]}, "unknown straggler spec 'x0.5'"),
            ({"straggler": ["4:x3"]},
             "straggler spec '4:x3' is for worker 4, but the cell has 4 workers"),
            ({"straggler": ["1:x3,1:x2"]}, "names worker 1 twice"),
            ({"link": ["1gbit,4:100mbit"]},
             "link rate '4:100mbit' is for worker 4, but the cell has 4 workers"),
            ({"link": ["1gbit,2:fast"]}, "unknown link rate 'fast'"),
            ({"link": ["local,1:1gbit"]}, "unknown link rate 'local'"),
            ({"consistency": ["ssp:x"]}, "unknown consistency 'ssp:x'"),
            ({"consistency": ["ssp:0"]}, "the staleness bound of 'ssp:0' must be >= 1"),
        ]
        for grid, message in cases:
            cfg = {"name": "x", "grid": dict({"workers": [4]}, **grid)}
            code, err = exit_code_and_stderr(config.check_config, cfg, "g.yaml")
            self.assertEqual(code, 2, grid)
            self.assertIn(message, err)
        for bad in ([{"linkk": "1gbit"}], {"link": "1gbit"}, [{}]):
            code, _ = exit_code_and_stderr(config.check_config, {"name": "x", "exclude": bad}, "g")
            self.assertEqual(code, 2, bad)
        both = {"name": "x", "flags": {"staleness": 3}, "grid": {"consistency": ["ssp:2"]}}
        self.assertEqual(exit_code_and_stderr(config.check_config, both, "g")[0], 2)
        self.assertEqual(config.check_config(self.CFG, "g"), self.CFG)


if __name__ == "__main__":
    unittest.main()
