#!/usr/bin/env bash
# Accuracy comparison on the local cluster (4 workers, 2 servers, FNN-3 on Fashion-MNIST, batch 32
# per worker, lr 0.1, momentum 0.9): dense BSP vs topk vs gaussiank (rho = 0.001 after the paper's
# density warm-up) and ASP; lr x0.1 at 70 % and 90 % of the epochs.
#   usage: bench/e2e/accuracy.sh [EPOCHS]          (default 20)
# Each run writes results/accuracy-e<EPOCHS>/<run>.log and its servers' and workers' summaries
# (--summary_out) to results/accuracy-e<EPOCHS>/<run>/; a run whose worker 0 summary is there is
# not run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
EPOCHS=${1:-20}
BUILD=${SIEVE_BUILD_DIR:-build}
OUT=results/accuracy-e${EPOCHS}
mkdir -p "$OUT"
common=(--model=fnn3 --epochs="$EPOCHS" --lr=0.1 --momentum=0.9 --batch_size=32 --lr_steps="$((EPOCHS * 7 / 10)),$((EPOCHS * 9 / 10))" --lr_gamma=0.1 --heartbeat_timeout_ms=60000)
sparse=(--density=0.001 --density_warmup=0.015625,0.004)
run() {
  local name=$1; shift
  if [ -f "$OUT/$name/worker-0.json" ]; then return; fi
  mkdir -p "$OUT/$name"
  "$BUILD/deploy/sieve" launch --num_servers=2 --num_workers=4 -- "${common[@]}" "$@" \
    --summary_out="$OUT/$name/{role}-{rank}.json" >"$OUT/$name.log" 2>&1
}
run dense_bsp --compressor=none --consistency=bsp
run topk_bsp --compressor=topk "${sparse[@]}" --consistency=bsp
run gaussiank_bsp --compressor=gaussiank "${sparse[@]}" --consistency=bsp
run topk_asp --compressor=topk "${sparse[@]}" --consistency=asp
echo "| run | epochs | test accuracy | bytes pushed / dense | mean round (s) |"
echo "|---|---|---|---|---|"
for name in dense_bsp topk_bsp gaussiank_bsp topk_asp; do
  # Test accuracy, bytes pushed / dense and mean round time from worker 0's summary.
  /usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1] + "/worker-0.json"))
print("| %s | %s | %.4f | %.6g | %.6g |" % (sys.argv[2], sys.argv[3], s["test_acc"], s["ratio"],
                                          s["mean_round_s"]))' "$OUT/$name" "$name" "$EPOCHS"
done
