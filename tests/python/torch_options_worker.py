"""A worker of PythonTorchOptions (torch_options_test.py): tiny models wrapped by
sieve.torch.DistributedOptimizer, a few steps, and what the test checks written to
OUT_DIR/SCENARIO-RANK.pt (torch.save of a dict). The job comes from the environment
(SIEVE_SCHEDULER, SIEVE_RANK, ...), as `sieve launch` passes it.

Scenarios (the test's docstring says what it checks of each):
  groups       three param groups: a frozen layer with weight decay 0.1 and the body's weight
               (the optimizer's topk at density 0.25), the body's bias (sieve_density=0.5), an
               embedding (sieve_density=1.0: dense); constant gradients (a linear loss); 20 steps.
               Before wrapping, bad group keys, densities, warm-up, clip settings and a sparse
               embedding must raise ValueError without connecting. At step 10 a parameter
               frozen (and one unfrozen) after wrapping must make step() raise.
  frozen_sgd   torch.optim.SGD(model.parameters(), momentum 0.9, weight decay 0.1) with the
               first layer frozen (the reported case); 20 steps of an MSE loss.
  frozen_adamw the same with AdamW (the general path) and a stale .grad on the frozen layer.
  clip_local, clip_dgc, clip_average
               one Linear, constant gradients of norm 10 (rank 0) and 0.3 (rank 1), clip_norm=1,
               compressor none, SGD lr 0.1; 3 steps; the .grad after each step is saved.
  backup       per-group settings under backup workers (the servers close each round at one
               push): rank 1 sleeps 50 ms before each step, so its pushes come late and return
               to its residual; constant positive gradients, 20 rounds; the pushed and returned
               sums and the final residual are saved.
  misc         no steps_per_epoch, density_warmup_steps=4 (topk, density 0.1), record() of
               perplexity= each step and bad record() calls; 6 steps; torch.save sizes of a
               parameter view and of a cloned state_dict.

usage: torch_options_worker.py SCENARIO OUT_DIR
"""

import io
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import sieve  # noqa: F401
import sieve.torch

LR = 0.1
SCENARIO, OUT = sys.argv[1], sys.argv[2]


def constant_grads(net, rank, scale=None):
    """A fixed gradient per trainable parameter (the loss sum(p * C) has gradient C): random,
    seeded by rank, so that no two residual entries tie. scale: the whole gradient's norm."""
    gen = torch.Generator().manual_seed(1000 + rank)
    grads = {n: torch.randn(p.shape, generator=gen) for n, p in net.named_parameters()
             if p.requires_grad}
    if scale is not None:
        norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
        grads = {n: (g.double() * (scale / norm)).float() for n, g in grads.items()}
    return grads


def linear_loss(net, grads):
    params = dict(net.named_parameters())
    return sum((params[n] * g).sum() for n, g in grads.items())


def expect_value_error(words, fn):
    try:
        fn()
    except ValueError as e:
        assert words in str(e), f"expected {words!r} in the error, got: {e}"
        print(f"refused as expected: {e}")
        return
    raise AssertionError(f"no ValueError (expected one naming {words!r})")


class GroupsNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.frozen = torch.nn.Linear(6, 5)
        self.body = torch.nn.Linear(5, 8)
        self.emb = torch.nn.Embedding(7, 3)


