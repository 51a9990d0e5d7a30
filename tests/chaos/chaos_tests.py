"""What the chaos tests share: where the harness is (bench/chaos), its library imported as
`chaos`, and the config of a schedule drawn without a job."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHAOS = os.path.join(HERE, "..", "..", "bench", "chaos")
RUN = os.path.join(CHAOS, "run.py")
sys.path.insert(0, CHAOS)
import chaos  # noqa: E402,F401  (re-exported)


def config(seed, mode, **kw):
    """The config make_schedule takes: 2 servers, 3 workers, 60 s, then `kw`."""
    c = {"seed": seed, "mode": mode, "duration": 60, "servers": 2, "workers": 3}
    c.update(kw)
    return c
