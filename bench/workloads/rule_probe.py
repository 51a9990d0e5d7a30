#!/usr/bin/python3
"""One process, no daemons: sieve's worker rule simulated on examples/torch/lstm_lm.py, to tell
what the rule does to a model from what the distributed machinery does. Each step computes the
gradient of one batch (rank 0 of 1, batch 20, BPTT 35), clips it to --clip, then:

  dense      m = mu*m + g; w -= lr*m                       (momentum SGD)
  masked     m = mu*m + g; r += lr*m; S = top-k |r|; w[S] -= r[S]; r[S] = 0; m[S] = 0
             (sieve-worker's and sieve.torch's rule: Deep Gradient Compression's momentum
             correction with momentum-factor masking)
  unmasked   the same without m[S] = 0 (error feedback on the momentum-SGD step)
  per_tensor masked, with a top-k of its own in every tensor (k_t = density * D_t)

with lr 2.0 * the scripts' cosine schedule over --steps, mu 0.9.

--workers=W > 1 simulates W data-parallel workers on one model: each step computes the W ranks'
gradients (rank r of W: its own part of the training text and its own LSTM state) and averages
them, as sieve's servers and torch DDP do, with the clip taken as --clip_rule says:

  ddp        the average clipped to --clip (torch DDP: every rank sees the averaged gradient)
  local      each rank's gradient clipped to c (sieve.torch clip="local")
  dgc        each rank's to c / sqrt(W) (clip="dgc": Deep Gradient Compression's rule, meant for
             servers that sum)
  average    each rank's to c * sqrt(W) (clip="average": the same rule for servers that average)

Each worker keeps its own m and r and selects from its own r (sieve's workers); the step is the
mean of what they send. ddp takes the dense rule only (one momentum over the averaged gradient).
The run also prints, over its steps, the mean ratio of each rule's step length
||mean of the clipped g_i|| to ddp's ||clip(mean g_i)|| on the same gradients. --warmup=paper uses densities
1.5625 % and 0.4 % for the first and second sixth of the steps (the 6-epoch grid's first two
epochs), then --density. It prints the validation perplexity on the first --eval_limit tokens
and, for the sparse rules, each tensor's share of D and of the selected pairs.

    /usr/bin/python3 bench/workloads/rule_probe.py --rule=masked --steps=240 --density=0.015625
"""

import argparse
import collections
import math
import os
import sys
import time
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "torch"))
import lstm_lm  # noqa: E402
import workload_common as common  # noqa: E402

PAPER_WARMUP = (0.015625, 0.004)
CLIP_RULES = ("ddp", "local", "dgc", "average")


def clip_threshold(rule, clip, workers):
    """Each worker's gradient-norm threshold under a per-worker clip rule."""
    return {"local": clip, "dgc": clip / math.sqrt(workers),
            "average": clip * math.sqrt(workers)}[rule]