def groups(job, rank):
    net = GroupsNet()
    net.frozen.requires_grad_(False)
    frozen_before = [p.detach().clone() for p in net.frozen.parameters()]

    def param_groups(**changes):
        g = [{"params": [*net.frozen.parameters(), net.body.weight], "weight_decay": 0.1},
             {"params": [net.body.bias], "weight_decay": 0.0, "sieve_density": 0.5,
              "sieve_compressor": "topk"},
             {"params": [net.emb.weight], "weight_decay": 0.0, "sieve_density": 1.0}]
        for key, value in changes.items():
            g[1][key] = value
        return g

    def wrap(groups_, model=net, **kw):
        opt = torch.optim.SGD(groups_, lr=LR)
        return sieve.torch.DistributedOptimizer(opt, model, compressor="topk", density=0.25,
                                                job=job, **kw)

    # Refused before anything connects (so before anything is pushed), the model untouched.
    ptrs = [p.data_ptr() for p in net.parameters()]
    expect_value_error("param_groups[1]['sieve_density'] must be in (0, 1]",
                       lambda: wrap(param_groups(sieve_density=0.0)))
    expect_value_error("must be in (0, 1]", lambda: wrap(param_groups(sieve_density=1.5)))
    expect_value_error("must be in (0, 1]", lambda: wrap(param_groups(sieve_density="dense")))
    expect_value_error("must be in (0, 1]",
                       lambda: wrap(param_groups(sieve_density=float("nan"))))
    expect_value_error("param_groups[1]['sieve_compressor']: unknown compressor 'top-k'",
                       lambda: wrap(param_groups(sieve_compressor="top-k")))
    expect_value_error("param_groups[1] has unknown key(s) sieve_desnity",
                       lambda: wrap(param_groups(sieve_desnity=0.1)))
    expect_value_error("not both", lambda: wrap(param_groups(), density_warmup=[0.5],
                                                steps_per_epoch=5, density_warmup_steps=3))
    expect_value_error("clip must be one of 'local', 'dgc', 'average'",
                       lambda: wrap(param_groups(), clip_norm=1.0, clip="global"))
    expect_value_error("momentum_masking must be True or False",
                       lambda: wrap(param_groups(), momentum_masking=1))
    expect_value_error("clip_norm must be a finite number > 0",
                       lambda: wrap(param_groups(), clip_norm=0.0))
    sparse = torch.nn.ModuleDict({"body": torch.nn.Linear(3, 3),
                                  "words": torch.nn.Embedding(9, 3, sparse=True)})
    expect_value_error("module words (Embedding) has sparse=True",
                       lambda: wrap(sparse.parameters(), model=sparse))
    assert job.client is None, "a refused DistributedOptimizer connected to the job"
    assert ptrs == [p.data_ptr() for p in net.parameters()], "a refused wrap changed the model"

    opt = wrap(param_groups(), metrics_out="metrics-{rank}.jsonl")
    s = opt._sieve
    result = {"d": s.d, "num_params": s.client.num_params, "flat_size": sieve.torch.flat_size(net),
              "flat_size_opt": sieve.torch.flat_size(opt),
              "parts": [(p.group, p.offset, p.n) for p in s.parts],
              "init": s.flat.clone(), "steps": [],
              "grads": {r: constant_grads(net, r) for r in (0, 1)}}
    for t in range(20):
        opt.zero_grad()
        x = torch.ones(2, 6)
        # The frozen layer is used (no gradient) besides the linear loss.
        loss = linear_loss(net, result["grads"][rank]) + 0.0 * net.frozen(x).sum()
        loss.backward()
        opt.record(loss=loss)
        if t == 10:  # requires_grad changed after wrapping: refused, nothing pushed
            before, round_ = s.flat.clone(), opt.round
            net.body.bias.requires_grad_(False)
            expect_value_error("parameter body.bias has requires_grad=False now", opt.step)
            net.body.bias.requires_grad_(True)
            net.frozen.weight.requires_grad_(True)
            expect_value_error("parameter frozen.weight has requires_grad=True now", opt.step)
            net.frozen.weight.requires_grad_(False)
            assert torch.equal(before, s.flat) and opt.round == round_
        opt.step()
        result["steps"].append(s.flat.clone())
    result["frozen_before"] = frozen_before
    result["frozen_after"] = [p.detach().clone() for p in net.frozen.parameters()]
    opt.dump_weights("replica-{rank}.bin")
    return opt, result


def frozen(job, rank, optimizer):
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    net[0].requires_grad_(False)
    frozen_before = [p.detach().clone() for p in net[0].parameters()]
    if optimizer == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9, weight_decay=0.1)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=0.01, weight_decay=0.1)
    opt = sieve.torch.DistributedOptimizer(opt, net, compressor="topk", density=0.1, job=job)
    if optimizer == "adamw":  # a stale gradient: plain torch would apply it, sieve never does
        net[0].weight.grad = torch.ones_like(net[0].weight)
    gen = torch.Generator().manual_seed(rank)
    init = opt._sieve.flat.clone()
    for _ in range(20):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.record(loss=loss)
        opt.step()
    opt.dump_weights("replica-{rank}.bin")
    return opt, {"d": opt._sieve.d, "num_params": opt._sieve.client.num_params,
                 "flat_size": sieve.torch.flat_size(net), "init": init,
                 "final": opt._sieve.flat.clone(), "frozen_before": frozen_before,
                 "frozen_after": [p.detach().clone() for p in net[0].parameters()]}


