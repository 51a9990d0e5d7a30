#!/usr/bin/env python3
"""rusage.py OUT.json CMD [ARGS...]: runs CMD, writes its peak RSS and CPU time (getrusage via
wait4, microsecond resolution, unlike /usr/bin/time's 10 ms) to OUT.json, exits with CMD's status."""
import json
import os
import sys
import time

out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(out, "w") as f:
    json.dump({"max_rss_kb": ru.ru_maxrss, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
               "wall_s": time.monotonic() - t0}, f)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
