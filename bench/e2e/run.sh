#!/usr/bin/env bash
# End-to-end benchmarks (run through `scripts/bench e2e`):
#   round:      mean round time, dense vs topk vs gaussiank (rho = 0.001), 4 workers / 2 servers,
#               D = 1e7 synthetic and FNN-3, over netns-emulated 1 Gbit/s and 10 Gbit/s links
#               (deploy/local/netns/run; needs root). Skipped with a message when not root.
#   server_cpu: server CPU time per round and peak RSS of server and worker vs D in {1e6, 1e7, 1e8}
#               at fixed k = 1e4 (topk, BSP, 1 server, 1 worker, loopback). CPU per round is the
#               difference of two runs (R1 and R2 rounds) divided by R2 - R1, so start-up work
#               (initial weights, dense pull) cancels out. CPU and peak RSS come from getrusage
#               (bench/e2e/rusage.py).
# usage: bench/e2e/run.sh [--quick] [--parts=round,server_cpu]
#   --quick: synthetic only in `round`, D <= 1e7 in `server_cpu`.
# Writes results/bench/e2e-<timestamp>/ (logs) and results/bench/e2e-<timestamp>.json, prints tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${SIEVE_BUILD_DIR:-build}
quick=0
parts=round,server_cpu
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --parts=*) parts=${a#*=} ;;
    *) echo "usage: bench/e2e/run.sh [--quick] [--parts=round,server_cpu]" >&2; exit 2 ;;
  esac
done
stamp=$(date +%Y%m%d-%H%M%S)
out="results/bench/e2e-$stamp"
mkdir -p "$out"
rows="$out/rows.jsonl"
: >"$rows"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# Worker summary field: summary_field LOG KEY -> value of the first `sieve-worker summary:` line.
summary_field() { sed -n "s/.*sieve-worker summary: .* $2=\([^ ]*\).*/\1/p" "$1" | head -1; }

if [[ ",$parts," == *,round,* ]]; then
  if [ "$(id -u)" != 0 ]; then
    echo "e2e round: skipped (needs root for network namespaces)" >&2
  else
    models=(synthetic)
    [ $quick = 1 ] || models+=(fnn3)
    for model in "${models[@]}"; do
      for link in 1gbit 10gbit; do
        for comp in none topk gaussiank; do
          cell="round-$model-$link-$comp"
          logs="$out/$cell"
          if [ "$model" = synthetic ]; then
            mflags=(--model=synthetic --num_params=10000000 --rounds_per_epoch=10 --epochs=1)
          else
            mflags=(--model=fnn3 --epochs=1 --batch_size=32)
          fi
          echo "e2e: $cell" >&2
          rc=0
          deploy/local/netns/run --build="$BUILD" --num_servers=2 --num_workers=4 --link="$link" \
            --log_dir="$logs" --quiet --timeout=1200 -- "${mflags[@]}" --compressor="$comp" \
            --density=0.001 --progress=log --heartbeat_timeout_ms=120000 \
            --metrics_out="$PWD/$logs/metrics-{rank}.jsonl" || rc=$?
          /usr/bin/python3 - "$logs" "$model" "$link" "$comp" "$rc" >>"$rows" <<'PY'
import glob, json, re, sys
logs, model, link, comp, rc = sys.argv[1:]
rounds, per_worker = 0, []
for f in sorted(glob.glob(logs + "/worker*.log")):
    m = re.search(r"sieve-worker summary: .*rounds=(\d+) .*mean_round_s=([0-9.e+-]+)", open(f).read())
    if m:
        rounds = int(m.group(1)); per_worker.append(float(m.group(2)))
parts = {"t_compute": [], "t_select": [], "t_comm": [], "bytes_up": [], "bytes_down": []}
for line in open(logs + "/metrics-0.jsonl") if glob.glob(logs + "/metrics-0.jsonl") else []:
    r = json.loads(line)
    for k in parts:
        parts[k].append(r.get(k) or 0)
mean = lambda xs: sum(xs) / len(xs) if xs else None
row = {"part": "round", "model": model, "link": link, "compressor": comp, "density": 0.001,
       "workers": 4, "servers": 2, "exit": int(rc), "rounds": rounds,
       "mean_round_s": mean(per_worker), "per_worker_mean_round_s": per_worker}
row.update({k + "_mean": mean(v) for k, v in parts.items()})
print(json.dumps(row))
PY
        done
      done
    done
  fi
fi

