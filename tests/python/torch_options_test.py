"""PythonTorchOptions: sieve.torch's frozen parameters, per-group settings, gradient clipping,
per-step density warm-up and record(**metrics), each in a job of 1 server without --model and
2 workers (tests/python/torch_options_worker.py, SGD at lr 0.1), checked against an independent
reference computed here from what the workers saved:
  - groups: D counts the trainable parameters only (69 = flat_size(model) = flat_size(opt) = the
    servers' shard; the frozen layer's 35 are not in it) and the frozen layer (weight decay 0.1,
    in a group with a trained weight) is bitwise unchanged after 20 steps on both workers. With
    constant gradients C_r (a linear loss) the embedding's group (sieve_density=1.0, no weight
    decay) follows plain SGD on the two workers' mean gradient bitwise each step: w' = w - (lr*C_0
    + lr*C_1) / 2 in float32 (each worker pushes fl(lr*C_r), the server sums the two pushes, an
    exact commutative float32 addition, and divides by 2). The two sparse groups are simulated
    here with per-group error feedback (r += lr*(C + wd*w); the top k_g = round(density_g * D_g)
    of the group's own slice; the server's mean): the same entries change each step, their values
    within 1e-5 relative (the simulation may round lr*g and r + lr*g separately where the C++
    fuses them). Every round pushed k = 10 + 4 + 21 pairs (metrics_out). Bad sieve_* keys,
    densities, warm-up and clip settings and a sparse embedding were refused (ValueError) before
    the worker connected; a parameter frozen or unfrozen after wrapping made step() raise.
  - frozen_sgd / frozen_adamw: the reported case (SGD momentum 0.9, weight decay 0.1; and AdamW
    with a stale .grad on the frozen layer): the frozen layer is bitwise unchanged after 20
    steps, D = the trainable count, the trainable weights changed, replicas equal the servers'.
  - clip_local / clip_dgc / clip_average: constant gradients of norm 10 (rank 0) and 0.3
    (rank 1), clip_norm = 1: rank 0's gradient is scaled to norm c / (|g| + 1e-6) * |g| with
    c = 1 (local), 1 / sqrt(2) (dgc) or sqrt(2) (average), rank 1's is left as is (bitwise); the weights follow the mean of the
    clipped updates (compressor none), within 1e-6 relative (torch computes the norm in float32,
    the reference in float64).
  - backup (a weight at top-k density 0.2, its bias at sieve_density=1.0; the server closes
    each round at one push, --late_pushes=return; rank 1 is slow): rank 1's late pairs come back
    (missed_slices > 0) and go on in its groups' residuals: on each worker the final residual is
    (rounds trained) * lr * C - pushed + returned, within 1e-5 relative; replicas equal the
    server's.
  - misc (a Linear(100, 10), D = 1010): without steps_per_epoch the workers print progress
    lines (epochs and rounds 0); density_warmup_steps=4 pushes k = round(0.1 ** (t / 4) * D) in
    round t < 4 (all D in round 0), then round(0.1 * D); record(perplexity=...) is in the
    worker's summary (exactly); bad record() calls raise; torch.save of one parameter writes the whole flat
    buffer, of clones only their own values.

usage: torch_options_test.py BUILD_DIR
"""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import torch  # noqa: E402

import sieve  # noqa: E402

LR = 0.1
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_options_worker.py")


def run_job(test, scenario, server_flags=()):
    """Runs a scenario's two workers against 1 server; returns ({rank: saved dict}, cluster)."""
    c = cluster.Cluster(BUILD, num_servers=1, num_workers=2,
                        server_flags=["--dump_shard=shard-{rank}.bin", *server_flags])
    try:
        for rank in (0, 1):
            c.start_worker(rank, [sys.executable, WORKER, scenario, c.dir], env_only=True)
        codes = c.wait()
    finally:
        c.kill()
    test.assertEqual(set(codes.values()), {0}, f"{codes}\n{c.logs()}")
    return {r: torch.load(os.path.join(c.dir, f"{scenario}-{r}.pt")) for r in (0, 1)}, c


def simulate_sparse(w, residuals, grads, wd, k):
    """One round of a sparse group on both workers: r += lr*(C + wd*w) (float32), the top k of
    |r| pushed and zeroed; returns the servers' new w (the pushes' per-index sum / 2)."""
    total = torch.zeros_like(w)
    for r in (0, 1):
        g = torch.add(grads[r], w, alpha=wd) if wd else grads[r]
        residuals[r] += LR * g
        idx = torch.topk(residuals[r].abs(), k).indices
        total[idx] += residuals[r][idx]
        residuals[r][idx] = 0
    return w - total / 2


