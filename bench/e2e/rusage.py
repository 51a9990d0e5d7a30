#!/usr/bin/env python3
"""rusage.py [--watch=FILE] OUT.json CMD [ARGS...]: runs CMD, writes its peak RSS and CPU time to
OUT.json, exits with CMD's status.

Whole-process figures come from getrusage via wait4 (microsecond resolution, unlike
/usr/bin/time's 10 ms): max_rss_kb, user_s, sys_s, wall_s.

While CMD runs, its threads' CPU time is sampled every 10 ms from /proc/PID/task/TID/schedstat
(nanoseconds on the CPU; a thread that ended keeps its last sample) and written as thread_cpu_s:
{"main": the thread whose id is PID, "zmq": threads named ZMQbg/*, "other": the rest}. Time after
the last sample (< 10 ms) is missing from it; the getrusage figures are exact.

--watch=FILE: also count FILE's lines at every sample (e.g. a worker's per-round metrics file,
one flushed line per round) and write series: [[wall_s, lines, cpu_s, main_s, zmq_s, other_s,
rss_kb], ...] (cpu_s = the sum of the three thread kinds, rss_kb = VmRSS then), one entry per
line count, taken at the first sample that saw it. The slope of cpu_s over lines is CMD's CPU per round in the steady state,
free of start-up cost."""
import json
import os
import sys
import time


def sample_threads(pid, seen):
    """Updates seen[tid] = (kind, seconds on the CPU); False once PID's tasks are gone."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                ns = int(f.read().split()[0])
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between listdir and open
        kind = "main" if int(tid) == pid else "zmq" if name.startswith("ZMQbg") else "other"
        seen[tid] = (kind, max(ns / 1e9, seen.get(tid, (kind, 0.0))[1]))
    return True


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
    except (OSError, ValueError, IndexError):
        return 0


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0


args = sys.argv[1:]
watch = None
if args and args[0].startswith("--watch="):
    watch = args.pop(0).split("=", 1)[1]
out, cmd = args[0], args[1:]
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
seen, series, lines = {}, [], -1
while True:
    done, status, ru = os.wait4(pid, os.WNOHANG)
    if done:
        break
    if sample_threads(pid, seen) and watch is not None:
        n = count_lines(watch)
        if n != lines:
            lines = n
            kinds = [sum(s for k, s in seen.values() if k == kind)
                     for kind in ("main", "zmq", "other")]
            series.append([time.monotonic() - t0, n, sum(kinds)] + kinds + [rss_kb(pid)])
    time.sleep(0.01)
threads = {"main": 0.0, "zmq": 0.0, "other": 0.0}
for kind, s in seen.values():
    threads[kind] += s
result = {"max_rss_kb": ru.ru_maxrss, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
          "wall_s": time.monotonic() - t0, "thread_cpu_s": threads}
if watch is not None:
    result["series"] = series
with open(out, "w") as f:
    json.dump(result, f)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
