#!/usr/bin/env bash
# Server CPU time per round and peak/steady memory vs D at fixed k, on loopback (no root needed).
#
#   bench/e2e/server_cpu.sh [--build=DIR] [--ds=1000000,10000000,100000000] [--k=10000]
#                           [--servers=1] [--workers=2] [--rounds=40] [--skip=5]
#                           [--mem_limit_gb=8] [--out=DIR]
#
# For every D: one job (scheduler, S servers, W workers, synthetic model with
# --synthetic_noise=pool, topk with k pairs per worker, BSP, R rounds), each daemon run under
# bench/e2e/rusage.py (getrusage CPU and peak RSS; per-thread CPU sampled from /proc every 10 ms).
# Server CPU per round is the least-squares slope of the servers' CPU time against rounds done,
# sampled whenever worker 0's per-round metrics file grows (rusage.py --watch), over rounds
# SKIP..R: start-up (initial weights, the dense pull, connection set-up, first-touch page faults)
# lies before the window and does not enter the slope. The slope of the main thread alone (the
# data path: ShardServer and reply encoding) is printed next to the whole process's; the rest is
# the node I/O thread (decode, CRC, heartbeats) and ZeroMQ's threads. Idle work (polls every
# 100-200 ms, a heartbeat a second) grows with wall time, so the wall time per round is printed
# too. Memory per parameter of a shard (servers) or of D (workers): peak RSS (whole run, start-up
# included, from getrusage) and steady RSS (VmRSS at the last round).
# Every daemon runs under `ulimit -v` of --mem_limit_gb GiB, so a runaway process fails its cell
# instead of exhausting a shared machine's memory (at D = 1e8 with 2 workers the dense pull's
# resends drove one server to 23 GB; docs/results.md, "Memory").
# After each job, bench_access_floor measures the machine's floor at that D: the same number of
# scattered read-modify-writes (k x W) into a D-float array allocated like the shard, back to back
# ("busy") and after sleeping the job's wall time per round ("idle"), in CPU ms per round.
# Writes OUT/rows.jsonl (default results/bench/server-cpu-<timestamp>/) and prints a table with
# the load average before and after. Loopback only: the links play no part.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${SIEVE_BUILD_DIR:-build}
ds=1000000,10000000,100000000
k=10000
servers=1
workers=2
rounds=40
skip=5
mem_limit_gb=8
out=""
for a in "$@"; do
  case "$a" in
    --build=*) build=${a#*=} ;;
    --ds=*) ds=${a#*=} ;;
    --k=*) k=${a#*=} ;;
    --servers=*) servers=${a#*=} ;;
    --workers=*) workers=${a#*=} ;;
    --rounds=*) rounds=${a#*=} ;;
    --skip=*) skip=${a#*=} ;;
    --mem_limit_gb=*) mem_limit_gb=${a#*=} ;;
    --out=*) out=${a#*=} ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
IFS=, read -r -a d_list <<<"$ds"
[ "$rounds" -ge $((skip + 5)) ] || { echo "server_cpu: need --rounds >= --skip + 5" >&2; exit 2; }
[ -n "$out" ] || out="results/bench/server-cpu-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rows="$out/rows.jsonl"
: >"$rows"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rusage=bench/e2e/rusage.py
ulimit -v $((mem_limit_gb * 1024 * 1024))  # KiB; inherited by every daemon started below

for d in "${d_list[@]}"; do
  density=$(awk -v k="$k" -v d="$d" 'BEGIN { printf "%.10g", k / d }')
  logs="$out/d$d"
  mkdir -p "$logs"
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "server_cpu: D=$d rounds=$rounds (load $load)" >&2
  common=(--model=synthetic --num_params="$d" --bind=127.0.0.1 --host=127.0.0.1
          --heartbeat_timeout_ms=120000)
  rm -f "$logs/scheduler.port"
  "$build/scheduler/sieve-scheduler" --port=0 --bind=127.0.0.1 --host=127.0.0.1 \
    --heartbeat_timeout_ms=120000 --num_servers="$servers" --num_workers="$workers" \
    --port_file="$logs/scheduler.port" >"$logs/scheduler.log" 2>&1 &
  pids=($!)
  port=""
  for _ in $(seq 1 100); do
    # "HOST:PORT\n", replaced atomically: once there it is whole.
    [ -s "$logs/scheduler.port" ] && port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$logs/scheduler.port")
    [ -n "$port" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || {
      echo "server_cpu: scheduler exited before writing its port file" >&2
      exit 1
    }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "server_cpu: scheduler did not start" >&2; exit 1; }
  for ((s = 0; s < servers; s++)); do
    /usr/bin/python3 "$rusage" --watch="$logs/metrics-0.jsonl" "$logs/server$s.time" \
      "$build/server/sieve-server" "${common[@]}" --scheduler=127.0.0.1:"$port" --rank="$s" \
      >"$logs/server$s.log" 2>&1 &
    pids+=($!)
  done
  for ((w = 0; w < workers; w++)); do
    /usr/bin/python3 "$rusage" --watch="$logs/metrics-$w.jsonl" "$logs/worker$w.time" \
      "$build/worker/sieve-worker" "${common[@]}" --scheduler=127.0.0.1:"$port" --rank="$w" \
      --compressor=topk \
      --density="$density" --synthetic_noise=pool --rounds_per_epoch="$rounds" --epochs=1 \
      --progress=log --metrics_out="$logs/metrics-{rank}.jsonl" >"$logs/worker$w.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  /usr/bin/python3 - "$logs" "$d" "$k" "$rounds" "$skip" "$rc" "$servers" "$workers" "$load" \
    >>"$rows" <<'PY'
import glob, json, sys
logs, d, k, rounds, skip, rc, servers, workers, load = sys.argv[1:]
skip = int(skip)


def slope(points):
    """Least-squares slope of y over x; None with fewer than 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


row = {"d": int(d), "k": int(k), "rounds": int(rounds), "skip": skip, "exit": int(rc),
       "servers": int(servers), "workers": int(workers), "load_start": float(load),
       "load_end": float(open("/proc/loadavg").read().split()[0]),
       "server": [json.load(open(f)) for f in sorted(glob.glob(logs + "/server*.time"))],
       "worker": [json.load(open(f)) for f in sorted(glob.glob(logs + "/worker*.time"))]}
# Per server: slopes over rounds skip..R of [wall_s, lines, cpu_s, main_s, zmq_s, other_s]
# (rusage.py --watch); CPU slopes summed over the servers, the wall slope their maximum.
fits = {"cpu_s": 2, "main_s": 3, "zmq_s": 4, "other_s": 5, "wall_s": 0}
for name, col in fits.items():
    per = [slope([(p[1], p[col]) for p in s.get("series", []) if p[1] >= skip])
           for s in row["server"]]
    row[name + "_per_round"] = (None if any(v is None for v in per) else
                                (max(per) if name == "wall_s" else sum(per)))
# Largest server RSS at its last sample: the steady state (start-up transients are gone by then).
row["server_steady_rss_kb"] = max((s["series"][-1][6] for s in row["server"] if s.get("series")),
                                  default=0)
row["worker_steady_rss_kb"] = max((w["series"][-1][6] for w in row["worker"] if w.get("series")),
                                  default=0)
row["steady_points"] = min(len([p for p in s.get("series", []) if p[1] >= skip])
                           for s in row["server"]) if row["server"] else 0
print(json.dumps(row))
PY
  # The memory floor at this D (bench_access_floor): the same number of scattered read-modify-
  # writes into a shard-sized array, after sleeping the server's wall time per round.
  idle_ms=$(/usr/bin/python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(max(1, round(1e3 * (r["wall_s_per_round"] or 0.1))))' "$rows")
  floor=$("$build/bench/e2e/bench_access_floor" --num_params="$d" --pairs=$((k * workers)) \
    --rounds=15 --idle_ms="$idle_ms" 2>"$logs/floor.log") || floor='{}'
  /usr/bin/python3 - "$rows" "$floor" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
row = json.loads(lines[-1])
row["floor"] = json.loads(sys.argv[2])
lines[-1] = json.dumps(row)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
done

/usr/bin/python3 - "$rows" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ms = lambda v: "%.3f" % (1e3 * v) if v is not None else "-"
mb = lambda kb, params: "%.0f (%.1f)" % (kb / 1024, kb * 1024 / params)
fl = lambda r: r.get("floor") if r.get("floor", {}).get("idle_ms_per_round") else None
print("\n| D | k/worker | server CPU ms/round | x vs first | main thread ms/round | x vs first | "
      "zmq + other threads ms/round | wall ms/round | floor ms/round (busy / idle) | "
      "x vs first (idle) | server peak RSS MB (B/param of shard) | "
      "server steady RSS MB (B/param) | worker peak RSS MB (B/param) | "
      "worker steady RSS MB (B/param) | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
base = None
for r in sorted(rows, key=lambda r: r["d"]):
    if r["exit"] or r["cpu_s_per_round"] is None:
        print("| %g | failed (exit %d, %d steady points) |" % (r["d"], r["exit"], r["steady_points"]))
        continue
    base = base or r
    shard = r["d"] / r["servers"]
    cells = [
        "%g" % r["d"], str(r["k"]), ms(r["cpu_s_per_round"]),
        "%.2f" % (r["cpu_s_per_round"] / base["cpu_s_per_round"]), ms(r["main_s_per_round"]),
        "%.2f" % (r["main_s_per_round"] / base["main_s_per_round"]),
        "%s + %s" % (ms(r["zmq_s_per_round"]), ms(r["other_s_per_round"])),
        "%.1f" % (1e3 * r["wall_s_per_round"]),
        "%.3f / %.3f" % (fl(r)["busy_ms"], fl(r)["idle_ms_per_round"]) if fl(r) else "-",
        "%.2f" % (fl(r)["idle_ms_per_round"] / fl(base)["idle_ms_per_round"])
        if fl(r) and fl(base) else "-",
        mb(max(s["max_rss_kb"] for s in r["server"]), shard),
        mb(r["server_steady_rss_kb"], shard),
        mb(max(w["max_rss_kb"] for w in r["worker"]), r["d"]),
        mb(r["worker_steady_rss_kb"], r["d"]),
        "%.1f-%.1f" % (r["load_start"], r["load_end"])]
    print("| " + " | ".join(cells) + " |")
print("\nfloor: bench_access_floor, %d scattered read-modify-writes per round into a D-float array "
      "(busy: back to back; idle: after sleeping the wall time per round)" %
      (rows[0]["k"] * rows[0]["workers"]))
print("slopes over rounds >= %d of %d; load %s -> %s; rows: %s" % (
    rows[0]["skip"], rows[0]["rounds"], sys.argv[2], sys.argv[3], sys.argv[1]))
PY
