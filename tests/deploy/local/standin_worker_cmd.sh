#!/bin/sh
# Stand-in for a `sieve launch --worker_cmd` program (a Python worker calling sieve.torch.init())
# in the launcher tests; reads only its environment.
#
# SIEVE_HELPXML=1: prints gflags-style XML listing the worker flags it implements (--lr,
# --num_params, --density) and exits 0, as sieve-worker --helpxml and the Python module do; with
# STANDIN_CMD_HELPXML=exit3 it exits 3 instead, with =noxml it prints other text and exits 0.
# Otherwise: records its arguments (one a line) in $STANDIN_DIR/cmd-$SIEVE_RANK.args and its
# SIEVE_* environment (sorted, one a line) in .env, marks itself done like a stand-in worker
# (worker-$SIEVE_RANK.done) and exits 0.
if [ "$SIEVE_HELPXML" = 1 ]; then
  case "$STANDIN_CMD_HELPXML" in
    exit3) echo "Traceback: no sieve here" >&2; exit 3 ;;
    noxml) echo "training without sieve"; exit 0 ;;
  esac
  cat <<'XML'
<?xml version="1.0"?>
<AllFlags>
<program>mlp.py</program>
<usage>stand-in worker command</usage>
<flag><file>sieve/worker.py</file><name>lr</name><meaning>learning rate</meaning><default>0.05</default><current>0.05</current><type>double</type></flag>
<flag><file>sieve/worker.py</file><name>num_params</name><meaning>D</meaning><default>0</default><current>0</current><type>int64</type></flag>
<flag><file>sieve/worker.py</file><name>density</name><meaning>k/D</meaning><default>0.01</default><current>0.01</current><type>double</type></flag>
</AllFlags>
XML
  exit 0
fi
for a in "$@"; do printf '%s\n' "$a"; done > "$STANDIN_DIR/cmd-$SIEVE_RANK.args"
env | grep '^SIEVE_' | sort > "$STANDIN_DIR/cmd-$SIEVE_RANK.env"
echo ready
echo 1 > "$STANDIN_DIR/worker-$SIEVE_RANK.done"
