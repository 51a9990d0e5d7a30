# Sourced by the `sieve compare` tests (compare_test.sh, compare_worker_cmd_test.sh): picks
# Debian's python3 as `py` and skips the test (exit 77) when it lacks yaml or matplotlib
# (scripts/setup installs them); defines fail MESSAGE (prints FAIL: MESSAGE, exit 1); makes a
# scratch directory `dir`, removed on exit.
py=/usr/bin/python3
[ -x $py ] || py=python3
$py -c "import yaml, matplotlib" 2>/dev/null || {
  echo "SKIPPED: python3-yaml / python3-matplotlib missing (run scripts/setup)"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
