#!/usr/bin/env bash
# Integration tests of deploy/local/netns/run.
# Usage: netns_test.sh tiny_job|interrupt|uneven_links|torch_workers|ddp_ranks BUILD_DIR
#   tiny_job:  1 scheduler + 1 server + 2 workers (synthetic model, 5 rounds), each in its own
#              namespace on a 1 Gbit/s shaped link; the job must succeed, every node must have used
#              its namespace address, and no namespace or process of the run may be left.
#   interrupt: a job that would run for minutes, with --tcp_cc=reno and --upload_queue=host on
#              1 Gbit/s links, gets SIGINT once training runs (after its server's and worker's
#              connections were seen to use Reno, and tc showed the server's upload bucket with
#              1000 frames of queue and its switch port's with 100 ms); the harness must exit
#              promptly and leave nothing behind.
#   uneven_links: --link=1gbit,1:10mbit (worker 1 on a 100x slower link), dense ASP pushes of
#              80 KB: worker 1's median communication time per round is many times worker 0's;
#              the harness names the kernel's congestion control; a link for a worker the job
#              lacks, an unknown --tcp_cc and a bad --upload_queue are usage errors naming them.
#   torch_workers: --worker_cmd, the workers a sieve.torch script (examples/torch/resnet20.py, tiny,
#              20 steps) with routed worker flags, 1 server, on 1 Gbit/s links: the job succeeds,
#              both workers' run summaries say 20 rounds and worker 1 registered from its
#              namespace address; a worker flag the script does not implement is a usage error
#              (exit 2) naming it, before anything starts.
#   ddp_ranks: --ddp_cmd, the same script as 2 torch DDP ranks (gloo), one per namespace, no sieve
#              daemon: rank 0 writes its result (backend ddp, 2 workers, 20 steps). Rank 1 reaches
#              rank 0 only at node 0's namespace address (MASTER_ADDR), which the root namespace
#              does not have. Daemon flags with --ddp_cmd are a usage error.
# Exit 77 (skipped) without root or working `ip netns` (and the last two without Debian's torch).
set -euo pipefail
test_case=$1
build=$2
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 (ip, tc) not installed"
probe="sieve-probe-$$"
ip netns add "$probe" 2>/dev/null || skip "'ip netns add' does not work here"
# `ip netns exec` also needs a mount namespace with / as a mount point (not so in a bare chroot).
if ! ip netns exec "$probe" true 2>/dev/null; then
  ip netns del "$probe"
  skip "'ip netns exec' does not work here (e.g. a chroot whose / is not a mount point)"
fi
ip netns del "$probe"

name="sieve-test-$$"
subnet="10.77.$((200 + $$ % 50))"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
leftovers() {
  local ns procs
  ns=$(ip netns list | awk '{print $1}' | grep "^$name-" || true)
  [ -z "$ns" ] || fail "namespaces left behind: $ns"
  procs=$(pgrep -f -- "--bind=$subnet\." || true)
  [ -z "$procs" ] || fail "daemons left running: $procs"
}
job=(deploy/local/netns/run --build="$build" --name="$name" --subnet="$subnet" --log_dir="$logs"
     --num_servers=1 --num_workers=2 --quiet)
daemon=(--model=synthetic --num_params=20000 --compressor=topk --density=0.01 --progress=log
        --heartbeat_timeout_ms=30000)

