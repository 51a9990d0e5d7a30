"""sieve.torch.allreduce / broadcast / barrier on a real 2-worker job (1 server started without
a model: D is the script's): every worker gets the element-wise sum in fp64 rounded once (the
test sums both ranks' inputs itself), the mean, rank 1's tensor for a broadcast from root 1 and
the OR of a flag; too many values, a NaN, an unknown op and a call before connecting raise
ValueError before anything is sent; model.load_state_dict after wrapping raises ValueError
naming the remedy; broadcast_parameters of a state_dict with a buffer, a tensor larger than one
collective and a non-contiguous one makes them rank 0's on both workers, bitwise, and leaves
the trained parameters; both workers then train a step and the job ends cleanly.
"""

import json
import os
import sys

import cluster

build = cluster.setup(sys.argv)
import torch  # noqa: E402

c = cluster.Cluster(build, num_servers=1, num_workers=2, timeout_s=240)
try:
    script = os.path.join(cluster.source_dir(), "tests", "python", "collectives_worker.py")
    for r in range(2):
        c.start_worker(r, [sys.executable, script, c.dir], env_only=True)
    codes = c.wait()
    assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n" + c.logs()
    got = []
    for r in range(2):
        with open(os.path.join(c.dir, f"rank-{r}.json")) as f:
            got.append(json.load(f))
    mine = [torch.tensor(g["mine"], dtype=torch.float32) for g in got]
    want_sum = (mine[0].double() + mine[1].double()).float()
    for g in got:
        r = g["rank"]
        assert "DistributedOptimizer" in g["before_connect"], g["before_connect"]
        assert torch.equal(torch.tensor(g["sum"]), want_sum), (r, g["sum"], want_sum)
        assert torch.equal(torch.tensor(g["mean"]), want_sum / 2), (r, g["mean"])
        assert torch.equal(torch.tensor(g["from1"]), mine[1]), (r, g["from1"])
        assert g["any_stop"] is True, r
        assert "65536" in g["too_big"], g["too_big"]
        assert "finite" in g["nan"], g["nan"]
        assert "'max'" in g["bad_op"], g["bad_op"]
        # broadcast_parameters: the 3 extra tensors are rank 0's, bitwise; the trained
        # parameters of the state_dict were left as they are.
        assert g["broadcast_count"] == 3, (r, g["broadcast_count"])
        assert g["broadcast_extra"] == got[0]["broadcast_extra"], r
        assert g["trained_unchanged"] is True, r
        assert "load the weights before wrapping" in g["load_after_wrap"], g["load_after_wrap"]
    rank0 = got[0]["broadcast_extra"]
    assert rank0["buffer"] == [1.0, 1.0, 1.0], rank0["buffer"]
    assert rank0["frozen"] == [float(i) for i in range(70000)], "frozen"
    assert rank0["transposed"] == torch.arange(12.0).reshape(3, 4).t().reshape(-1).tolist()
    print("collectives: sum, mean, broadcast, flag and the refusals as computed here, both ranks")
finally:
    c.kill()