if [[ ",$parts," == *,server_cpu,* ]]; then
  ds=(1000000 10000000)
  [ $quick = 1 ] || ds+=(100000000)
  k=10000
  r1=10
  r2=60
  for d in "${ds[@]}"; do
    density=$(awk -v k=$k -v d="$d" 'BEGIN { printf "%.10g", k / d }')
    for rounds in $r1 $r2; do
      cell="cpu-d$d-r$rounds"
      logs="$out/$cell"
      mkdir -p "$logs"
      echo "e2e: $cell" >&2
      common=(--model=synthetic --num_params="$d" --bind=127.0.0.1 --host=127.0.0.1
              --heartbeat_timeout_ms=120000)
      "$BUILD/scheduler/sieve-scheduler" --port=0 --bind=127.0.0.1 --host=127.0.0.1 \
        --num_servers=1 --num_workers=1 >"$logs/scheduler.log" 2>&1 &
      sched=$!
      port=""
      for _ in $(seq 1 100); do
        port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$logs/scheduler.log")
        [ -n "$port" ] && break
        sleep 0.1
      done
      /usr/bin/python3 bench/e2e/rusage.py "$logs/server.time" "$BUILD/server/sieve-server" "${common[@]}" \
        --scheduler=127.0.0.1:"$port" >"$logs/server.log" 2>&1 &
      server=$!
      rc=0
      /usr/bin/python3 bench/e2e/rusage.py "$logs/worker.time" "$BUILD/worker/sieve-worker" "${common[@]}" \
        --scheduler=127.0.0.1:"$port" --compressor=topk --density="$density" \
        --rounds_per_epoch=$rounds --epochs=1 --progress=log >"$logs/worker.log" 2>&1 || rc=$?
      wait $server || rc=$?
      wait $sched || rc=$?
      echo "{\"part\":\"server_cpu_run\",\"d\":$d,\"k\":$k,\"rounds\":$rounds,\"exit\":$rc," \
        "\"server\":$(tail -1 "$logs/server.time"),\"worker\":$(tail -1 "$logs/worker.time")}" >>"$rows"
    done
  done
fi

/usr/bin/python3 - "$rows" "$out.json" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, platform, os, sys
rows_path, out_path, load_start, load_end = sys.argv[1:]
rows = [json.loads(l) for l in open(rows_path) if l.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
meta = {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
        "loadavg_start": load_start, "loadavg_end": load_end}
# Round times, with topk and gaussiank as a fraction of dense from the same run.
rt = [r for r in rows if r["part"] == "round"]
if rt:
    print("\n| model | link | compressor | rounds | mean round (s) | / dense | compute ms | select ms | comm ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rt:
        dense = next((x["mean_round_s"] for x in rt if x["model"] == r["model"] and
                      x["link"] == r["link"] and x["compressor"] == "none"), None)
        r["fraction_of_dense"] = (r["mean_round_s"] / dense) if dense and r["mean_round_s"] else None
        ms = lambda v: "%.1f" % (1e3 * v) if v is not None else "-"
        print("| %s | %s | %s | %d | %s | %s | %s | %s | %s |" % (
            r["model"], r["link"], r["compressor"], r["rounds"],
            "%.4f" % r["mean_round_s"] if r["mean_round_s"] else "failed(%d)" % r["exit"],
            "%.3f" % r["fraction_of_dense"] if r["fraction_of_dense"] else "-",
            ms(r.get("t_compute_mean")), ms(r.get("t_select_mean")), ms(r.get("t_comm_mean"))))
# Server CPU per round = difference of the two runs; peak RSS from the longer run.
cpu_runs = [r for r in rows if r["part"] == "server_cpu_run"]
derived = []
for d in sorted({r["d"] for r in cpu_runs}):
    runs = sorted((r for r in cpu_runs if r["d"] == d), key=lambda r: r["rounds"])
    if len(runs) != 2:
        continue
    a, b = runs
    cpu_s = lambda r: r["server"]["user_s"] + r["server"]["sys_s"]
    per_round = (cpu_s(b) - cpu_s(a)) / (b["rounds"] - a["rounds"])
    derived.append({"part": "server_cpu", "d": d, "k": b["k"], "server_cpu_ms_per_round": 1e3 * per_round,
                    "server_peak_rss_mb": b["server"]["max_rss_kb"] / 1024,
                    "worker_peak_rss_mb": b["worker"]["max_rss_kb"] / 1024,
                    "server_bytes_per_param": b["server"]["max_rss_kb"] * 1024 / d,
                    "worker_bytes_per_param": b["worker"]["max_rss_kb"] * 1024 / d,
                    "exit": max(a["exit"], b["exit"])})
if derived:
    base = derived[0]["server_cpu_ms_per_round"]
    print("\n| D | k | server CPU ms/round | x vs D=%g | server peak RSS MB (B/param) | worker peak RSS MB (B/param) |" % derived[0]["d"])
    print("|---|---|---|---|---|---|")
    for r in derived:
        r["growth_vs_smallest"] = r["server_cpu_ms_per_round"] / base if base > 0 else None
        print("| %g | %d | %.3f | %s | %.0f (%.1f) | %.0f (%.1f) |" % (
            r["d"], r["k"], r["server_cpu_ms_per_round"],
            "%.2f" % r["growth_vs_smallest"] if r["growth_vs_smallest"] else "-",
            r["server_peak_rss_mb"], r["server_bytes_per_param"],
            r["worker_peak_rss_mb"], r["worker_bytes_per_param"]))
json.dump({"benchmark": "e2e", "meta": meta, "rows": rows + derived}, open(out_path, "w"), indent=1)
print("\nhardware: %s, %d cores, load %s -> %s; json: %s" % (cpu, meta["cores"], load_start, load_end, out_path))
PY
