"""PythonWrapperMatchesWorkerMath: sieve.torch.DistributedOptimizer pushes, round by round, the
pairs the update rule says, for 100 rounds of FNN-3 on Fashion-MNIST at top-k density 0.01.

The job: 1 server without --model (D and the initial weights from this worker), this process its
only worker. Beside the wrapper runs a reference sieve.ErrorFeedback(D) fed, each round, what the
rule computes from the same gradient (the parameters' .grad) and weights (those before
opt.step()); after each step the wrapper's selection (the pairs it pushed) must have the reference's
top-k indices and values within 1e-6 relative (the test prints whether they were bitwise equal),
and the replica must be the weights before the step with the pushed values subtracted at their
indices (the server's reply, one worker). Odd rounds use zero_grad(set_to_none=True); a torch
StepLR halves the learning rate every 40 rounds (the references follow); before round 45 the
optimizer's state_dict() goes through torch.save / torch.load into load_state_dict() (a
checkpoint's round trip must change no pair); every third round uses torch's closure form
(opt.step(closure)); after each step the parameters' .grad is still what backward() made (weight
decay is not added into it, as in torch), and the reference is fed that gradient.
  - SGD (lr 0.05, momentum 0.9, weight decay 1e-4), sieve-worker's rule (worker/trainer:
    g += wd*w; m = mu*m + g; r += lr*m; top-k of r, r and m zeroed there): as plain
    torch.optim.SGD (sieve.torch's fused path) and as a user's SGD subclass (the general path:
    the optimizer's own step() on zeroed weights, its momentum buffers masked where selected).
  - The same with two param groups whose learning rates differ in rounds 30-59 only (a LambdaLR
    per group): plain SGD's path changes from fused to general and back, and its momentum moves
    along (before the fix the pairs differed from round 30 on); the reference in torch.
  - Weight decay on the weight matrices only (two groups, one lr and momentum), as the workload
    scripts train: plain SGD keeps the fused path (the decay added per group) and pushes what
    the reference in torch computes.
  - SGD with compressor none (dense: every value pushed each round), plain and subclassed: the
    momentum is not masked (sieve-worker's ErrorFeedback leaves m alone when it selects all of
    r), so both paths push momentum SGD's update lr*m each round; masking it would make them
    plain SGD.
  - SGD with momentum_masking=False, plain and subclassed: the reference in torch keeps m
    where r was selected (error feedback on the momentum-SGD step).
  - Adam (lr 1e-3): r += u, u = the update a plain torch Adam makes from the same gradients (a
    reference Adam stepping a zero vector: u = -its result).
  - AdamW (lr 1e-3, decoupled weight decay 1e-2): r += w - step(w), a reference AdamW stepping a
    copy of the weights.

usage: wrapper_math_test.py BUILD_DIR
"""

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

