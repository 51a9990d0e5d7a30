"""Helpers of the Python* tests: a local job started process by process (scheduler, servers,
workers of any command), the build's paths, the skip rule, and the files a run leaves for
programs: the servers' and workers' end-of-run summaries (--summary_out), the scheduler's job
status (--status_file).

Each test script takes the build directory as its first argument. It exits 77 (ctest: skipped)
with a message naming what is missing only when torch or the built module is absent.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench", "common"))
import daemon_ports  # noqa: E402 (bench/common/daemon_ports.py)

SKIP = 77


def setup(argv):
    """Returns the build directory; exits 77 with a message when torch or the module is absent."""
    build = os.path.abspath(argv[1])
    module_dir = os.path.join(build, "worker", "python")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED: torch is not installed for this Python (Debian: python3-torch)")
        sys.exit(SKIP)
    if not os.path.isdir(os.path.join(module_dir, "sieve")):
        print(f"SKIPPED: the sieve module was not built in {module_dir} (pybind11-dev absent)")
        sys.exit(SKIP)
    sys.path.insert(0, module_dir)
    return build


def worker_env(build):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "worker", "python")
    env["OMP_NUM_THREADS"] = "1"
    return env


def source_dir():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Cluster:
    """A scheduler and servers on loopback; workers are started with start_worker(). Servers and
    workers write their end-of-run summaries into the cluster's directory (summary_flag):
    summary("server-0") reads one."""

    def __init__(self, build, num_servers, num_workers, server_flags=(), timeout_s=300):
        self.build = build
        self.dir = tempfile.mkdtemp(prefix="sieve-pytest-")
        self.procs = []
        self.files = []
        self.deadline = time.monotonic() + timeout_s
        self.env = worker_env(build)
        self.num_workers = num_workers
        sched_log = open(os.path.join(self.dir, "scheduler.log"), "w+")
        port_file = self.path("scheduler.port")
        self.scheduler = self._spawn(
            [os.path.join(build, "scheduler", "sieve-scheduler"), f"--num_servers={num_servers}",
             f"--num_workers={num_workers}", "--port=0", "--bind=127.0.0.1",
             "--host=127.0.0.1", f"--port_file={port_file}"], sched_log)
        while True:
            address = daemon_ports.read_port_file(port_file)
            if address is not None:
                break
            code = self.scheduler.poll()
            if code is not None:
                raise RuntimeError(f"the scheduler exited {code} before writing its port file:\n"
                                   + self.log("scheduler"))
            if time.monotonic() > self.deadline:
                raise RuntimeError("the scheduler did not start:\n" + self.log("scheduler"))
            time.sleep(0.05)
        self.address = address
        self.servers = [self._spawn(
            [os.path.join(build, "server", "sieve-server"), f"--scheduler={self.address}",
             f"--rank={r}", "--bind=127.0.0.1", "--host=127.0.0.1", summary_flag(self.dir),
             *server_flags],
            open(os.path.join(self.dir, f"server-{r}.log"), "w+")) for r in range(num_servers)]
        self.workers = {}

    def _spawn(self, argv, log):
        self.files.append(log)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                             cwd=self.dir)
        self.procs.append(p)
        return p

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self, name):
        with open(self.path(name + ".log")) as f:
            return f.read()

    def summary(self, name):
        """The end-of-run summary of process `name` ("server-0", "worker-1") as a dict, or None
        when it wrote none (it did not end normally)."""
        return read_summary(self.path(name + ".json"))

    def start_worker(self, rank, argv, env_only=False):
        """argv: the worker's command. The job goes in the environment, as `sieve launch` passes
        it (SIEVE_SCHEDULER, SIEVE_RANK, ..., and --summary_out in SIEVE_WORKER_FLAGS), and,
        unless env_only, also as the arguments --scheduler --rank --bind --host --summary_out
        appended to argv."""
        env = dict(self.env, SIEVE_SCHEDULER=self.address, SIEVE_RANK=str(rank),
                   SIEVE_NUM_WORKERS=str(self.num_workers), SIEVE_BIND="127.0.0.1",
                   SIEVE_HOST="127.0.0.1", SIEVE_WORKER_FLAGS=summary_flag(self.dir))
        if not env_only:
            argv = argv + [f"--scheduler={self.address}", f"--rank={rank}", "--bind=127.0.0.1",
                           "--host=127.0.0.1", summary_flag(self.dir)]
        log = open(self.path(f"worker-{rank}.log"), "w+")
        self.files.append(log)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir)
        self.procs.append(p)
        self.workers[rank] = p

    def wait_for_log(self, name, text):
        """Waits until process `name`'s log holds `text` (RuntimeError at the deadline)."""
        while text not in self.log(name):
            if time.monotonic() > self.deadline:
                raise RuntimeError(f"{name} never logged {text!r}:\n" + self.logs())
            time.sleep(0.05)

    def wait(self):
        """Waits for every process; returns {name: exit code}. Kills all at the deadline."""
        names = {id(self.scheduler): "scheduler"}
        names.update({id(p): f"server-{r}" for r, p in enumerate(self.servers)})
        names.update({id(p): f"worker-{r}" for r, p in self.workers.items()})
        codes = {}
        for p in self.procs:
            try:
                codes[names[id(p)]] = p.wait(timeout=max(1.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError("the job did not finish in time:\n" + self.logs())
        return codes

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                out.append(f"==== {name}\n" + "".join(self.log(name[:-4]).splitlines(True)[-15:]))
        return "\n".join(out)

    def kill(self):
        """Kills what still runs and closes the logs (call it in a finally)."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in self.files:
            f.close()


def capture(errors, fn, *args):
    """Calls fn(*args), appending any exception to `errors` (for threads)."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - handed to the test
        errors.append(e)


def summary_flag(out_dir):
    """The routed flag that makes every server and worker write its end-of-run summary to
    OUT_DIR/{role}-{rank}.json (docs/protocol.md, "Run summaries")."""
    return f"--summary_out={out_dir}/{{role}}-{{rank}}.json"


def read_summary(path):
    """One --summary_out file as a dict (JSON numbers as ints and floats, text as str), or None
    when there is none (a killed process writes none)."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def summaries(out_dir, role):
    """{rank: summary} of the summaries of `role` ("server" or "worker") that processes given
    summary_flag(out_dir) wrote."""
    out = {}
    for path in glob.glob(os.path.join(out_dir, f"{role}-*.json")):
        m = re.fullmatch(rf"{role}-(\d+)\.json", os.path.basename(path))
        if m:
            out[int(m.group(1))] = read_summary(path)
    return out


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def status_flag(out_dir):
    """The routed flag that makes the scheduler write its job status to OUT_DIR/status.json."""
    return f"--status_file={out_dir}/status.json"


def read_status(out_dir):
    """The job status the scheduler wrote (status_flag; docs/protocol.md, "Job status") as a
    dict: after the job, its final status."""
    with open(os.path.join(out_dir, "status.json")) as f:
        return json.load(f)


def status_node(status, role, rank):
    """The row of `status` for the node of `role` ("server" or "worker") and `rank`, or None."""
    for n in status["nodes"]:
        if n["role"] == f"ROLE_{role.upper()}" and n["rank"] == rank:
            return n
    return None


# tests/python/user_script/mlp.py's model (784-128-10) and its rounds in 1 epoch on 2 workers
# (Fashion-MNIST's 60000 examples, batch 32).
USER_SCRIPT_D = 784 * 128 + 128 + 128 * 10 + 10
USER_SCRIPT_ROUNDS = 60000 // 2 // 32


def user_script():
    """tests/python/user_script/mlp.py: a user's own MLP script (its docstring: the test hooks)."""
    return os.path.join(source_dir(), "tests", "python", "user_script", "mlp.py")


def launch(build, worker_cmd, flags=(), num_servers=2, num_workers=2, launcher_flags=(),
           env=None, timeout_s=400):
    """Runs `sieve launch --num_servers=S --num_workers=W --worker_cmd=CMD [launcher_flags] --
    [flags]` from the source directory; returns (exit code, output: stdout and stderr). `env`:
    variables added to worker_env(build) (the workers inherit them)."""
    argv = [os.path.join(build, "deploy", "sieve"), "launch", f"--num_servers={num_servers}",
            f"--num_workers={num_workers}", "--progress=off", f"--worker_cmd={worker_cmd}",
            *launcher_flags]
    if flags:
        argv += ["--", *flags]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(worker_env(build), **(env or {})), timeout=timeout_s,
                       cwd=source_dir())
    return r.returncode, r.stdout


def job_result(output):
    """The fields of the launcher's last line `sieve launch: job finished: test_acc=... rounds=...`
    as a dict of strings (None when the output has no such line)."""
    lines = [l for l in output.splitlines() if l.startswith("sieve launch: job finished:")]
    if not lines:
        return None
    return dict(f.rstrip(";").split("=", 1) for f in lines[-1].split()[3:] if "=" in f)


def check_finished(test, code, out, rounds, workers="2/2", min_test_acc=None):
    """Asserts (unittest.TestCase `test`) that a `sieve launch` run exited 0 and its result line
    says `rounds` rounds, `workers` workers and, when given, test_acc >= min_test_acc; prints and
    returns the line's fields."""
    test.assertEqual(code, 0, out[-4000:])
    result = job_result(out)
    test.assertIsNotNone(result, out[-4000:])
    print(f"launcher: {result}")
    test.assertEqual(result["rounds"], str(rounds))
    test.assertEqual(result["workers"], workers)
    if min_test_acc is not None:
        test.assertGreaterEqual(float(result["test_acc"]), min_test_acc)
    return result


def check_replicas(test, out_dir, num_servers, num_workers, d):
    """Asserts that every worker's replica (--dump_weights=OUT_DIR/replica-{rank}.bin) equals the
    servers' weights (--dump_shard=OUT_DIR/shard-{rank}.bin, concatenated) bitwise, D = d values;
    returns the servers' weights (NumPy float32)."""
    import numpy as np
    server = np.concatenate([np.fromfile(f"{out_dir}/shard-{r}.bin", dtype=np.float32)
                             for r in range(num_servers)])
    test.assertEqual(server.size, d)
    for r in range(num_workers):
        replica = np.fromfile(f"{out_dir}/replica-{r}.bin", dtype=np.float32)
        test.assertEqual(replica.size, d)
        test.assertTrue(np.array_equal(replica.view(np.uint32), server.view(np.uint32)),
                        f"worker {r}'s replica differs from the servers' weights at "
                        f"{np.count_nonzero(replica != server)} positions")
    return server


def dump_flags(out_dir):
    """The routed flags check_replicas reads: --dump_weights (workers), --dump_shard (servers)."""
    return [f"--dump_weights={out_dir}/replica-{{rank}}.bin",
            f"--dump_shard={out_dir}/shard-{{rank}}.bin"]
