#!/usr/bin/env bash
# End-to-end benchmarks (run through `scripts/bench e2e`):
#   round:      round time, dense vs topk vs gaussiank (rho = 0.001), 4 workers / 2 servers,
#               D = 1e7 synthetic (--synthetic_noise=pool, 20 rounds) and FNN-3, over
#               netns-emulated 1 Gbit/s and 10 Gbit/s links (deploy/local/netns/run; needs root).
#               Skipped with a message when not root. Per cell: the steady round time (mean over
#               the workers of their per-round compute + select + comm from the metrics files,
#               rounds >= 2: round 0 carries the start-up's dense pull) and the workers'
#               mean_round_s (all rounds; their summaries, --summary_out files in the cell's
#               directory), with the load average at the cell's start.
#   server_cpu: bench/e2e/server_cpu.sh: server CPU time per round (slope over the steady rounds)
#               and peak RSS of servers and workers vs D in {1e6, 1e7, 1e8} at fixed k = 1e4
#               (topk, BSP, 1 server, 2 workers, loopback).
# usage: bench/e2e/run.sh [--quick] [--parts=round,server_cpu] [--links=1gbit,10gbit]
#          [--compressors=none,topk,gaussiank] [--density=0.001] [--wire=v5] [--values=fp32]
#          [--tcp_cc=NAME]
#   --quick: synthetic only in `round`, D <= 1e7 in `server_cpu`.
#   --wire=v4,v5: each `round` cell once per wire format (v4: raw uint32 indices, v5: the compact
#   index coding), in the same run, with the v5 / v4 round-time ratio printed; --values: the
#   job's --wire_values (fp32, fp16, bf16) for both.
#   --tcp_cc=NAME: every connection's TCP congestion control (netns/run --tcp_cc); default the
#   kernel's. Each row records it ("default:NAME" for the kernel's).
# The daemons come from $SIEVE_BUILD_DIR (default build).
# Writes results/bench/e2e-<timestamp>/ (logs) and results/bench/e2e-<timestamp>.json, prints tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${SIEVE_BUILD_DIR:-build}
quick=0
parts=round,server_cpu
links=1gbit,10gbit
compressors=none,topk,gaussiank
density=0.001
wires=v5
values=fp32
tcp_cc=""
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --parts=*) parts=${a#*=} ;;
    --links=*) links=${a#*=} ;;
    --compressors=*) compressors=${a#*=} ;;
    --density=*) density=${a#*=} ;;
    --wire=*) wires=${a#*=} ;;
    --values=*) values=${a#*=} ;;
    --tcp_cc=*) tcp_cc=${a#*=} ;;
    *) echo "usage: bench/e2e/run.sh [--quick] [--parts=round,server_cpu] [--links=LIST]" \
            "[--compressors=LIST] [--density=RHO] [--wire=v4,v5] [--values=fp32|fp16|bf16]" \
            "[--tcp_cc=NAME]" >&2
       exit 2 ;;
  esac
done
stamp=$(date +%Y%m%d-%H%M%S)
out="results/bench/e2e-$stamp"
mkdir -p "$out"
rows="$out/rows.jsonl"
: >"$rows"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
tcp_record=${tcp_cc:-default:$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)}

if [[ ",$parts," == *,round,* ]]; then
  if [ "$(id -u)" != 0 ]; then
    echo "e2e round: skipped (needs root for network namespaces)" >&2
  else
    models=(synthetic)
    [ $quick = 1 ] || models+=(fnn3)
    for model in "${models[@]}"; do
      IFS=, read -r -a link_list <<<"$links"
      for link in "${link_list[@]}"; do
        IFS=, read -r -a comp_list <<<"$compressors"
        IFS=, read -r -a wire_list <<<"$wires"
        for comp in "${comp_list[@]}"; do
         for wire in "${wire_list[@]}"; do
          cell="round-$model-$link-$comp-$wire"
          logs="$out/$cell"
          if [ "$model" = synthetic ]; then
            mflags=(--model=synthetic --num_params=10000000 --synthetic_noise=pool
                    --rounds_per_epoch=20 --epochs=1)
          else
            mflags=(--model=fnn3 --epochs=1 --batch_size=32)
          fi
          load=$(cut -d' ' -f1 /proc/loadavg)
          echo "e2e: $cell (load $load)" >&2
          rc=0
          deploy/local/netns/run --build="$BUILD" --num_servers=2 --num_workers=4 --link="$link" \
            ${tcp_cc:+--tcp_cc="$tcp_cc"} \
            --log_dir="$logs" --quiet --timeout=1200 -- "${mflags[@]}" --compressor="$comp" \
            --density="$density" --progress=log --heartbeat_timeout_ms=120000 \
            --wire="$wire" --wire_values="$values" \
            --metrics_out="$PWD/$logs/metrics-{rank}.jsonl" \
            --summary_out="$PWD/$logs/{role}-{rank}.json" || rc=$?
          /usr/bin/python3 - "$logs" "$model" "$link" "$comp" "$rc" "$load" "$density" "$wire" \
            "$values" "$tcp_record" >>"$rows" <<'PY'