class PythonTorchOptions(unittest.TestCase):
    def test_groups_frozen_and_dense_group(self):
        saved, c = run_job(self, "groups")
        a, b = saved[0], saved[1]
        d = 5 * 8 + 8 + 7 * 3
        for r in (0, 1):
            s = saved[r]
            self.assertEqual((s["d"], s["num_params"], s["flat_size"], s["flat_size_opt"]),
                             (d, d, d, d))
            self.assertEqual(s["parts"], [(0, 0, 40), (1, 40, 8), (2, 48, 21)])
            for before, after in zip(s["frozen_before"], s["frozen_after"]):
                self.assertTrue(torch.equal(before, after), f"rank {r}: the frozen layer changed")
        cluster.check_replicas(self, c.dir, 1, 2, d)
        # Each rank kept its own frozen layer (not synchronized, as buffers).
        self.assertFalse(torch.equal(a["frozen_before"][0], b["frozen_before"][0]))
        self.assertTrue(torch.equal(a["init"], b["init"]))
        grads = {r: a["grads"][r] for r in (0, 1)}
        for r in (0, 1):
            for name in grads[r]:
                self.assertTrue(torch.equal(a["grads"][r][name], b["grads"][r][name]))
        flat = {r: torch.cat([grads[r][n].reshape(-1) for n in ("body.weight", "body.bias",
                                                                 "emb.weight")]) for r in (0, 1)}
        slices = {"body.weight": slice(0, 40), "body.bias": slice(40, 48),
                  "emb.weight": slice(48, 69)}
        residuals = {name: {r: torch.zeros(slices[name].stop - slices[name].start)
                            for r in (0, 1)} for name in ("body.weight", "body.bias")}
        worst = 0.0
        for t, (got_a, got_b) in enumerate(zip(a["steps"], b["steps"])):
            self.assertTrue(torch.equal(got_a, got_b), f"step {t}: the replicas differ")
            # The dense group: plain SGD on the mean gradient, bitwise, from the replica's
            # weights before the step.
            before = a["init"] if t == 0 else a["steps"][t - 1]
            sl = slices["emb.weight"]
            want = before[sl] - (LR * flat[0][sl] + LR * flat[1][sl]) / 2
            self.assertTrue(torch.equal(got_a[sl], want),
                            f"step {t}: the dense group is not plain SGD: "
                            f"{(got_a[sl] - want).abs().max()}")
            # The sparse groups, simulated from the same weights.
            for name, wd, k in (("body.weight", 0.1, 10), ("body.bias", 0.0, 4)):
                sl = slices[name]
                want = simulate_sparse(before[sl], residuals[name],
                                       {r: flat[r][sl] for r in (0, 1)}, wd, k)
                changed = got_a[sl] != before[sl]
                self.assertTrue(torch.equal(changed, want != before[sl]),
                                f"step {t}: {name}: other entries changed than the simulation's")
                rel = ((got_a[sl] - want).abs() / want.abs().clamp(min=1e-30)).max().item()
                worst = max(worst, rel)
                self.assertLessEqual(rel, 1e-5, f"step {t}: {name}")
        print(f"groups: 20 steps, the dense group bitwise plain SGD, the sparse groups within "
              f"{worst:.3g} relative of the simulation; frozen layers unchanged")
        for r in (0, 1):
            m = cluster.read_jsonl(os.path.join(c.dir, f"metrics-{r}.jsonl"))
            self.assertEqual([x["round"] for x in m], list(range(20)))
            self.assertEqual({(x["k"], x["selected"]) for x in m}, {(35, 35)})

    def check_frozen(self, scenario):
        saved, c = run_job(self, scenario)
        d = 16 * 4 + 4
        for r in (0, 1):
            s = saved[r]
            self.assertEqual((s["d"], s["num_params"], s["flat_size"]), (d, d, d))
            for before, after in zip(s["frozen_before"], s["frozen_after"]):
                self.assertTrue(torch.equal(before, after), f"rank {r}: the frozen layer changed")
            self.assertFalse(torch.equal(s["init"], s["final"]))  # it trained
        cluster.check_replicas(self, c.dir, 1, 2, d)

    def test_frozen_layer_sgd_weight_decay(self):
        self.check_frozen("frozen_sgd")

    def test_frozen_layer_adamw_stale_grad(self):
        self.check_frozen("frozen_adamw")

    def check_clip(self, mode):
        saved, _ = run_job(self, f"clip_{mode}")
        a = saved[0]
        threshold = {"local": 1.0, "dgc": 1.0 / math.sqrt(2), "average": math.sqrt(2)}[mode]
        clipped = {}
        for r in (0, 1):
            g = torch.cat([a["grads"][r][n].reshape(-1) for n in ("weight", "bias")])
            norm = g.double().norm().item()
            coef = min(1.0, threshold / (norm + 1e-6))
            clipped[r] = (g.double() * coef).float()
            got = saved[r]["clipped"]
            for t in range(3):
                if coef == 1.0:  # not clipped: .grad is the gradient as backward() made it
                    self.assertTrue(torch.equal(got[t], g), f"rank {r} step {t}")
                else:
                    self.assertTrue(torch.allclose(got[t], clipped[r], rtol=1e-6, atol=0),
                                    f"rank {r} step {t}: {got[t]} vs {clipped[r]}")
                    self.assertAlmostEqual(got[t].double().norm().item(), threshold, delta=1e-6)
            print(f"clip {mode}: rank {r} gradient norm {norm:.4f} -> "
                  f"{got[0].double().norm().item():.6f} (threshold {threshold:.6f})")
        w = a["init"].double()
        for t in range(3):
            w = w - (LR * clipped[0].double() + LR * clipped[1].double()) / 2
            self.assertTrue(torch.equal(a["steps"][t], saved[1]["steps"][t]))
            self.assertTrue(torch.allclose(a["steps"][t].double(), w, rtol=1e-6, atol=1e-7),
                            f"step {t}: {(a['steps'][t].double() - w).abs().max()}")

    def test_clip_local(self):
        self.check_clip("local")

    def test_clip_dgc(self):
        self.check_clip("dgc")

    def test_clip_average(self):
        self.check_clip("average")

    def test_groups_under_backup_workers_lose_nothing(self):
        saved, c = run_job(self, "backup", ["--consistency=bsp", "--backup_workers=1",
                                            "--late_pushes=return"])
        self.assertGreater(saved[1]["missed_slices"], 0, c.logs())
        for r in (0, 1):
            s = saved[r]
            # r_final = (rounds trained) * u - pushed + returned: nothing lost, nothing doubled.
            added = s["trained"] * s["update"].double().sum().item()
            kept = s["pushed_sum"] - s["returned_sum"] + s["residual"].double().sum().item()
            print(f"backup: rank {r} trained {s['trained']} rounds, added {added:.6f}, pushed "
                  f"{s['pushed_sum']:.6f}, returned {s['returned_sum']:.6f}, residual "
                  f"{s['residual'].double().sum().item():.6f}")
            self.assertAlmostEqual(added, kept, delta=1e-5 * added)
        self.assertGreater(saved[1]["returned_sum"], 1e-3 * saved[1]["pushed_sum"])
        cluster.check_replicas(self, c.dir, 1, 2, 6 * 5 + 5)

    def test_record_progress_and_step_warmup(self):
        saved, c = run_job(self, "misc")
        d = 100 * 10 + 10
        want_k = [sieve.k_for_density(0.1 ** (t / 4), d) for t in range(4)] + \
            [sieve.k_for_density(0.1, d)] * 2
        self.assertEqual(want_k, [1010, 568, 319, 180, 101, 101])  # dense first, then falling
        for r in (0, 1):
            m = cluster.read_jsonl(os.path.join(c.dir, f"metrics-{r}.jsonl"))
            self.assertEqual([x["k"] for x in m], want_k, f"rank {r}")
            self.assertEqual([x["selected"] for x in m], want_k, f"rank {r}")
            log = c.log(f"worker-{r}")
            progress = [l for l in log.splitlines() if l.startswith("progress: ")]
            self.assertTrue(progress, log[-2000:])
            self.assertTrue(all(l.startswith("progress: epoch 0/0 round ") for l in progress),
                            progress)
            summary = c.summary(f"worker-{r}")
            self.assertIsNotNone(summary, log[-2000:])
            self.assertEqual(summary["perplexity"], saved[r]["perplexity"])
            sizes = saved[r]["sizes"]
            self.assertGreaterEqual(sizes["bias"], 4 * d)  # the whole flat buffer
            self.assertLess(sizes["bias_clone"], 4 * d)
            # The whole model's state_dict writes the buffer once (not once per view).
            self.assertLess(sizes["state_dict"], 2 * 4 * d)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
