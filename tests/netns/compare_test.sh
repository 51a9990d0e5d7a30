#!/usr/bin/env bash
# `sieve compare` on a 2-cell grid (BSP vs ASP, synthetic model, 2 workers, 10 rounds each): the
# CSV, the Markdown table and every PNG must exist and parse, and a second run must skip both
# finished cells (resumable). Usage: compare_test.sh BUILD_DIR. Exit 77 (skipped) when Debian's
# python3 lacks yaml or matplotlib (scripts/setup installs them).
set -euo pipefail
build=$1
py=/usr/bin/python3
[ -x $py ] || py=python3
$py -c "import yaml, matplotlib" 2>/dev/null || {
  echo "SKIPPED: python3-yaml / python3-matplotlib missing (run scripts/setup)"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/grid.yaml" <<'YAML'
name: compare-test
servers: 1
flags:
  model: synthetic
  num_params: 20000
  rounds_per_epoch: 5
  epochs: 2
  heartbeat_timeout_ms: 30000
grid:
  consistency: [bsp, asp]
  compressor: [topk]
  density: [0.01]
  workers: [2]
  link: [local]
contraction_every: 2
histogram_rounds: [0, 8]
timeout: 50
YAML
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/run1.txt" 2>&1 ||
  { cat "$dir/run1.txt"; fail "first run failed"; }
$py - "$dir/out" <<'PY' || fail "outputs do not parse"
import csv, sys, os
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
assert [r["cell"] for r in rows] == ["bsp-topk-d0.01-w2-local", "asp-topk-d0.01-w2-local"], rows
for r in rows:
    assert r["status"] == "ok" and int(r["rounds"]) == 10, r
    assert float(r["bytes_up_per_round"]) > 0 and float(r["mean_contraction"]) < 1, r
md = open(os.path.join(out, "summary.md")).read().splitlines()
table = [l for l in md if l.startswith("| ")]
assert len(table) == 3 and "bsp-topk-d0.01-w2-local" in table[1], table
# Residual histograms at rounds 0 and 8: every one of the D entries counted once; round 0's
# residual is lr * (a Gaussian gradient), so about 68 % lie within one sigma of the mean.
for cell in ("bsp-topk-d0.01-w2-local", "asp-topk-d0.01-w2-local"):
    import json
    rows = [json.loads(l) for l in open(os.path.join(out, "cells", cell, "metrics-0.jsonl"))]
    hists = {r["round"]: r for r in rows if r.get("hist")}
    assert sorted(hists) == [0, 8], sorted(hists)
    for r in hists.values():
        h = r["hist"]
        assert r["hist_width"] == 0.25 and len(h) == 48 and sum(h) == 20000, r
    within = sum(hists[0]["hist"][20:28]) / 20000
    assert 0.63 < within < 0.73, within
for png in ["accuracy_vs_time", "accuracy_vs_epoch", "loss", "bytes_per_round",
            "round_breakdown", "contraction", "histograms"]:
    data = open(os.path.join(out, png + ".png"), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000, png
print("outputs ok")
PY
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/run2.txt" 2>&1 ||
  { cat "$dir/run2.txt"; fail "second run failed"; }
[ "$(grep -c "finished before, skipped" "$dir/run2.txt")" = 2 ] ||
  { cat "$dir/run2.txt"; fail "second run did not skip the finished cells"; }
grep -q "running" "$dir/run2.txt" && fail "second run reran a cell"
echo "PASS"
