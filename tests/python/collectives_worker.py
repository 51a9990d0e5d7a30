"""One worker of tests/python/collectives_test.py: joins a 2-worker job through
sieve.torch.DistributedOptimizer (a 3-parameter model), runs a fixed sequence of collectives
and writes what it sent and got to OUT_DIR/rank-R.json (the test checks them against the
values of both ranks, computed on its own side)."""

import json
import os
import sys

import torch

import sieve.torch

out_dir = sys.argv[1]
sieve.torch.init()
rank = sieve.torch.rank()
record = {"rank": rank}

# Before the optimizer connects this worker there is no job to combine with.
try:
    sieve.torch.allreduce(torch.ones(2))
    record["before_connect"] = "no error"
except ValueError as e:
    record["before_connect"] = str(e)

model = torch.nn.Linear(2, 1)
opt = sieve.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                       compressor="topk", density=1.0)
try:
    model.load_state_dict(model.state_dict())
    record["load_after_wrap"] = "no error"
except ValueError as e:
    record["load_after_wrap"] = str(e)
mine = torch.tensor([[rank + 1.0, 10.0 * rank], [0.5, -1e-3 * (rank + 1)]])
record["mine"] = mine.tolist()
record["sum"] = sieve.torch.allreduce(mine, op="sum").tolist()
record["mean"] = sieve.torch.allreduce(mine, op="mean").tolist()
record["from1"] = sieve.torch.broadcast(mine, root=1).tolist()
flag = torch.tensor([1.0 if rank == 1 else 0.0])  # an early-stop flag only rank 1 raised
record["any_stop"] = sieve.torch.allreduce(flag, op="sum").item() > 0
sieve.torch.barrier()
# Refused before anything is sent (so the sequence stays the same on both ranks).
for name, bad in (("too_big", torch.zeros(65537)), ("nan", torch.tensor([float("nan")]))):
    try:
        sieve.torch.allreduce(bad)
        record[name] = "no error"
    except ValueError as e:
        record[name] = str(e)
try:
    sieve.torch.allreduce(mine, op="max")
    record["bad_op"] = "no error"
except ValueError as e:
    record["bad_op"] = str(e)
# broadcast_parameters: a buffer, a frozen tensor larger than one collective and a non-contiguous
# one become rank 0's; the parameters the optimizer trains (in the state_dict too) are left.
extra = {"buffer": torch.full((3,), rank + 1.0),
         "frozen": torch.arange(70000, dtype=torch.float32) * (rank + 1),
         "transposed": (torch.arange(12.0).reshape(3, 4) * (rank + 1)).t()}
trained_before = [p.detach().clone() for p in model.parameters()]
state = dict(model.state_dict(), **extra)
record["broadcast_count"] = sieve.torch.broadcast_parameters(state, root=0)
record["broadcast_extra"] = {k: v.reshape(-1).tolist() for k, v in extra.items()}
record["trained_unchanged"] = all(torch.equal(a, p.detach())
                                  for a, p in zip(trained_before, model.parameters()))
# A training step still works after the collectives.
opt.zero_grad()
model(torch.ones(4, 2)).sum().backward()
opt.step()
opt.finish()
with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
    json.dump(record, f)