def clip(job, rank, mode):
    net = torch.nn.Linear(4, 3)
    opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=LR), net,
                                           compressor="none", clip_norm=1.0, clip=mode, job=job)
    s = opt._sieve
    grads = {r: constant_grads(net, r, scale=10.0 if r == 0 else 0.3) for r in (0, 1)}
    result = {"init": s.flat.clone(), "steps": [], "clipped": [], "grads": grads}
    for _ in range(3):
        opt.zero_grad()
        linear_loss(net, grads[rank]).backward()
        opt.step()
        result["steps"].append(s.flat.clone())
        result["clipped"].append(s.flat_grad.clone())  # the .grad views after step()
    return opt, result


def backup(job, rank):
    net = torch.nn.Linear(6, 5)
    opt = torch.optim.SGD([{"params": [net.weight]},
                           {"params": [net.bias], "sieve_density": 1.0}], lr=LR)
    opt = sieve.torch.DistributedOptimizer(opt, net, compressor="topk", density=0.2,
                                           steps_per_epoch=20, epochs=1, job=job)
    grads = {n: g.abs() for n, g in constant_grads(net, rank).items()}
    trained = 0
    for _ in range(20):
        opt.zero_grad()
        linear_loss(net, grads).backward()
        if rank == 1:
            time.sleep(0.05)
        past_end = opt.steps_past_end
        opt.step()
        trained += opt.steps_past_end == past_end
    opt.dump_weights("replica-{rank}.bin")
    s = opt._sieve
    update = torch.cat([(LR * grads[n]).reshape(-1) for n in ("weight", "bias")])
    return opt, {"trained": trained, "update": update, "pushed_sum": s.pushed_sum,
                 "returned_sum": s.returned_sum, "missed_slices": s.missed_slices,
                 "residual": opt.residual()}


def misc(job, rank):
    net = torch.nn.Linear(100, 10)
    opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=LR), net,
                                           compressor="topk", density=0.1,
                                           density_warmup_steps=4, progress=True,
                                           metrics_out="metrics-{rank}.jsonl", job=job)
    gen = torch.Generator().manual_seed(rank)
    for t in range(6):
        x, y = torch.randn(8, 100, generator=gen), torch.randn(8, 10, generator=gen)
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.record(loss=loss, perplexity=torch.exp(loss.detach()))
        opt.step()
    last = float(torch.exp(loss.detach()))
    for bad, words in (({"perplexity": float("nan")}, "not a finite number"),
                       ({"rounds": 3}, "a field of the summary line"),
                       ({"bleu": torch.ones(2)}, "one number"),
                       ({"bleu": "high"}, "one number"),
                       ({"m" * 65: 1.0}, "at most 64"),
                       ({f"m{i}": 1.0 for i in range(16)}, "at most 16 metrics"),
                       ({"test_acc": 1.5}, "an accuracy is in [0, 1]")):
        expect_value_error(words, lambda: opt.record(**bad))
    line = opt.summary_line()
    assert f"perplexity={last:.6g}" in line and "bleu" not in line, line
    # The parameters are views of one flat buffer: torch.save of one of them (or of the
    # state_dict's tensors, views too) writes the whole buffer; clones are compact.
    sizes = {}
    for name, obj in (("bias", net.bias), ("bias_clone", net.bias.detach().clone()),
                      ("state_dict", net.state_dict()),
                      ("clones", {k: v.clone() for k, v in net.state_dict().items()})):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        sizes[name] = len(buffer.getvalue())
    return opt, {"perplexity": last, "sizes": sizes, "d": opt._sieve.d}


def main():
    torch.set_num_threads(1)
    job = sieve.torch.init()
    rank = sieve.torch.rank()
    torch.manual_seed(rank + 1)  # each rank its own init: rank 0's trainable weights win
    if SCENARIO == "groups":
        opt, result = groups(job, rank)
    elif SCENARIO.startswith("frozen_"):
        opt, result = frozen(job, rank, SCENARIO[len("frozen_"):])
    elif SCENARIO.startswith("clip_"):
        opt, result = clip(job, rank, SCENARIO[len("clip_"):])
    elif SCENARIO == "backup":
        opt, result = backup(job, rank)
    elif SCENARIO == "misc":
        opt, result = misc(job, rank)
    else:
        raise SystemExit(f"unknown scenario {SCENARIO}")
    torch.save(result, os.path.join(OUT, f"{SCENARIO}-{rank}.pt"))
    opt.finish()


if __name__ == "__main__":
    main()
