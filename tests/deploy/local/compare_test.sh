#!/usr/bin/env bash
# `sieve compare` on a 2-cell grid (BSP vs ASP, synthetic model, 2 workers, 10 rounds each): the
# CSV, the Markdown table and every PNG with data must exist and parse, a second run reuses both finished cells (same cache key), a third after editing the YAML (epochs
# 2 -> 1) reruns both; an unknown top-level key and a flag no daemon defines (--dry_run) exit 2
# naming them. Usage: compare_test.sh BUILD_DIR. Exit 77 (skipped) when Debian's python3 lacks
# yaml or matplotlib (scripts/setup installs them).
set -euo pipefail
build=$1
source "$(dirname "$0")/compare_prelude.sh"
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
# --dry_run: the flags are checked against the daemons; nothing runs.
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" --dry_run >"$dir/dry.txt" 2>&1 ||
  { cat "$dir/dry.txt"; fail "dry run of a good grid failed"; }
[ "$(grep -c -- '-local$' "$dir/dry.txt")" = 2 ] || { cat "$dir/dry.txt"; fail "dry run lists"; }
[ ! -e "$dir/out/cells" ] || fail "dry run created cells"
sed 's/^  epochs: 2$/  epochs: 2\n  desnity_warmup: 0.5/' "$dir/grid.yaml" >"$dir/typo.yaml"
set +e
"$build/deploy/sieve" compare "$dir/typo.yaml" --out="$dir/out" --dry_run >"$dir/typo.txt" 2>&1
rc=$?
set -e
[ $rc = 2 ] || { cat "$dir/typo.txt"; fail "a flag no daemon defines: exit $rc, want 2"; }
grep -q "cell bsp-topk-d0.01-w2-local: flag --desnity_warmup is not defined by any daemon" \
  "$dir/typo.txt" || { cat "$dir/typo.txt"; fail "dry run does not name the cell and flag"; }
grep -q "did you mean 'density_warmup'" "$dir/typo.txt" || fail "no suggestion"
printf 'repeat: 2\n' | cat "$dir/grid.yaml" - >"$dir/key.yaml"
set +e
"$build/deploy/sieve" compare "$dir/key.yaml" --dry_run >"$dir/key.txt" 2>&1
rc=$?
set -e
[ $rc = 2 ] && grep -q "unknown key 'repeat' (did you mean 'repeats'?)" "$dir/key.txt" ||
  { cat "$dir/key.txt"; fail "unknown top-level key: exit $rc"; }

"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/run1.txt" 2>&1 ||
  { cat "$dir/run1.txt"; fail "first run failed"; }
$py - "$dir/out" <<'PY' || fail "outputs do not parse"
import csv, sys, os
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
assert [r["cell"] for r in rows] == ["bsp-topk-d0.01-w2-local", "asp-topk-d0.01-w2-local"], rows
for r in rows:
    assert r["status"] == "ok" and float(r["rounds"]) == 10, r
    assert float(r["bytes_up_per_round"]) > 0 and float(r["mean_contraction"]) < 1, r
    assert 0 < float(r["push_ratio"]) < 0.05 and float(r["train_s"]) > 0, r
    assert r["runs"] == "1" and r["runs_ok"] == "1", r
# ASP reports its staleness (two workers: a lead of at most a few rounds); BSP has none.
assert rows[1]["max_staleness"] != "" and rows[1]["mean_staleness"] != "", rows[1]
assert float(rows[1]["mean_staleness"]) <= float(rows[1]["max_staleness"]), rows[1]
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
assert [r["run"] for r in runs] == [r["cell"] for r in rows], runs
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
for png in ["loss", "bytes_per_round", "round_breakdown", "contraction", "histograms"]:
    data = open(os.path.join(out, png + ".png"), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000, png
    assert png + ".png" in "\n".join(md), png
# The synthetic model has no test accuracy: no accuracy figure is written or listed.
for png in ["accuracy_vs_time", "accuracy_vs_epoch"]:
    assert not os.path.exists(os.path.join(out, png + ".png")), png
    assert png not in "\n".join(md), png
print("outputs ok")
PY
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/run2.txt" 2>&1 ||
  { cat "$dir/run2.txt"; fail "second run failed"; }
[ "$(grep -c "unchanged since it finished, reused" "$dir/run2.txt")" = 2 ] ||
  { cat "$dir/run2.txt"; fail "second run did not reuse the finished cells"; }
grep -q "running" "$dir/run2.txt" && fail "second run reran a cell"

# Edited YAML: every cell reruns, says why, and the table shows the new runs (5 rounds each).
sed 's/^  epochs: 2$/  epochs: 1/' "$dir/grid.yaml" >"$dir/grid1.yaml"
"$build/deploy/sieve" compare "$dir/grid1.yaml" --out="$dir/out" >"$dir/run3.txt" 2>&1 ||
  { cat "$dir/run3.txt"; fail "third run failed"; }
[ "$(grep -c "rerunning, changed: --epochs 2 -> 1" "$dir/run3.txt")" = 2 ] ||
  { cat "$dir/run3.txt"; fail "an edited YAML did not rerun both cells"; }
$py - "$dir/out" <<'PY' || fail "third run's table"
import csv, sys, os
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "summary.csv"))))
assert [float(r["rounds"]) for r in rows] == [5, 5], rows
PY
echo "PASS"