BUILD = cluster.setup(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sieve  # noqa: E402
import sieve.torch  # noqa: E402

D = 199210  # FNN-3
ROUNDS, BATCH, DENSITY, STEP_SIZE, RELOAD_ROUND = 100, 32, 0.01, 40, 45
LR, MU, WD = 0.05, 0.9, 1e-4  # SGD
ADAM_LR, ADAMW_WD = 1e-3, 1e-2


class SubclassedSGD(torch.optim.SGD):
    """A user's SGD subclass: sieve.torch cannot assume plain SGD's update, so it runs this
    optimizer's own step() on zeroed weights and masks its momentum buffers (the general path)."""


def lr_at(lr, r):
    return lr * 0.5 ** (r // STEP_SIZE)  # StepLR(step_size=STEP_SIZE, gamma=0.5) at round r


class SgdRule:
    """sieve-worker's round: g += wd*w; m = mu*m + g; r += lr*m (a reference ErrorFeedback)."""

    def __init__(self):
        self.ef = sieve.ErrorFeedback(D)

    def optimizer(self, cls, model):
        return cls(model.parameters(), lr=LR, momentum=MU, weight_decay=WD)

    def scheduler(self, opt):
        return torch.optim.lr_scheduler.StepLR(opt, step_size=STEP_SIZE, gamma=0.5)

    def feed(self, r, grad, w):
        self.ef.accumulate(grad.add(w, alpha=WD), MU, lr_at(LR, r))

    def select(self, k):
        want = self.ef.select("topk", k)
        return want.indices, want.values

    def residual(self):
        return self.ef.read_state()[1]


class DenseSgdRule(SgdRule):
    """compressor none: the reference selects all of r (r = 0 after it, m untouched)."""

    compressor = "none"

    def select(self, k):
        want = self.ef.select("none", k)
        return np.arange(D, dtype=np.uint32), np.array(want.values)


class GroupsRule(SgdRule):
    """sieve-worker's round with a learning rate per parameter group: the first two layers at
    LR, the rest at LR / 2 in rounds 30-59 (a LambdaLR per group), so that the wrapped plain
    SGD's path changes twice (fused while the groups agree, general while they differ). The
    reference in torch: m = mu*m + g; r += lr_i*m; the top-k of |r| (r and m zeroed there)."""

    def __init__(self):
        self.m, self.r = torch.zeros(D), torch.zeros(D)

    def optimizer(self, cls, model):
        params = list(model.parameters())
        self.n0 = sum(p.numel() for p in params[:4])
        return cls([{"params": params[:4]}, {"params": params[4:]}], lr=LR, momentum=MU,
                   weight_decay=WD)

    def scheduler(self, opt):
        return torch.optim.lr_scheduler.LambdaLR(
            opt, [lambda t: 1.0, lambda t: 0.5 if 30 <= t < 60 else 1.0])

    def feed(self, r, grad, w):
        lr = torch.full((D,), LR)
        lr[self.n0:] = LR * (0.5 if 30 <= r < 60 else 1.0)
        self.m = self.m * MU + grad.add(w, alpha=WD)
        self.r = self.r + lr * self.m

    def select(self, k):
        idx = torch.topk(self.r.abs(), k).indices.sort().values
        values = self.r[idx].clone()
        self.r[idx] = 0
        self.m[idx] = 0
        return idx.numpy().astype(np.uint32), values.numpy()

    def residual(self):
        return self.r.numpy()


class KeptMomentumRule(GroupsRule):
    """momentum_masking=False: sieve-worker's round without momentum-factor masking, one group,
    StepLR. The reference in torch: m = mu*m + (g + wd*w); r += lr*m; the top-k of |r|, r zeroed
    there and m kept everywhere."""

    momentum_masking = False

    def optimizer(self, cls, model):
        return cls(model.parameters(), lr=LR, momentum=MU, weight_decay=WD)

    def scheduler(self, opt):
        return torch.optim.lr_scheduler.StepLR(opt, step_size=STEP_SIZE, gamma=0.5)

    def feed(self, r, grad, w):
        self.m = self.m * MU + grad.add(w, alpha=WD)
        self.r = self.r + lr_at(LR, r) * self.m

    def select(self, k):
        idx = torch.topk(self.r.abs(), k).indices.sort().values
        values = self.r[idx].clone()
        self.r[idx] = 0
        return idx.numpy().astype(np.uint32), values.numpy()


class DecayGroupsRule(GroupsRule):
    """sieve-worker's round with the usual two groups: weight decay WD on the weight matrices, none
    on the biases, one lr and momentum: plain SGD stays on the fused path (the decay added per
    group) and pushes what the reference in torch computes: m = mu*m + (g + wd_i*w);
    r += lr*m."""

    expect_fused = True

    def optimizer(self, cls, model):
        params = list(model.parameters())
        weights = [p for p in params if p.ndim > 1]
        biases = [p for p in params if p.ndim <= 1]
        # The flat vector follows param_groups: the weights, then the biases.
        self.n_decayed = sum(p.numel() for p in weights)
        return cls([{"params": weights, "weight_decay": WD},
                    {"params": biases, "weight_decay": 0.0}], lr=LR, momentum=MU)

    def scheduler(self, opt):
        return torch.optim.lr_scheduler.StepLR(opt, step_size=STEP_SIZE, gamma=0.5)

    def feed(self, r, grad, w):
        g = grad.clone()
        g[:self.n_decayed].add_(w[:self.n_decayed], alpha=WD)  # torch SGD's g + wd * w
        self.m = self.m * MU + g
        self.r = self.r + lr_at(LR, r) * self.m


class TorchRule(SgdRule):
    """r += u, u = what a plain torch optimizer (Adam, AdamW) subtracts from the weights."""

    def __init__(self, cls, **kw):
        super().__init__()
        self.cls, self.kw, self.ref = cls, kw, None

    def optimizer(self, cls, model):
        return cls(model.parameters(), **self.kw)

    def feed(self, r, grad, w):
        if self.ref is None:
            self.p = torch.nn.Parameter(torch.zeros(D))
            self.ref = self.cls([self.p], **self.kw)
        for group in self.ref.param_groups:
            group["lr"] = lr_at(self.kw["lr"], r)
        decoupled = self.kw.get("weight_decay", 0) and self.cls is torch.optim.AdamW
        with torch.no_grad():
            self.p.copy_(w) if decoupled else self.p.zero_()
        self.p.grad = grad.clone()
        self.ref.step()
        with torch.no_grad():
            u = w - self.p if decoupled else -self.p
        self.ef.accumulate(u.detach(), 0.0, 1.0)  # m = u; r += m


class PythonWrapperMatchesWorkerMath(unittest.TestCase):
    def run_rounds(self, optimizer_class, rule):
        torch.manual_seed(3)
        torch.set_num_threads(1)
        images, labels = sieve.load_fashion_mnist("train")
        x = torch.from_numpy(images[:ROUNDS * BATCH])
        y = torch.from_numpy(labels[:ROUNDS * BATCH]).long()
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 200), torch.nn.ReLU(), torch.nn.Linear(200, 200),
            torch.nn.ReLU(), torch.nn.Linear(200, 10))
        c = cluster.Cluster(BUILD, num_servers=1, num_workers=1)
        try:
            sieve.torch.init(scheduler=c.address, rank=0, bind="127.0.0.1", host="127.0.0.1")
            base = rule.optimizer(optimizer_class, model)
            # The flat vector follows param_groups.
            own_init = torch.cat([p.detach().reshape(-1).clone()
                                  for g in base.param_groups for p in g["params"]])
            compressor = getattr(rule, "compressor", "topk")
            opt = sieve.torch.DistributedOptimizer(
                base, model, compressor=compressor, density=DENSITY, steps_per_epoch=ROUNDS,
                momentum_masking=getattr(rule, "momentum_masking", True))
            sched = rule.scheduler(opt)
            self.assertIsInstance(opt, optimizer_class)
            s = opt._sieve
            self.assertEqual(s.d, D)
            self.assertTrue(torch.equal(s.flat, own_init))  # the job starts from this init
            k = D if compressor == "none" else sieve.k_for_density(DENSITY, D)
            bitwise, worst = 0, 0.0
            for r in range(ROUNDS):
                b = slice(r * BATCH, (r + 1) * BATCH)
                if r == RELOAD_ROUND:  # a checkpoint's round trip changes nothing
                    buffer = io.BytesIO()
                    torch.save(opt.state_dict(), buffer)
                    buffer.seek(0)
                    opt.load_state_dict(torch.load(buffer))
                def closure():
                    opt.zero_grad(set_to_none=r % 2 == 1)  # both of torch's ways
                    loss = F.cross_entropy(model(x[b]), y[b])
                    loss.backward()
                    return loss

                before = s.flat.detach().clone()
                if r % 3 == 2:  # torch's closure form: step() computes and records the loss
                    loss = opt.step(closure)
                    self.assertIsInstance(loss, torch.Tensor)
                    grad = None
                else:
                    opt.record(loss=closure())
                    grad = torch.cat([p.grad.reshape(-1) for p in s.params])
                    opt.step()
                sched.step()
                # In the flat vector's order (param_groups'), which the reference follows.
                after = torch.cat([p.grad.reshape(-1) for p in s.params])
                if grad is not None:
                    self.assertTrue(torch.equal(after, grad),
                                    f"round {r}: step() changed .grad (torch's optimizers do not)")
                rule.feed(r, after, before)  # the same gradient and weights, fed afterwards
                want_i, want_v = rule.select(k)
                got_i, got_v = s.selection.indices.copy(), s.selection.values.copy()
                if s.selection.dense:  # all of D in order, without indices
                    got_i = np.arange(D, dtype=np.uint32)
                self.assertEqual(len(got_i), k, f"round {r}")
                self.assertTrue(np.array_equal(got_i, want_i),
                                f"round {r}: {np.count_nonzero(got_i != want_i)} of {k} "
                                "indices differ from the reference's")
                rel = np.abs(got_v - want_v) / np.maximum(np.abs(want_v), 1e-30)
                worst = max(worst, float(rel.max()))
                self.assertLessEqual(rel.max(), 1e-6, f"round {r}")
                bitwise += np.array_equal(got_v.view(np.uint32), want_v.view(np.uint32))
                expect = before.numpy().copy()
                expect[got_i] -= got_v
                self.assertTrue(np.array_equal(s.flat.numpy(), expect),
                                f"round {r}: the replica is not w - pushed")
            if getattr(rule, "expect_fused", False):
                self.assertIs(s.fused, True, "plain SGD left the fused path")
            # The residuals agree too: the wrapper's r is the reference's.
            self.assertTrue(np.allclose(opt.residual().numpy(), rule.residual(), rtol=1e-6,
                                        atol=1e-12))
            print(f"{optimizer_class.__name__}: {ROUNDS} rounds, k = {k}: indices equal in every "
                  f"round; values bitwise equal in {bitwise} of {ROUNDS} rounds, largest "
                  f"relative difference {worst:.3g}")
            opt.finish(print_summary=False)
            codes = c.wait()
        finally:
            c.kill()
        self.assertEqual(set(codes.values()), {0}, c.logs())

    def test_plain_sgd(self):
        self.run_rounds(torch.optim.SGD, SgdRule())

    def test_sgd_subclass(self):
        self.run_rounds(SubclassedSGD, SgdRule())

    def test_dense_sgd_keeps_its_momentum(self):
        self.run_rounds(torch.optim.SGD, DenseSgdRule())

    def test_dense_sgd_subclass_keeps_its_momentum(self):
        self.run_rounds(SubclassedSGD, DenseSgdRule())

    def test_kept_momentum(self):
        self.run_rounds(torch.optim.SGD, KeptMomentumRule())

    def test_kept_momentum_subclass(self):
        self.run_rounds(SubclassedSGD, KeptMomentumRule())

    def test_param_groups_whose_lr_diverge_and_meet_again(self):
        self.run_rounds(torch.optim.SGD, GroupsRule())

    def test_a_weight_decay_per_group_stays_fused(self):
        self.run_rounds(torch.optim.SGD, DecayGroupsRule())

    def test_adam(self):
        self.run_rounds(torch.optim.Adam, TorchRule(torch.optim.Adam, lr=ADAM_LR))

    def test_adamw(self):
        self.run_rounds(torch.optim.AdamW,
                        TorchRule(torch.optim.AdamW, lr=ADAM_LR, weight_decay=ADAMW_WD))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
