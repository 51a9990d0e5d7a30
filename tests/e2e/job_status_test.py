"""JobStatusLifecycle: the scheduler's job status (docs/protocol.md, "Job status") as real jobs
see it: GET /v1/job on the scheduler's --metrics_port and its --status_file.

Cases, each a job of a few seconds on loopback:
- a forming job, the scheduler alone and then with its one server: the counts, the node row, and
  the final status of a job stopped with SIGTERM (JOB_FAILED, ABORTED);
- every JobStatus field present while forming (the documented JSON: only an unset optional value
  is left out);
- `sieve launch` with a worker killed and restarted (--max_restarts=1): the row's restart and
  lost reason, the progress while running, the finished job, and the status file equal to the
  last status served during the linger;
- `sieve launch` with --replication=1 and a server killed: its shard promoted on the other
  server, the job still finishes;
- a job whose only server is killed (--server_failure=fail): JOB_FAILED with the failure naming
  the server; and the same kill under `sieve launch`, whose status file must end JOB_FAILED too;
- `sieve status --scheduler`: the status asked of the scheduler over the protocol equals the one
  it serves on /v1/job; a query without the job's token (or with another) is dropped, counted as
  foreign and never answered, and the command exits 1 after its timeout;
- every key of the JSON (and of the .proto messages) documented in the "Job status" section.

Deadlines only bound a hang; nothing here asserts on timing.

usage: job_status_test.py SIEVE SCHEDULER SERVER WORKER
"""

import copy
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SIEVE = SCHEDULER = SERVER = WORKER = None  # set from the command line
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench", "common"))
import daemon_ports  # noqa: E402 (bench/common/daemon_ports.py)
HANG_S = 120  # bounds a hang only
POLL_S = 0.05
FINAL_PHASES = ("JOB_FINISHED", "JOB_FAILED")
# The messages whose JSON /v1/job serves (docs/protocol.md, "Job status").
STATUS_MESSAGES = ("JobStatus", "JobProgress", "JobNode", "WorkerReport", "ServerReport",
                   "JobFailure")
# Keys a reader may not find: unset optional values, and the failure of a job not failed.
OPTIONAL_KEYS = {"loss", "test_accuracy", "eta_seconds"}
# A synthetic job (no data set): D and rounds of a few seconds with an emulated compute time.
SYNTHETIC = ["--model=synthetic", "--num_params=20000", "--rounds_per_epoch=100"]


def free_base_port(count):
    """A port P with P..P+count-1 free (checked, not reserved): `sieve launch --metrics_port=P`
    gives the scheduler P and its servers and workers the next ones."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        if daemon_ports.ports_free(base, count):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def fetch(port):
    """GET /v1/job on the scheduler's metrics port, parsed; None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/job", timeout=5) as r:
            return json.loads(r.read())
    except (OSError, ValueError, http.client.HTTPException):
        return None


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def child_pid(parent, program, rank):
    """The pid of `parent`'s child running `program` with --rank=`rank` (as its /proc cmdline
    says), or None."""
    flag = f"--rank={rank}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if fields[0] == b"Z" or int(fields[1]) != parent:
            continue
        if argv and argv[0].endswith(program.encode()) and flag in argv:
            return int(entry)
    return None


def node(status, role, rank):
    """The row of `role` (ROLE_SERVER / ROLE_WORKER) and `rank`, or None."""
    for n in status.get("nodes", []):
        if n["role"] == role and n["rank"] == rank:
            return n
    return None


def without_moving_fields(status):
    """The status without what changes while the same status is served (its ages)."""
    out = copy.deepcopy(status)
    out.pop("elapsed_seconds", None)
    for n in out.get("nodes", []):
        n.pop("heartbeat_age_ms", None)
    return out


