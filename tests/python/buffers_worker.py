"""One worker of tests/python/buffers_test.py: a model with BatchNorm, wrapped with
buffers=MODE (argv[2]), trained 4 steps on data of its own (rank-dependent, so the workers'
running statistics differ); before and after each step() it records its buffers to
OUT_DIR/rank-R.json. argv[3] == "extra": this worker's model has one more buffer (same D)."""

import json
import os
import sys

import torch

import sieve.torch

out_dir, mode = sys.argv[1], sys.argv[2]
extra = len(sys.argv) > 3 and sys.argv[3] == "extra"
sieve.torch.init()
rank = sieve.torch.rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
if extra:
    model.register_buffer("extra", torch.zeros(2))
try:
    opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model,
                                           compressor="topk", density=0.5, buffers=mode)
except ValueError as e:
    print(f"refused: {e}", flush=True)
    sys.exit(3)


def snapshot():
    return {name: b.tolist() for name, b in model.named_buffers()}


steps = []
g = torch.Generator().manual_seed(100 + rank)
for step in range(4):
    x = torch.randn(8, 3, generator=g) * (1 + rank) + rank
    opt.zero_grad()
    model(x).pow(2).mean().backward()  # train mode: BatchNorm updates its running statistics
    before = snapshot()
    opt.step()
    steps.append({"before": before, "after": snapshot()})
opt.finish()
with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "steps": steps}, f)
