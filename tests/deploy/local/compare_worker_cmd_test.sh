#!/usr/bin/env bash
# `sieve compare` with a `worker_cmd:` key: a 1-cell grid whose workers are env_worker.sh (a
# worker command started from the launcher's environment alone) runs and reports its rounds, the
# command is part of the cache key, and worker_cmd with a netns link or of the wrong type is a
# usage error (exit 2). Usage: compare_worker_cmd_test.sh BUILD_DIR SOURCE_DIR. Exit 77 (skipped)
# when Debian's python3 lacks yaml or matplotlib (scripts/setup installs them).
set -euo pipefail
build=$1
src=$2
source "$(dirname "$0")/compare_prelude.sh"
export SIEVE_WORKER_BIN=$build/worker/sieve-worker
cat >"$dir/grid.yaml" <<YAML
name: compare-worker-cmd
worker_cmd: $src/tests/deploy/local/env_worker.sh
flags:
  model: synthetic
  num_params: 20000
  rounds_per_epoch: 5
  epochs: 2
grid:
  compressor: [topk]
  density: [0.01]
  workers: [2]
  straggler: ["1:x2"]
timeout: 60
YAML
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/run.txt" 2>&1 ||
  { cat "$dir/run.txt"; fail "the run failed"; }
$py - "$dir/out" "$src/tests/deploy/local/env_worker.sh" <<'PY' || fail "outputs"
import csv, json, os, sys
out, cmd = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
assert len(rows) == 1 and rows[0]["status"] == "ok" and float(rows[0]["rounds"]) == 10, rows
cell = os.path.join(out, "cells", rows[0]["cell"])
key = json.load(open(os.path.join(cell, "key.json")))["inputs"]
assert key["launcher"]["worker_cmd"] == cmd, key
assert key["programs"]["worker_cmd:" + cmd] not in ("", "missing"), key
PY
# The same grid again: reused (same key).
"$build/deploy/sieve" compare "$dir/grid.yaml" --out="$dir/out" >"$dir/again.txt" 2>&1 ||
  { cat "$dir/again.txt"; fail "second run failed"; }
grep -qi "reus" "$dir/again.txt" || { cat "$dir/again.txt"; fail "the finished cell was not reused"; }

expect_usage() {  # YAML_FILE MESSAGE
  set +e
  "$build/deploy/sieve" compare "$1" --out="$dir/bad" --dry_run >"$dir/bad.txt" 2>&1
  local rc=$?
  set -e
  [ $rc = 2 ] && grep -qF "$2" "$dir/bad.txt" || { cat "$dir/bad.txt"; fail "$1: exit $rc"; }
}
sed 's/^  straggler: .*/  link: [1gbit]/' "$dir/grid.yaml" >"$dir/netns.yaml"
expect_usage "$dir/netns.yaml" "worker_cmd runs only on local links (sieve launch), not on link 1gbit"
sed 's/^worker_cmd: .*/worker_cmd: [a, b]/' "$dir/grid.yaml" >"$dir/list.yaml"
expect_usage "$dir/list.yaml" "'worker_cmd' must be a command line (a string)"
echo PASS