def proto_fields(message):
    """The field names of `message` in proto/sieve.proto (its JSON keys: the .proto names)."""
    with open(os.path.join(SOURCE_DIR, "proto", "sieve.proto"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^message " + message + r" \{\n(.*?)^\}", text, re.M | re.S)
    if m is None:
        raise AssertionError(f"no message {message} in proto/sieve.proto")
    return re.findall(r"^\s*(?:optional\s+|repeated\s+)?[\w.]+(?:<[^>]*>)?\s+(\w+)\s*=\s*\d+\s*;",
                      m.group(1), re.M)


def status_section():
    """docs/protocol.md from "## Job status" to the next "## " heading."""
    with open(os.path.join(SOURCE_DIR, "docs", "protocol.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Job status\n(.*?)(?=^## )", text, re.M | re.S)
    if m is None:
        raise AssertionError('docs/protocol.md has no "## Job status" section')
    return m.group(1)


def json_keys(status):
    """Every key of the status's objects, by the message it belongs to."""
    keys = {m: set() for m in STATUS_MESSAGES}
    keys["JobStatus"] |= status.keys()
    keys["JobProgress"] |= status.get("progress", {}).keys()
    keys["JobFailure"] |= status.get("failure", {}).keys()
    for n in status.get("nodes", []):
        keys["JobNode"] |= n.keys()
        keys["WorkerReport"] |= n.get("worker", {}).keys()
        keys["ServerReport"] |= n.get("server", {}).keys()
    return keys


class Processes:
    """Processes started by a test, their output in files of its temporary directory."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = {}

    def start(self, name, argv):
        log = open(os.path.join(self.tmp, name + ".log"), "w+", encoding="utf-8")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env, cwd=self.tmp)
        self.procs[name] = (p, log)
        return p

    def log(self, name, lines=40):
        path = os.path.join(self.tmp, name + ".log")
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def logs(self):
        return "\n".join(f"==== {name}\n{self.log(name)}" for name in self.procs)

    def wait(self, name, timeout=HANG_S):
        """Waits for `name` to exit; returns its exit code (None if it outlived `timeout`)."""
        try:
            return self.procs[name][0].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """SIGTERM to what still runs, SIGKILL to what outlives a grace (call it in cleanup)."""
        for p, _ in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for p, log in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.close()


class JobStatusTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sieve-job-status-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.procs = Processes(self.tmp)
        self.addCleanup(self.procs.stop)
        self.seen = []  # every status fetched, in order
        self.section = status_section()

    # -- helpers -------------------------------------------------------------------------------

    def check_documented(self, status):
        """Every key of `status` appears in backticks in the "Job status" section."""
        for message, keys in json_keys(status).items():
            for key in sorted(keys):
                self.assertIn(f"`{key}`", self.section,
                              f"{message}.{key} (a key of /v1/job) is not documented in "
                              'docs/protocol.md "Job status"')

    def poll(self, port, until, what, proc=None):
        """Fetches /v1/job every POLL_S until until(status) holds; returns that status. Fails
        when `proc` (the launcher or scheduler) exits first or at the hang deadline."""
        deadline = time.monotonic() + HANG_S
        last = None
        while True:
            status = fetch(port)
            if status is not None:
                self.seen.append(status)
                self.check_documented(status)
                last = status
                if until(status):
                    return status
            if proc is not None and proc.poll() is not None and fetch(port) is None:
                self.fail(f"{what}: the job ended first (exit {proc.returncode}); last status "
                          f"{json.dumps(last, indent=1)}\n{self.procs.logs()}")
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {HANG_S} s; last status "
                          f"{json.dumps(last, indent=1)}\n{self.procs.logs()}")
            time.sleep(POLL_S)

    def last_served(self, port, proc):
        """Once the phase is final: fetches /v1/job until the scheduler stops serving it (the
        linger's end) and returns the last status fetched."""
        last = self.poll(port, lambda s: s["phase"] in FINAL_PHASES, "a final phase", proc)
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline:
            status = fetch(port)
            if status is None:
                return last
            self.seen.append(status)
            last = status
            time.sleep(POLL_S)
        self.fail(f"the scheduler still serves /v1/job {HANG_S} s after the job ended")

    def launch(self, num_servers, num_workers, launcher_flags, daemon_flags):
        """Starts `sieve launch` with --metrics_port (returned) and --status_file (self.status)."""
        port = free_base_port(1 + num_servers + num_workers)
        self.status_path = os.path.join(self.tmp, "status.json")
        argv = [SIEVE, "launch", f"--num_servers={num_servers}", f"--num_workers={num_workers}",
                "--progress=off", f"--metrics_port={port}", *launcher_flags, "--",
                f"--status_file={self.status_path}", *daemon_flags]
        return self.procs.start("launch", argv), port

    def start_scheduler(self, flags):
        """Starts sieve-scheduler alone (metrics port and status file); returns (process, port,
        its HOST:PORT)."""
        port = free_base_port(1)
        port_file = os.path.join(self.tmp, "scheduler.port")
        self.status_path = os.path.join(self.tmp, "status.json")
        p = self.procs.start("scheduler", [
            SCHEDULER, "--port=0", "--bind=127.0.0.1", "--host=127.0.0.1",
            f"--metrics_port={port}", f"--port_file={port_file}",
            f"--status_file={self.status_path}", *flags])
        deadline = time.monotonic() + HANG_S
        while not os.path.exists(port_file):  # written atomically, with its newline
            if p.poll() is not None or time.monotonic() > deadline:
                self.fail("the scheduler wrote no port file\n" + self.procs.logs())
            time.sleep(POLL_S)
        with open(port_file, encoding="utf-8") as f:
            return p, port, f.read().strip()

    def kill_child(self, parent, program, rank):
        pid = child_pid(parent.pid, program, rank)
        self.assertIsNotNone(pid, f"no {program} --rank={rank} among the launcher's children")
        os.kill(pid, signal.SIGKILL)
        return pid

    def assert_final_file_is_last_served(self, last):
        final = read_json(self.status_path)
        self.assertEqual(without_moving_fields(final), without_moving_fields(last),
                         "the status file's final content differs from the last GET /v1/job")

    # -- cases ---------------------------------------------------------------------------------

    def test_forming_counts_and_a_stopped_job(self):
        scheduler, port, address = self.start_scheduler(["--num_servers=1", "--num_workers=2"])
        st = self.poll(port, lambda s: True, "a first status", scheduler)
        self.assertEqual(st["phase"], "JOB_FORMING")
        self.assertEqual((st["num_servers"], st["num_workers"]), (1, 2))
        self.assertEqual((st["servers_registered"], st["workers_registered"]), (0, 0))
        self.assertEqual(st["nodes"], [])
        self.assertEqual(st["instance"], "0")
        self.assertEqual(st["scheduler"], address)

        server = self.procs.start("server", [SERVER, f"--scheduler={address}", "--rank=0",
                                             "--bind=127.0.0.1", "--host=127.0.0.1"])
        st = self.poll(port, lambda s: s["servers_registered"] == 1, "the server's registration",
                       scheduler)
        self.assertEqual(st["phase"], "JOB_FORMING")
        self.assertEqual(st["workers_registered"], 0)
        self.assertEqual(len(st["nodes"]), 1, st)
        row = st["nodes"][0]
        self.assertEqual((row["role"], row["rank"], row["state"]),
                         ("ROLE_SERVER", 0, "NODE_REGISTERED"))
        self.assertTrue(row["address"].startswith("127.0.0.1:"), row)

        scheduler.send_signal(signal.SIGTERM)
        server.send_signal(signal.SIGTERM)
        code = self.procs.wait("scheduler")
        self.assertIsNotNone(code, "the scheduler outlived SIGTERM\n" + self.procs.logs())
        final = read_json(self.status_path)
        self.check_documented(final)
        self.assertEqual(final["phase"], "JOB_FAILED",
                         f"the final status file of a job stopped with SIGTERM (scheduler exit "
                         f"{code}: a negative code is the signal that ended it):\n"
                         f"{json.dumps(final, indent=1)}\n{self.procs.logs()}")
        self.assertEqual(final["failure"]["code"], "ABORTED", final)
        self.assertEqual(final["failure"]["node_id"], -1, final)
        self.assertTrue(final["failure"]["message"], final)

    def sieve_status(self, *args):
        """`sieve status ARGS`: (exit code, stdout, stderr)."""
        r = subprocess.run([SIEVE, "status", *args], capture_output=True, text=True,
                           timeout=HANG_S)
        return r.returncode, r.stdout, r.stderr

    def test_status_asked_of_the_scheduler(self):
        token = os.path.join(self.tmp, "token")
        with open(token, "w", encoding="utf-8") as f:
            f.write("a-token-of-this-job\n")
        scheduler, port, address = self.start_scheduler(
            ["--num_servers=1", "--num_workers=2", f"--job_token_file={token}"])
        self.poll(port, lambda s: True, "a first status", scheduler)
        self.procs.start("server", [SERVER, f"--scheduler={address}", "--rank=0",
                                    "--bind=127.0.0.1", "--host=127.0.0.1",
                                    f"--job_token_file={token}"])
        self.poll(port, lambda s: s["servers_registered"] == 1, "the server's registration",
                  scheduler)
        # The status over the protocol is the one GET /v1/job serves.
        code, out, err = self.sieve_status(f"--scheduler={address}", f"--job_token_file={token}",
                                           "--host=127.0.0.1", "--json")
        self.assertEqual(code, 0, err)
        asked = json.loads(out)
        self.check_documented(asked)
        served = fetch(port)
        self.assertEqual(without_moving_fields(asked), without_moving_fields(served))
        self.assertEqual(asked["servers_registered"], 1)
        # The screen for a person, from the same answer.
        code, out, err = self.sieve_status(f"--scheduler={address}", f"--job_token_file={token}",
                                           "--host=127.0.0.1")
        self.assertEqual(code, 0, err)
        self.assertIn("FORMING", out)
        self.assertRegex(out, r"server\s+0\s+REGISTERED")
        # Without the job's token, or with another, the query is another job's: dropped and
        # counted, never answered; the command says so and exits 1 once its timeout passed.
        wrong = os.path.join(self.tmp, "wrong")
        with open(wrong, "w", encoding="utf-8") as f:
            f.write("another-token\n")
        before = fetch(port)["foreign_messages"]
        for extra in ([], [f"--job_token_file={wrong}"]):
            code, out, err = self.sieve_status(f"--scheduler={address}", "--host=127.0.0.1",
                                               "--timeout_ms=300", *extra)
            self.assertEqual((code, out), (1, ""), err)
            self.assertIn("DEADLINE_EXCEEDED: no status from the scheduler at " + address, err)
            self.assertIn("--job_token_file", err)
        self.poll(port, lambda s: int(s["foreign_messages"]) >= int(before) + 2,
                  "the dropped queries counted as foreign", scheduler)
        # Usage errors: exit 2 before anything is sent.
        for args in ([f"--scheduler={address}", "--metrics=127.0.0.1:1"],
                     [f"--job_token_file={token}", f"--status_file={self.status_path}"],
                     ["--scheduler=no-port"]):
            code, _, err = self.sieve_status(*args)
            self.assertEqual(code, 2, f"{args}: {err}")

    def test_every_field_present_while_forming(self):
        scheduler, port, _ = self.start_scheduler(["--num_servers=1", "--num_workers=1"])
        st = self.poll(port, lambda s: True, "a first status", scheduler)
        self.assertEqual(st["phase"], "JOB_FORMING")
        # docs/protocol.md: "every field is present (zeros, empty lists and maps included) except
        # an unset optional value"; `failure` is there when failed.
        missing = sorted(set(proto_fields("JobStatus")) - {"failure"} - st.keys())
        self.assertEqual(missing, [], f"JobStatus keys absent from /v1/job while forming:\n"
                                      f"{json.dumps(st, indent=1)}")

    def test_worker_killed_and_restarted_then_the_job_finishes(self):
        # fnn3 on Fashion-MNIST (it evaluates at the end); 5 ms of emulated compute per round
        # keeps the job running for the kill.
        launcher, port = self.launch(1, 2, ["--max_restarts=1"], [
            "--max_rounds=600", "--straggler=delay:5ms", "--heartbeat_interval_ms=200"])
        self.poll(port, lambda s: s["phase"] == "JOB_RUNNING" and
                  int(s["progress"]["round"]) >= 100, "round 100", launcher)
        self.kill_child(launcher, "sieve-worker", 1)

        def worker1_replaced(s):
            row = node(s, "ROLE_WORKER", 1)
            return row is not None and (row["state"] == "NODE_LOST" or row["restarts"] == 1)
        st = self.poll(port, worker1_replaced, "worker 1 lost or restarted", launcher)
        row = node(st, "ROLE_WORKER", 1)
        if row["state"] != "NODE_LOST":
            self.assertIn(row["state"], ("NODE_REJOINED", "NODE_RESTARTED", "NODE_FINISHED"), row)
        last = self.last_served(port, launcher)
        code = self.procs.wait("launch")
        self.assertEqual(code, 0, self.procs.logs())

        running = [int(s["progress"]["round"]) for s in self.seen if s["phase"] == "JOB_RUNNING"]
        self.assertGreater(running[-1], running[0], f"progress.round over the polls: {running}")
        self.assertEqual(last["phase"], "JOB_FINISHED", last)
        self.assertEqual(last["workers_finished"], 2, last)
        progress = last["progress"]
        self.assertEqual(progress["total_rounds"], "600", progress)
        self.assertEqual(progress["round"], progress["total_rounds"], progress)
        self.assertIn("test_accuracy", progress, progress)
        self.assertGreaterEqual(progress["test_accuracy"], 0.0, progress)
        self.assertLessEqual(progress["test_accuracy"], 1.0, progress)
        row = node(last, "ROLE_WORKER", 1)
        self.assertEqual(row["restarts"], 1, row)
        self.assertEqual(row["state"], "NODE_FINISHED", row)
        self.assertTrue(row["lost_reason"], row)
        self.assertEqual(node(last, "ROLE_WORKER", 0)["restarts"], 0, last)
        self.assertEqual(node(last, "ROLE_WORKER", 0)["state"], "NODE_FINISHED", last)
        self.assert_final_file_is_last_served(last)

    def test_server_killed_with_replication_fails_over(self):
        launcher, port = self.launch(2, 2, ["--max_restarts=0"], [
            "--replication=1", *SYNTHETIC, "--epochs=15", "--straggler=delay:2ms",
            "--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=1000"])
        self.poll(port, lambda s: s["phase"] == "JOB_RUNNING" and
                  int(s["progress"]["round"]) >= 100, "round 100", launcher)
        self.kill_child(launcher, "sieve-server", 1)

        def failed_over(s):
            s0, s1 = node(s, "ROLE_SERVER", 0), node(s, "ROLE_SERVER", 1)
            return (s0 is not None and s1 is not None and s0["state"] == "NODE_PROMOTED" and
                    1 in s0["primary_shards"] and s1["state"] == "NODE_LOST")
        st = self.poll(port, failed_over, "shard 1 promoted on server 0", launcher)
        self.assertEqual(st["phase"], "JOB_RUNNING", st)
        self.assertTrue(node(st, "ROLE_SERVER", 1)["lost_reason"], st)
        last = self.last_served(port, launcher)
        code = self.procs.wait("launch")
        self.assertEqual(code, 0, self.procs.logs())
        self.assertEqual(last["phase"], "JOB_FINISHED", last)
        self.assertEqual(last["workers_finished"], 2, last)
        self.assertEqual(last["replication"], 1, last)
        s0, s1 = node(last, "ROLE_SERVER", 0), node(last, "ROLE_SERVER", 1)
        self.assertEqual(s0["state"], "NODE_PROMOTED", s0)
        self.assertIn(1, s0["primary_shards"], s0)
        self.assertEqual(s1["state"], "NODE_LOST", s1)
        self.assertEqual(last["progress"]["round"], last["progress"]["total_rounds"], last)
        self.assert_final_file_is_last_served(last)

    def test_server_killed_fails_the_job(self):
        # The daemons started one by one: the scheduler itself notices the server's death (no
        # heartbeat for 1 s) and fails the job (--server_failure=fail).
        scheduler, port, address = self.start_scheduler([
            "--num_servers=1", "--num_workers=1", "--server_failure=fail",
            "--heartbeat_timeout_ms=1000"])
        common = [f"--scheduler={address}", "--rank=0", "--bind=127.0.0.1", "--host=127.0.0.1",
                  "--heartbeat_interval_ms=100", *SYNTHETIC[:2]]
        server = self.procs.start("server", [SERVER, *common])
        self.procs.start("worker", [WORKER, *common, SYNTHETIC[2], "--epochs=100",
                                    "--straggler=delay:5ms"])
        st = self.poll(port, lambda s: s["phase"] == "JOB_RUNNING" and
                       int(s["progress"]["round"]) >= 100, "round 100", scheduler)
        server_id = node(st, "ROLE_SERVER", 0)["id"]
        server.kill()
        last = self.last_served(port, scheduler)
        self.assertEqual(self.procs.wait("scheduler"), 1, self.procs.logs())
        self.assertEqual(last["phase"], "JOB_FAILED", last)
        failure = last["failure"]
        self.assertEqual(server_id, 1, st)
        self.assertEqual(failure["node_id"], server_id, failure)
        self.assertEqual(failure["role"], "ROLE_SERVER", failure)
        self.assertEqual(failure["rank"], 0, failure)
        self.assertEqual(failure["code"], "UNAVAILABLE", failure)
        self.assertTrue(failure["message"], failure)
        self.assertEqual(node(last, "ROLE_SERVER", 0)["state"], "NODE_LOST", last)
        self.assertTrue(node(last, "ROLE_SERVER", 0)["lost_reason"], last)
        self.assert_final_file_is_last_served(last)

    def test_launched_job_whose_server_dies_ends_failed(self):
        # Under `sieve launch` a server that dies with no restart stops the job (SIGTERM to
        # every daemon): the scheduler's final status, written last, says the job failed.
        launcher, port = self.launch(1, 1, [], [
            "--server_failure=fail", *SYNTHETIC, "--epochs=100", "--straggler=delay:5ms"])
        self.poll(port, lambda s: s["phase"] == "JOB_RUNNING" and
                  int(s["progress"]["round"]) >= 100, "round 100", launcher)
        self.kill_child(launcher, "sieve-server", 0)
        code = self.procs.wait("launch")
        self.assertEqual(code, 1, self.procs.logs())
        final = read_json(self.status_path)
        self.assertEqual(final["phase"], "JOB_FAILED",
                         f"the status file after `sieve launch` stopped a failed job:\n"
                         f"{json.dumps(final, indent=1)}\n{self.procs.logs()}")
        self.assertTrue(final["failure"]["code"], final)

    def test_every_key_is_documented(self):
        for message in STATUS_MESSAGES:
            fields = proto_fields(message)
            self.assertTrue(fields, message)
            for key in fields:
                self.assertIn(f"`{key}`", self.section,
                              f"{message}.{key} is not documented in docs/protocol.md "
                              '"Job status"')


def main():
    global SIEVE, SCHEDULER, SERVER, WORKER
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    SIEVE, SCHEDULER, SERVER, WORKER = (os.path.abspath(a) for a in sys.argv[1:5])
    unittest.main(argv=[sys.argv[0], *sys.argv[5:]], verbosity=2)


if __name__ == "__main__":
    main()
