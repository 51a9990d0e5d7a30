#!/usr/bin/env bash
# Accuracy comparison on the local cluster (4 workers, 2 servers, FNN-3 on Fashion-MNIST, batch 32
# per worker, lr 0.1, momentum 0.9): dense BSP vs topk vs gaussiank (rho = 0.001 after the paper's
# density warm-up) and ASP; lr x0.1 at 70 % and 90 % of the epochs.
#   usage: bench/e2e/accuracy.sh [EPOCHS]          (default 20)
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
  if [ -f "$OUT/$name.log" ] && grep -q "sieve-worker summary: rank=0" "$OUT/$name.log"; then return; fi
  "$BUILD/deploy/sieve" launch --num_servers=2 --num_workers=4 -- "${common[@]}" "$@" >"$OUT/$name.log" 2>&1
}
run dense_bsp --compressor=none --consistency=bsp
run topk_bsp --compressor=topk "${sparse[@]}" --consistency=bsp
run gaussiank_bsp --compressor=gaussiank "${sparse[@]}" --consistency=bsp
run topk_asp --compressor=topk "${sparse[@]}" --consistency=asp
echo "| run | epochs | test accuracy | bytes pushed / dense | mean round (s) |"
echo "|---|---|---|---|---|"
for name in dense_bsp topk_bsp gaussiank_bsp topk_asp; do
  line=$(grep -h "sieve-worker summary: rank=0 " "$OUT/$name.log" | tail -1)
  acc=$(sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p' <<<"$line")
  ratio=$(sed -n 's/.* ratio=\([0-9.e-]*\).*/\1/p' <<<"$line")
  round=$(sed -n 's/.*mean_round_s=\([0-9.e-]*\).*/\1/p' <<<"$line")
  echo "| $name | $EPOCHS | $acc | $ratio | $round |"
done