import glob, json, sys
logs, model, link, comp, rc, load, density, wire, values, tcp_cc = sys.argv[1:]
rounds, per_worker = 0, []
for f in sorted(glob.glob(logs + "/worker-*.json")):  # the workers' summaries
    s = json.load(open(f))
    rounds = s["rounds"]; per_worker.append(s["mean_round_s"])
parts = {"t_compute": [], "t_select": [], "t_comm": [], "bytes_up": [], "bytes_down": []}
for line in open(logs + "/metrics-0.jsonl") if glob.glob(logs + "/metrics-0.jsonl") else []:
    r = json.loads(line)
    for k in parts:
        parts[k].append(r.get(k) or 0)
mean = lambda xs: sum(xs) / len(xs) if xs else None
# Steady round time per worker: compute + select + comm of rounds >= 2 from its metrics file.
steady = []
for f in sorted(glob.glob(logs + "/metrics-*.jsonl")):
    ts = [r["t_compute"] + r["t_select"] + r["t_comm"]
          for r in map(json.loads, open(f)) if r["round"] >= 2]
    if ts:
        steady.append(sum(ts) / len(ts))
row = {"part": "round", "model": model, "link": link, "compressor": comp,
       "density": float(density), "wire": wire, "values": values, "tcp_cc": tcp_cc,
       "workers": 4, "servers": 2, "exit": int(rc), "rounds": rounds, "load_start": float(load),
       "load_end": float(open("/proc/loadavg").read().split()[0]),
       "mean_round_s": mean(per_worker), "per_worker_mean_round_s": per_worker,
       "steady_round_s": mean(steady), "per_worker_steady_round_s": steady}
row.update({k + "_mean": mean(v[2:]) for k, v in parts.items()})
print(json.dumps(row))
PY
         done
        done
      done
    done
  fi
fi

if [[ ",$parts," == *,server_cpu,* ]]; then
  ds=1000000,10000000
  [ $quick = 1 ] || ds+=,100000000
  bench/e2e/server_cpu.sh --build="$BUILD" --ds="$ds" --out="$out/server_cpu"
  sed 's/^{/{"part": "server_cpu", /' "$out/server_cpu/rows.jsonl" >>"$rows"
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
    print("\n| model | link | compressor | wire | rounds | steady round (s) | / dense | mean round, "
          "all rounds (s) | / dense | compute ms | select ms | comm ms | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ms = lambda v: "%.1f" % (1e3 * v) if v is not None else "-"
    frac = lambda v: "%.4f (1/%.1f)" % (v, 1 / v) if v else "-"
    for r in rt:
        dense = next((x for x in rt if x["model"] == r["model"] and x["link"] == r["link"] and
                      x["compressor"] == "none" and x.get("wire") == r.get("wire")), None)
        for key in ("steady_round_s", "mean_round_s"):
            ok = dense and dense.get(key) and r.get(key)
            r["fraction_of_dense_" + key] = r[key] / dense[key] if ok else None
        print("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %.1f-%.1f |" % (
            r["model"], r["link"], r["compressor"], r.get("wire", "v5"), r["rounds"],
            "%.4f" % r["steady_round_s"] if r.get("steady_round_s") else "failed(%d)" % r["exit"],
            frac(r["fraction_of_dense_steady_round_s"]),
            "%.4f" % r["mean_round_s"] if r.get("mean_round_s") else "-",
            frac(r["fraction_of_dense_mean_round_s"]),
            ms(r.get("t_compute_mean")), ms(r.get("t_select_mean")), ms(r.get("t_comm_mean")),
            r["load_start"], r["load_end"]))
    # v5 against v4 of the same cell, same run (the target: topk rho = 0.01, 1 Gbit/s,
    # round time <= 0.6 x v4).
    for r in rt:
        if r.get("wire") != "v5":
            continue
        v4 = next((x for x in rt if x.get("wire") == "v4" and all(
            x[k] == r[k] for k in ("model", "link", "compressor", "density"))), None)
        if v4 and v4.get("steady_round_s") and r.get("steady_round_s"):
            r["steady_round_v5_over_v4"] = r["steady_round_s"] / v4["steady_round_s"]
            print("e2e wire: %s %s %s rho=%g: steady round v5 %.4f s / v4 %.4f s = %.2f" % (
                r["model"], r["link"], r["compressor"], r["density"], r["steady_round_s"],
                v4["steady_round_s"], r["steady_round_v5_over_v4"]))
json.dump({"benchmark": "e2e", "meta": meta, "rows": rows}, open(out_path, "w"), indent=1)
print("\nhardware: %s, %d cores, load %s -> %s; json: %s" % (cpu, meta["cores"], load_start, load_end, out_path))
PY
