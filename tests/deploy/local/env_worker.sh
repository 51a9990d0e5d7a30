#!/bin/sh
# A `sieve launch --worker_cmd` started from the launcher's environment alone (worker_env.h,
# docs/worker-api.md "Environment variables"): runs sieve-worker ($SIEVE_WORKER_BIN) with the job
# from the SIEVE_* variables and the worker flags of SIEVE_WORKER_FLAGS. With SIEVE_HELPXML=1 it
# lists sieve-worker's flags and exits 0. Its own argv is ignored (the launcher passes none).
if [ "$SIEVE_HELPXML" = 1 ]; then
  "$SIEVE_WORKER_BIN" --helpxml
  exit 0
fi
eval "set -- $SIEVE_WORKER_FLAGS"
exec "$SIEVE_WORKER_BIN" --scheduler="$SIEVE_SCHEDULER" --rank="$SIEVE_RANK" \
  --bind="$SIEVE_BIND" --host="$SIEVE_HOST" --job_token_file="$SIEVE_JOB_TOKEN_FILE" \
  ${SIEVE_CURVE_DIR:+--curve_dir="$SIEVE_CURVE_DIR"} \
  ${SIEVE_CURVE_KEY:+--curve_key="$SIEVE_CURVE_KEY"} \
  ${SIEVE_METRICS_PORT:+--metrics_port="$SIEVE_METRICS_PORT"} "$@"
