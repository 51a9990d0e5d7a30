"""One worker of tests/python/uneven_test.py: BSP, a linear model; rank 1 runs out of data after
15 steps, rank 0 trains 30; both inside `with opt.join():` (argv[2] == "join") or with a plain
early opt.finish() (argv[2] == "finish")."""

import sys

import torch

import sieve.torch

style = sys.argv[2]
sieve.torch.init()
rank = sieve.torch.rank()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model,
                                       compressor="topk", density=0.5)
g = torch.Generator().manual_seed(10 + rank)
steps = 15 if rank == 1 else 30


def train():
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 4, generator=g)).pow(2).mean().backward()
        opt.step()


if style == "join":
    with opt.join():
        train()
else:
    train()
    opt.finish()
print(f"uneven: rank {rank} trained {steps} steps", flush=True)
