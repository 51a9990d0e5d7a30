"""DistributedOptimizer(buffers=...) on real 2-worker jobs (1 server without a model), with a
BatchNorm whose running statistics differ between the workers (each trains on data of its own):
  broadcast: after every step() both workers hold exactly rank 0's buffers as they were before
             that step's exchange;
  average:   both hold the mean of the two workers' buffers, as computed here (the fp64 sum
             rounded to fp32, then halved), num_batches_tracked the same integer;
  local:     each keeps its own (they differ);
  a worker whose model holds one more buffer (same D): both refuse before anything is pushed.
"""

import json
import os
import sys

import cluster

build = cluster.setup(sys.argv)
import torch  # noqa: E402

script = os.path.join(cluster.source_dir(), "tests", "python", "buffers_worker.py")


def run(mode, extra_rank=None):
    c = cluster.Cluster(build, num_servers=1, num_workers=2, timeout_s=240)
    try:
        for r in range(2):
            argv = [sys.executable, script, c.dir, mode] + (["extra"] if r == extra_rank else [])
            c.start_worker(r, argv, env_only=True)
        codes = c.wait()
        if extra_rank is not None:
            for r in range(2):
                assert codes[f"worker-{r}"] == 3, f"{codes}\n" + c.logs()
                assert "buffers of different shapes" in c.log(f"worker-{r}"), c.logs()
            return None
        assert all(code == 0 for code in codes.values()), f"{mode}: exit codes {codes}\n" + c.logs()
        out = []
        for r in range(2):
            with open(os.path.join(c.dir, f"rank-{r}.json")) as f:
                out.append(json.load(f))
        return out
    finally:
        c.kill()


def t(x):
    return torch.tensor(x, dtype=torch.float32)


got = run("broadcast")
for step in range(4):
    before0 = got[0]["steps"][step]["before"]
    for r in range(2):
        after = got[r]["steps"][step]["after"]
        for name in ("1.running_mean", "1.running_var"):
            assert torch.equal(t(after[name]), t(before0[name])), (step, r, name)
        assert after["1.num_batches_tracked"] == before0["1.num_batches_tracked"]
print("broadcast: both workers hold rank 0's buffers after each step")

got = run("average")
for step in range(4):
    b = [got[r]["steps"][step]["before"] for r in range(2)]
    for name in ("1.running_mean", "1.running_var"):
        want = (t(b[0][name]).double() + t(b[1][name]).double()).float() / 2
        for r in range(2):
            assert torch.equal(t(got[r]["steps"][step]["after"][name]), want), (step, r, name)
    assert not torch.equal(t(b[0]["1.running_mean"]), t(b[1]["1.running_mean"])), \
        "the workers' statistics did not differ: the test proves nothing"
print("average: both workers hold the mean of the two after each step")

got = run("local")
assert got[0]["steps"][3]["after"]["1.running_mean"] != got[1]["steps"][3]["after"]["1.running_mean"]
print("local: each worker keeps its own")

run("broadcast", extra_rank=1)
print("buffers of different shapes: refused on both workers")