def density_at(step, steps, density, warmup):
    sixth = max(steps // 6, 1)
    for i, d in enumerate(warmup):
        if step < (i + 1) * sixth:
            return max(d, density)
    return density


def select(rule, r, bounds, density):
    """The boolean mask S of this step's selected entries."""
    chosen = torch.zeros(r.numel(), dtype=torch.bool)
    if rule == "per_tensor":
        for _, lo, hi in bounds:
            k = max(1, round(density * (hi - lo)))
            chosen[lo + torch.topk(r[lo:hi].abs(), k, sorted=False).indices] = True
    else:
        chosen[torch.topk(r.abs(), max(1, round(density * r.numel())), sorted=False).indices] = True
    return chosen


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rule", choices=("dense", "masked", "unmasked", "per_tensor"),
                   default="masked", help="the update rule (module docstring)")
    p.add_argument("--steps", type=int, default=240, help="steps (the cosine schedule's length)")
    p.add_argument("--density", type=float, default=0.001, help="k / D after any warm-up")
    p.add_argument("--warmup", choices=("none", "paper"), default="none",
                   help="paper: 1.5625 %% and 0.4 %% in the first two sixths of the steps")
    p.add_argument("--width", type=int, default=200, help="embedding = hidden size")
    p.add_argument("--lr", type=float, default=2.0, help="peak learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="mu")
    p.add_argument("--clip", type=float, default=0.25, help="gradient norm clip")
    p.add_argument("--workers", type=int, default=1, help="data-parallel workers W simulated")
    p.add_argument("--clip_rule", choices=CLIP_RULES, default="ddp",
                   help="with --workers > 1: where the clip applies (module docstring)")
    p.add_argument("--eval_limit", type=int, default=20000,
                   help="validation tokens scored at the end (0: all)")
    p.add_argument("--seed", type=int, default=1, help="torch's seed (weights, dropout)")
    p.add_argument("--corpus", default=common.KJV_DATA, help="bible-kjv-text's data file")
    a = p.parse_args()
    if a.steps < 1 or not 0.0 < a.density <= 1.0 or a.workers < 1:
        p.error("--steps and --workers must be >= 1 and --density in (0, 1]")
    if a.workers > 1 and a.clip_rule == "ddp" and a.rule != "dense":
        p.error("--clip_rule=ddp is torch DDP: it takes --rule=dense only")
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    args = types.SimpleNamespace(corpus=a.corpus, vocab=10000, batch_size=20, bptt=35,
                                 width=a.width, dropout=0.2, clip=a.clip, eval_limit=a.eval_limit)
    workloads = [lstm_lm.LstmLmWorkload() for _ in range(a.workers)]
    try:
        workloads[0].check_data(args)
    except common.WorkloadError as e:
        print(f"rule_probe.py: error: {e}", file=sys.stderr)
        return 1
    for rank, w in enumerate(workloads):
        w.setup(args, rank, a.workers)
    model = workloads[0].build_model(args)
    params = list(model.parameters())
    bounds, offset = [], 0
    for name, t in model.named_parameters():
        bounds.append((name, offset, offset + t.numel()))
        offset += t.numel()
    d = offset
    shared = a.workers == 1 or a.clip_rule == "ddp"  # one momentum over the averaged gradient
    states = [(torch.zeros(d), torch.zeros(d)) for _ in range(1 if shared else a.workers)]
    picked = collections.Counter()
    warmup = PAPER_WARMUP if a.warmup == "paper" else ()
    ratios = collections.defaultdict(float)  # rule -> sum over steps of its step / ddp's
    start = time.time()
    for step in range(a.steps):
        model.train()
        grads, losses = [], []
        for w in workloads:
            loss = w.loss(model, 0, step % w.train.steps)
            model.zero_grad()
            loss.backward()
            grads.append(torch.cat([t.grad.reshape(-1) for t in params]))
            losses.append(loss.item())
        if a.workers > 1:
            ddp_norm = min(torch.stack(grads).mean(0).norm().item(), a.clip)
            for rule in CLIP_RULES[1:]:
                c = clip_threshold(rule, a.clip, a.workers)
                step_len = torch.stack([g * min(1.0, c / max(g.norm().item(), 1e-12))
                                        for g in grads]).mean(0).norm().item()
                ratios[rule] += step_len / max(ddp_norm, 1e-12)
        if shared:
            g = torch.stack(grads).mean(0) if a.workers > 1 else grads[0]
            grads = [g * min(1.0, a.clip / max(g.norm().item(), 1e-12))]
        else:
            c = clip_threshold(a.clip_rule, a.clip, a.workers)
            grads = [g * min(1.0, c / max(g.norm().item(), 1e-12)) for g in grads]
        lr = a.lr * common.lr_factor(step, a.steps, 0)
        update = torch.zeros(d)
        for (m, r), g in zip(states, grads):
            m.mul_(a.momentum).add_(g)
            if a.rule == "dense":
                update.add_(m, alpha=lr)
                continue
            r.add_(m, alpha=lr)
            chosen = select(a.rule, r, bounds, density_at(step, a.steps, a.density, warmup))
            update.add_(torch.where(chosen, r, torch.zeros(())))
            r[chosen] = 0.0
            if a.rule != "unmasked":
                m[chosen] = 0.0
            for name, lo, hi in bounds:
                picked[name] += int(chosen[lo:hi].sum())
        update.div_(len(states))
        with torch.no_grad():
            for t, (_, lo, hi) in zip(params, bounds):
                t.sub_(update[lo:hi].view_as(t))
        if step % 100 == 0 or step == a.steps - 1:
            print(f"step {step} loss {sum(losses) / len(losses):.3f} "
                  f"({time.time() - start:.0f} s)", flush=True)
    val = common.lm_evaluate(model, workloads[0].valid, 10, args.bptt, a.eval_limit,
                             state=True)
    clip = f" workers={a.workers} clip_rule={a.clip_rule}" if a.workers > 1 else ""
    print(f"result: rule={a.rule} steps={a.steps} density={a.density} warmup={a.warmup} "
          f"seed={a.seed}{clip} val_perplexity={math.exp(val):.1f}")
    for rule, total in ratios.items():
        print(f"  step length of clip_rule={rule} / ddp's: {total / a.steps:.3f} (mean)")
    total = sum(picked.values())
    for name, lo, hi in bounds if total else ():
        print(f"  {name:24s} {100 * (hi - lo) / d:5.1f} % of D, "
              f"{100 * picked[name] / total:5.1f} % of the selected pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