case "$test_case" in
  tiny_job)
    rc=0
    # --port_file and --status_file go to the scheduler only (the one daemon that defines them),
    # --summary_out to the servers and workers.
    "${job[@]}" --link=1gbit --timeout=90 -- "${daemon[@]}" --rounds_per_epoch=5 --epochs=1 \
      --port_file="$logs/scheduler.port" --status_file="$logs/status.json" \
      --summary_out="$logs/{role}-{rank}.json" || rc=$?
    [ $rc = 0 ] || { tail -n 20 "$logs"/*.log; fail "job exited with $rc"; }
    # The job is over: the scheduler wrote its port file ("HOST:PORT\n") once bound.
    [ "$(cat "$logs/scheduler.port" 2>/dev/null)" = "$subnet.1:9310" ] ||
      fail "scheduler not on $subnet.1 (port file: $(cat "$logs/scheduler.port" 2>&1))"
    # The run summaries (docs/protocol.md, "Run summaries"): both workers did the 5 rounds, the
    # server applied their 10 pushes.
    summary=$(/usr/bin/python3 -c '
import json, sys
s = [json.load(open(f"{sys.argv[1]}/{name}.json")) for name in ("worker-0", "worker-1", "server-0")]
print(*[(x["rank"], x["rounds"]) for x in s[:2]], s[2]["rounds"], s[2]["applied"])' "$logs" 2>&1) ||
      true
    [ "$summary" = "(0, 5) (1, 5) 5 10" ] || fail "summaries: $summary"
    # The scheduler's final job status (docs/protocol.md, "Job status"): worker 1's row has the
    # address it registered with.
    address=$(/usr/bin/python3 -c '
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
print(*[n["address"] for n in nodes if n["role"] == "ROLE_WORKER" and n["rank"] == 1])' \
      "$logs/status.json" 2>&1) || true
    [ "$address" = "$subnet.4:9500" ] ||
      fail "worker 1 did not register from its namespace address $subnet.4 (status: $address)"
    leftovers
    ;;
  interrupt)
    # Job control on: a background job of a non-interactive shell would otherwise ignore SIGINT.
    set -m
    "${job[@]}" --timeout=50 --tcp_cc=reno --link=1gbit --upload_queue=host -- "${daemon[@]}" \
      --rounds_per_epoch=100000 \
      --epochs=1 --status_file="$logs/status.json" &
    pid=$!
    set +m
    # Training started: the job status (the scheduler's status file) shows a round done.
    training() {
      /usr/bin/python3 -c '
import json, sys
try:
    status = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if int(status.get("progress", {}).get("round", 0)) >= 1 else 1)' "$logs/status.json"
    }
    for _ in $(seq 1 300); do
      training && break
      kill -0 $pid 2>/dev/null || fail "harness exited before training started"
      sleep 0.2
    done
    training || fail "training did not start within 60 s"
    # The congestion control of the server's (accepted) and worker 0's connections: each ss info
    # line starts with its name.
    for n in 1 2; do
      ccs=$(ip netns exec "$name-n$n" ss -tinH state established | awk '/^[ \t]/ {print $1}' |
        sort -u | tr '\n' ' ')
      [ "$ccs" = "reno " ] || { kill -INT $pid; fail "node $n's connections use '$ccs', want reno"; }
    done
    # The queues tc reports (lat: the time to drain the queue less the burst): the server's
    # upload, 1000 frames of 1514 B; its switch port, 100 ms.
    for where in "$name-n1 eth0 1514000" "$name-sw p1 $((125000000 / 10 + 125000))"; do
      read -r ns dev want <<<"$where"
      got=$(ip netns exec "$ns" tc -j qdisc show dev "$dev" | python3 -c '
import json, sys
q = [q for q in json.load(sys.stdin) if q.get("kind") == "tbf"][0]["options"]
print(round(q["rate"] * q["lat"] / 1e6 + q["burst"]))')
      [ $((got - want)) -le $((want / 100)) ] && [ $((want - got)) -le $((want / 100)) ] ||
        { kill -INT $pid; fail "$ns $dev queues $got B, want ~$want"; }
    done
    kill -INT $pid
    start=$SECONDS
    rc=0
    wait $pid || rc=$?
    [ $rc = 130 ] || fail "harness exit status $rc after SIGINT, want 130"
    [ $((SECONDS - start)) -le 15 ] || fail "teardown took $((SECONDS - start)) s"
    leftovers
    ;;
  uneven_links)
    rc=0
    "${job[@]}" --link=1gbit,1:10mbit --timeout=90 -- "${daemon[@]}" --compressor=none \
      --consistency=asp --rounds_per_epoch=10 --epochs=1 --metrics_out="$logs/m{rank}.jsonl" \
      2>"$logs/harness.txt" || rc=$?
    [ $rc = 0 ] || { cat "$logs/harness.txt"; tail -n 20 "$logs"/*.log; fail "job exited with $rc"; }
    grep -q "link 1gbit, worker 1: 10mbit" "$logs/harness.txt" || fail "no per-worker link line"
    kernel_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
    grep -q "tcp $kernel_cc (the kernel's default)" "$logs/harness.txt" ||
      fail "the harness did not name the kernel's congestion control $kernel_cc"
    # 80 KB up and down per round: ~130 ms at 10 Mbit/s, ~1.3 ms at 1 Gbit/s (ratios only).
    python3 - "$logs" <<'PY' || fail "worker 1's link is not the slow one"
import json, statistics, sys
comm = [statistics.median(json.loads(l)["t_comm"] for l in open(f"{sys.argv[1]}/m{r}.jsonl"))
        for r in (0, 1)]
print("median t_comm (s) of workers 0, 1:", comm)
assert comm[1] > 10 * comm[0], comm
PY
    rc=0
    "${job[@]}" --link=1gbit,2:10mbit -- "${daemon[@]}" >"$logs/bad.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q "'2:10mbit' is for worker 2, but the job has 2 workers" "$logs/bad.txt" ||
      { cat "$logs/bad.txt"; fail "a link for a missing worker: exit $rc"; }
    rc=0
    "${job[@]}" --tcp_cc=nonesuch -- "${daemon[@]}" >"$logs/bad.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q "'nonesuch' is not available here" "$logs/bad.txt" ||
      { cat "$logs/bad.txt"; fail "an unknown --tcp_cc: exit $rc"; }
    rc=0
    "${job[@]}" --upload_queue=deep -- "${daemon[@]}" >"$logs/bad.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q "'deep' is not a queue" "$logs/bad.txt" ||
      { cat "$logs/bad.txt"; fail "a bad --upload_queue: exit $rc"; }
    leftovers
    ;;
  torch_workers)
    /usr/bin/python3 -c "import torch" 2>/dev/null || skip "Debian's python3-torch not installed"
    script="/usr/bin/python3 $PWD/examples/torch/resnet20.py --max_steps=20 --width=4"
    script+=" --batch_size=16 --eval_limit=500"
    rc=0
    "${job[@]}" --link=1gbit --timeout=100 --worker_cmd="$script" -- --consistency=bsp \
      --compressor=gaussiank --density=0.01 --status_file="$logs/status.json" \
      --summary_out="$logs/{role}-{rank}.json" || rc=$?
    [ $rc = 0 ] || { tail -n 20 "$logs"/*.log; fail "job exited with $rc"; }
    summary=$(/usr/bin/python3 -c '
import json, sys
nodes = json.load(open(f"{sys.argv[1]}/status.json"))["nodes"]
print(*[(json.load(open(f"{sys.argv[1]}/worker-{r}.json"))["rounds"]) for r in (0, 1)],
      *[n["address"] for n in nodes if n["role"] == "ROLE_WORKER" and n["rank"] == 1])' \
      "$logs" 2>&1) || true
    [ "$summary" = "20 20 $subnet.4:9500" ] || fail "summaries and worker 1's address: $summary"
    rc=0
    "${job[@]}" --worker_cmd="$script" -- --histogram_rounds=1 >"$logs/bad.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q -- "--histogram_rounds is not implemented by the worker command" \
      "$logs/bad.txt" || { cat "$logs/bad.txt"; fail "an unimplemented worker flag: exit $rc"; }
    leftovers
    ;;
  ddp_ranks)
    /usr/bin/python3 -c "import torch" 2>/dev/null || skip "Debian's python3-torch not installed"
    rc=0
    "${job[@]}" --link=1gbit --timeout=100 --ddp_cmd="/usr/bin/python3 \
      $PWD/examples/torch/resnet20.py --backend=ddp --max_steps=20 --width=4 --batch_size=16 \
      --eval_limit=500 --result_json=$logs/ddp.json" || rc=$?
    [ $rc = 0 ] || { tail -n 20 "$logs"/*.log; fail "job exited with $rc"; }
    result=$(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["backend"], r["workers"], r["steps"])' "$logs/ddp.json" 2>&1) || true
    [ "$result" = "ddp 2 20" ] || fail "rank 0's result: $result"
    rc=0
    "${job[@]}" --ddp_cmd=true -- --lr=1 >"$logs/bad.txt" 2>&1 || rc=$?
    [ $rc = 2 ] && grep -q "it takes neither --worker_cmd nor daemon flags" "$logs/bad.txt" ||
      { cat "$logs/bad.txt"; fail "daemon flags with --ddp_cmd: exit $rc"; }
    leftovers
    ;;
  *) fail "unknown case $test_case" ;;
esac
echo "PASS: $test_case"
