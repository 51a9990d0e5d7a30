"""Uneven inputs on a real BSP job (1 server without a model, 2 workers): rank 1 stops after 15
steps, rank 0 trains 30. With `with opt.join():` and with a plain early finish() the job ends
with every process exiting 0, well within the round timeout (120 s; before, rank 0 waited for
it and the job failed), the server closed 30 rounds, and what the workers pushed is what the
server applied: Σ of the workers' pushed_sum = the server's pushed_sum (fp64 sums of fp32
values; the same values in another order: within 1e-9 relative).
"""

import os
import sys
import time

import cluster

build = cluster.setup(sys.argv)
script = os.path.join(cluster.source_dir(), "tests", "python", "uneven_worker.py")


for style in ("join", "finish"):
    c = cluster.Cluster(build, num_servers=1, num_workers=2, timeout_s=100)
    try:
        start = time.monotonic()
        for r in range(2):
            c.start_worker(r, [sys.executable, script, c.dir, style], env_only=True)
        codes = c.wait()
        took = time.monotonic() - start
        assert all(code == 0 for code in codes.values()), f"{style}: {codes}\n" + c.logs()
        pushed = 0.0
        for r in range(2):
            s = c.summary(f"worker-{r}")
            assert s is not None, c.logs()
            pushed += s["pushed_sum"]
        server = c.summary("server-0")
        assert server is not None, c.logs()
        assert server["rounds"] == 30, (style, server["rounds"], c.logs())
        applied = server["pushed_sum"]
        assert abs(applied - pushed) <= 1e-9 * max(1.0, abs(pushed)), (style, applied, pushed)
        print(f"{style}: exit 0 in {took:.1f} s, 30 rounds, pushed {pushed:.9g} = "
              f"applied {applied:.9g}")
    finally:
        c.kill()
