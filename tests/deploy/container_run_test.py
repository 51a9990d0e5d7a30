"""DeployContainerRun: builds the `cpu` image with podman (deploy/docker/podman-build) and runs the
rendered cpu-small overlay (a JobSet) as podman containers, one per manifest container, with the
rendered command, args, env, security context and mounts, and the JobSet's job semantics. A wrong
port, flag, path, mount, permission, DNS name or policy in a manifest fails here.

What stands in for Kubernetes:
- the JobSet and Job controllers (tests/deploy/k8s_pods.py): the pods of the replicated jobs,
  each with its completion index; a pod whose container fails is replaced under the same index
  (a new pod: new address, fresh emptyDirs, the same PVC) while its Job's backoffLimit (or, with
  backoffLimitPerIndex, that index's own count and maxFailedIndexes) allows and its
  podFailurePolicy does not fail the Job (exit 2); the job has succeeded when every worker
  pod of the replicated jobs its successPolicy targets (All; every replicated job when it names
  none) has a pod that exited 0, and then, as the JobSet controller deletes the Jobs still active,
  every pod still running is killed: a server killed before it wrote its final shard fails the
  test;
- the kubelet: every pod gets its own address on a podman network made for the test; its init
  containers run one after another, then its container, all on that address and with the pod's
  hostname; every DNS name the rendering publishes for a pod (<hostname>.<subdomain>[.<ns>[.svc
  [.cluster.local]]]), of every job on the network, is an /etc/hosts entry of every container;
- env: literal values and Downward API fieldRefs (the pod's address, name, namespace, labels,
  completion index), $(VAR) expanded as the kubelet does;
- securityContext: runAsUser/runAsGroup -> --user, fsGroup -> the group of the volume directories
  and --group-add, readOnlyRootFilesystem -> --read-only with no tmpfs added, drop ALL ->
  --cap-drop=all, allowPrivilegeEscalation: false -> no-new-privileges, seccompProfile
  RuntimeDefault -> podman's default seccomp profile (what it applies unless told otherwise),
  runAsNonRoot -> the user must not be 0 (the kubelet refuses to start the container otherwise);
  any other field or value fails the test (so that a new one is translated, not ignored); the
  pod's automountServiceAccountToken: false needs nothing (no token is mounted here);
- volumes: a configMap volume is a directory of the ConfigMap's files mounted where the manifest
  mounts it (read-only when it says so), a Secret volume a directory of the Secret's files (mode
  defaultMode, group fsGroup; the job token <job>-token is made as docs/deploy.md says), an
  emptyDir a fresh directory per pod, a PVC one directory per claim that outlives the pods;
- probes: every container's httpGet readiness and liveness probe is polled from the host at the
  pod's address and must answer 200 at least once;
- terminationMessagePath: a fresh empty file per container (mode 0666, as the kubelet makes it)
  mounted at that path; after the container ended the test reads it as the kubelet would (the
  terminated state's message, terminationMessagePolicy File);
- resource requests and limits are not applied (this kind's cgroup setup does not allow them).
The additions to the manifests: each worker also gets --dump_weights=/tmp/replica-{rank}.f32
and --summary_out=/tmp/summary-{role}-{rank}.json (its /tmp emptyDir), so that the replicas can
be compared with the servers' final shards and its end-of-run summary read (and, in the kill
tests, a straggler delay). The kill tests also give the scheduler an emptyDir
at /tmp and --status_file=/tmp/status.json: the job status (docs/protocol.md, "Job status") tells
where the shards and the nodes ended.

Tests (the image built once; the jobs back to back):
- the image: runs as 10001:10001, has no compiler or build tool, `sieve-server --version` works on
  a read-only root file system as an arbitrary non-root user, size (printed) at most 250 MB;
- two jobs, cpu-small and the same overlay rendered with another name, train at the same time on
  one network: every pod exits 0, probes answer, each scheduler reports its job finished, test
  accuracy >= 0.65 (0.7298 measured), each job's replicas equal its own servers' shards and
  every worker wrote its summary; a stray worker of the second job (its token) pointed at the
  first job's scheduler is refused: it never registers (it exits non-zero with no summary
  written), and the first scheduler counts its messages as foreign;
- a server pod is killed (SIGKILL) once its first checkpoint is on the volume; its replacement
  under the same index restores the checkpoint and the job finishes with the same checks
  (accuracy >= 0.50: the replayed rounds move the result; the workers get
  --straggler=delay:10ms there too);
- a worker pod is killed mid-run; its replacement under the same index rejoins the running job
  before its end (the job status: the rank taken again once, finished, having pushed; the workers
  get --straggler=delay:10ms there, so that the epoch outlasts a new pod's start) and the job
  finishes with the same checks.
- a worker pod's first attempt runs as on a node whose GPU is not visible (--device=cuda, the
  build tree's sieve-worker with the CUDA backend mounted over the image's CPU-only one; without
  such a build, emulated at the pod level): it exits 75, which the workers' podFailurePolicy
  counts as one retry of its index (not FailJob, as it would a usage error's 2); the replacement
  under the same index runs as rendered and the job finishes with the same checks.

usage: container_run_test.py PODMAN_BUILD KUBECTL VERSION [unittest arguments, e.g. a test's
name: ContainerRunTest.test_image]
SIEVE_BUILD_DIR: the build tree whose sieve-worker the no-GPU test mounts (default: the one the
test runs in, else <source>/build).
Skips (exit 77) only inside a chroot (/ not a mount point), where podman cannot import or run an
image; anywhere else a plain Debian container that cannot run is a failure (scripts/setup
installs what it needs).
"""

import base64
import copy
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import k8s_pods as kp
import k8s_render as k

PODMAN_BUILD = None
KUBECTL = None
VERSION = None
IMAGE = None
ENV = None  # this process's environment plus CONTAINERS_CONF
JOB_TIMEOUT_S = 300
ACCURACY_FLOOR = 0.65  # the job as rendered: 0.7298 every run (BSP, fixed seeds)
# With a server or a worker killed mid-run, the rounds replayed against a restored shard (or
# the rejoined worker's stale first gradient) move the end of this 1-epoch job: 0.683-0.734 seen
# after a server kill. The floor only has to tell training from its failure (chance is 0.10).
ACCURACY_FLOOR_AFTER_KILL = 0.50
# The kill tests slow the workers down so that the kill and the replacement's start (seconds on
# a loaded machine) land well inside the 1-epoch job.
SLOW_WORKERS = ["--straggler=delay:10ms"]
# After the workers' success, the scheduler and the servers must have ended within this.
LINGER_LIMIT_S = 30
IMAGE_SIZE_LIMIT = 250 * 1000 * 1000
SKIP = 77
# sieve-worker's exit for --device=cuda without a usable GPU (kExitDeviceUnavailable,
# worker/worker_flags.h): the manifests retry the index.
EXIT_DEVICE_UNAVAILABLE = 75
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Each worker's end-of-run summary (docs/protocol.md, "Run summaries"), in its /tmp emptyDir.
WORKER_SUMMARY_ARGS = ["--summary_out=/tmp/summary-{role}-{rank}.json"]


def podman(*args, check=True, timeout=120, **kwargs):
    proc = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return proc


def build_worker():
    """The sieve-worker of this source tree's build tree (the binaries under test), None when
    none is found: $SIEVE_BUILD_DIR, else the build tree this test runs in (ctest runs it in
    <build>/tests/deploy), else <source>/build; a tree counts when its CMakeCache.txt names this
    source tree."""
    candidates = [os.environ["SIEVE_BUILD_DIR"]] if os.environ.get("SIEVE_BUILD_DIR") else []
    here = os.getcwd()
    while os.path.dirname(here) != here:
        candidates.append(here)
        here = os.path.dirname(here)
    candidates.append(os.path.join(SOURCE_DIR, "build"))
    for build in candidates:
        cache = os.path.join(build, "CMakeCache.txt")
        worker = os.path.join(build, "worker", "sieve-worker")
        if os.path.isfile(cache) and os.path.isfile(worker):
            with open(cache, encoding="utf-8", errors="replace") as f:
                if f"CMAKE_HOME_DIRECTORY:INTERNAL={SOURCE_DIR}\n" in f.read():
                    return worker
    return None


def checkpoint_dir(job):
    """This run's checkpoint directory on the servers' volume: run-<the JobSet's UID> (the
    servers' --checkpoint_dir and --dump_shard, from their JOB_RUN)."""
    (claim,) = set(job.claims.values())
    (run,) = {s.labels.get("jobset.sigs.k8s.io/jobset-uid") or
              s.labels["batch.kubernetes.io/controller-uid"] for s in job.by_role("server")}
    return os.path.join(claim, f"run-{run}")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def worker_summaries(pod_dir):
    """The summary files (WORKER_SUMMARY_ARGS) a worker pod's container wrote in its /tmp
    emptyDir: a worker writes one as its training ends, none when it never trained."""
    tmp = os.path.join(pod_dir, "emptydir-tmp")
    return sorted(f for f in os.listdir(tmp) if f.startswith("summary-")) \
        if os.path.isdir(tmp) else []


# Where the kill tests' scheduler writes its job status (with_status_file).
STATUS_FILE = "/tmp/status.json"


def with_status_file(docs):
    """Gives the scheduler's container an emptyDir at /tmp (its root file system is read-only)
    and --status_file=STATUS_FILE in its scheduler.flags."""
    for cm in k.by_kind(docs, "ConfigMap"):
        if "scheduler.flags" in cm.get("data", {}):
            cm["data"]["scheduler.flags"] += f"--status_file={STATUS_FILE}\n"
    (jobset,) = k.by_kind(docs, "JobSet")
    for rj in jobset["spec"]["replicatedJobs"]:
        spec = rj["template"]["spec"]["template"]["spec"]
        for c in spec["containers"]:
            if c["name"] == "scheduler":
                c.setdefault("volumeMounts", []).append({"name": "tmp", "mountPath": "/tmp"})
                spec.setdefault("volumes", []).append({"name": "tmp", "emptyDir": {}})


def status_node(status, role, rank):
    """The row of the job status `status` for the node of `role` ("server", "worker") and
    `rank`."""
    rows = [n for n in status["nodes"] if n["role"] == f"ROLE_{role.upper()}" and
            n["rank"] == rank]
    if len(rows) != 1:
        raise AssertionError(f"no single {role} {rank} in the job status: {status}")
    return rows[0]


class Network:
    """A podman network for the test, its free addresses and the DNS names of every pod on it."""

    def __init__(self, tag):
        self.name = f"sieve-test-{os.getpid()}-{tag}"
        podman("network", "create", self.name)
        info = podman("network", "inspect", self.name,
                      "--format", "{{range .Subnets}}{{.Subnet}} {{end}}").stdout.split()
        subnet = ipaddress.ip_network(info[0])
        self.addresses = (str(a) for a in list(subnet.hosts())[9:])  # .10 on: clear of the gateway
        self.hosts = {}  # DNS name -> address, of every job's pods

    def close(self):
        podman("network", "rm", "-f", self.name, check=False)


def check_seccomp(ctx, what):
    """seccompProfile RuntimeDefault is podman's default profile: nothing to add. Another type
    would need translating."""
    profile = ctx.get("seccompProfile")
    if profile is not None and profile != {"type": "RuntimeDefault"}:
        raise AssertionError(f"{what}: seccompProfile {profile} not translated")


class ContainerPod(kp.Pod):
    """A pod with the host directories that stand in for its volumes. A replacement (the Job
    controller's new pod for the same index) is a new attempt: new address and emptyDirs."""

    def __init__(self, job, template, index, subdomain, tmp, **kwargs):
        super().__init__(job, template, index, subdomain, **kwargs)
        self.tmp = tmp
        ctx = self.spec.get("securityContext", {})
        unknown = set(ctx) - {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup",
                              "seccompProfile"}
        if unknown:
            raise AssertionError(f"{self.name}: pod securityContext {unknown} not translated")
        check_seccomp(ctx, self.name)
        self.user, self.group = ctx.get("runAsUser"), ctx.get("runAsGroup")
        self.fs_group = ctx.get("fsGroup")
        self.non_root = ctx.get("runAsNonRoot")
        if ctx.get("runAsNonRoot") and not self.user:
            raise AssertionError(f"{self.name}: runAsNonRoot without runAsUser")
        self.attempt = -1
        self.ip = None
        self.dir = None

    def new_attempt(self, network):
        self.attempt += 1
        self.ip = next(network.addresses)
        self.dir = os.path.join(self.tmp, f"{self.name}-{self.attempt}")
        os.makedirs(self.dir)

    def volume_dir(self, path):
        """A directory the pod's user can write, as the kubelet prepares volumes."""
        os.makedirs(path, exist_ok=True)
        if self.fs_group is not None:
            os.chown(path, 0, self.fs_group)
            os.chmod(path, 0o2775)
        else:
            os.chmod(path, 0o1777)
        return path


class ContainerJob:
    """One rendered job on a (possibly shared) network: its pods, volumes and containers."""

    def __init__(self, docs, tmp, network, secrets, publish=True):
        self.tmp = tmp
        self.network = network
        self.name = k.one(docs, "NetworkPolicy")["metadata"]["name"]
        self.configmaps = kp.configmaps(docs)
        self.secrets = secrets  # Secret name -> {key: bytes}
        self.pods = kp.pods(docs, ContainerPod, tmp=tmp)
        # The JobSet's successPolicy (operator All): the replicated jobs whose every pod must
        # succeed, None for all of them (no targetReplicatedJobs), or no policy (plain Jobs).
        jobsets = k.by_kind(docs, "JobSet")
        policy = jobsets[0]["spec"].get("successPolicy") if jobsets else None
        if policy is not None and policy.get("operator", "All") != "All":
            raise AssertionError(f"successPolicy operator {policy['operator']} not played")
        self.success_policy = policy
        self.claims = {}  # PVC claimName -> directory
        for pod in self.pods:
            pod.new_attempt(network)
            for claim in pod.claims().values():
                if claim not in self.claims:
                    self.claims[claim] = pod.volume_dir(os.path.join(tmp, "pvc-" + claim))
        if publish:
            self.publish_dns()
        self.procs = {}  # container name -> Popen of `podman run`
        self.lock = threading.Lock()

    def publish_dns(self):
        for pod in self.pods:
            for host in pod.dns:
                self.network.hosts[host] = pod.ip

    def by_role(self, role):
        return sorted((p for p in self.pods if p.role == role), key=lambda p: p.index)

    def container_name(self, pod, container):
        return f"{self.network.name}-{pod.name}-{pod.attempt}-{container['name']}"

    def mounts(self, pod, container):
        """[(host path, mountPath, read-only)] of one container."""
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        out = []
        for m in container.get("volumeMounts", []):
            v = volumes[m["name"]]
            if "persistentVolumeClaim" in v:
                host = self.claims[v["persistentVolumeClaim"]["claimName"]]
            elif "configMap" in v:
                host = os.path.join(pod.dir, "configmap-" + m["name"])
                if not os.path.isdir(host):
                    kp.write_configmap(self.configmaps[v["configMap"]["name"]], host)
            elif "secret" in v:
                host = os.path.join(pod.dir, "secret-" + m["name"])
                if not os.path.isdir(host):
                    self.write_secret(pod, v["secret"], host)
            elif "emptyDir" in v:
                host = pod.volume_dir(os.path.join(pod.dir, "emptydir-" + m["name"]))
            else:
                raise AssertionError(f"volume {m['name']}: only configMap, Secret, PVC and "
                                     "emptyDir here")
            out.append((host, m["mountPath"], bool(m.get("readOnly"))))
        if "terminationMessagePath" in container:
            if container.get("terminationMessagePolicy", "File") != "File":
                raise AssertionError(f"{pod.name}/{container['name']}: only "
                                     "terminationMessagePolicy File is translated")
            host = os.path.join(pod.dir, "termination-" + container["name"])
            with open(host, "w", encoding="utf-8"):
                pass
            os.chmod(host, 0o666)
            out.append((host, container["terminationMessagePath"], False))
        return out

    def write_secret(self, pod, volume, host):
        """A Secret volume as the kubelet writes it: one file per key, mode defaultMode, group
        fsGroup."""
        name = volume["secretName"]
        if name not in self.secrets:
            raise AssertionError(f"{pod.name}: Secret {name} was not created")
        os.makedirs(host)
        os.chmod(host, 0o755)
        for key, data in self.secrets[name].items():
            path = os.path.join(host, key)
            with open(path, "wb") as f:
                f.write(data)
            os.chown(path, 0, pod.fs_group if pod.fs_group is not None else 0)
            os.chmod(path, volume.get("defaultMode", 0o644))

    def run_args(self, pod, container, extra_args=(), fault=None):
        """The `podman run` command line of one manifest container; `fault` (argv -> (podman
        arguments, argv)) changes it where the test puts a node's fault into this attempt."""
        env = kp.container_env(container, pod, pod.ip)
        argv = kp.container_argv(container, env, f"{pod.name}/{container['name']}")
        argv += list(extra_args)
        fault_args = []
        if fault is not None:
            fault_args, argv = fault(argv)
        args = ["run", "--rm", "--name", self.container_name(pod, container),
                "--network", self.network.name, "--ip", pod.ip, "--hostname", pod.hostname,
                "--pull=never"]
        for host, ip in sorted(self.network.hosts.items()):
            args += ["--add-host", f"{host}:{ip}"]
        if pod.user is not None:
            args += ["--user", f"{pod.user}:{pod.group if pod.group is not None else pod.user}"]
        if pod.fs_group is not None:
            args += ["--group-add", str(pod.fs_group)]
        ctx = container.get("securityContext", {})
        unknown = set(ctx) - {"allowPrivilegeEscalation", "readOnlyRootFilesystem",
                              "capabilities", "runAsNonRoot", "seccompProfile"}
        if unknown:
            raise AssertionError(f"{pod.name}: container securityContext {unknown} not translated")
        check_seccomp(ctx, f"{pod.name}/{container['name']}")
        if ctx.get("runAsNonRoot", pod.non_root) and not pod.user:
            raise AssertionError(f"{pod.name}/{container['name']}: runAsNonRoot, but the user "
                                 "would be root (the kubelet would not start it)")
        if ctx.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]
        if ctx.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        for cap in ctx.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", cap.lower()]
        for cap in ctx.get("capabilities", {}).get("add", []):
            args += ["--cap-add", cap.lower()]
        for host, path, read_only in self.mounts(pod, container):
            args += ["-v", f"{host}:{path}" + (":ro" if read_only else "")]
        for name, value in env.items():
            args += ["-e", f"{name}={value}"]
        return args + list(fault_args) + [IMAGE] + argv

    @staticmethod
    def probes(pod, container):
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        out = []
        for kind in ("readinessProbe", "livenessProbe"):
            if kind in container:
                get = container[kind]["httpGet"]
                port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
                out.append((kind, f"http://{pod.ip}:{port}{get['path']}"))
        return out

    def run_container(self, pod, container, log_path, stop, extra_args=(), fault=None):
        """Runs one container to its end; returns (exit code, probes that answered 200)."""
        name = self.container_name(pod, container)
        probes, seen = self.probes(pod, container), set()
        with open(log_path, "a", encoding="utf-8") as log:
            proc = subprocess.Popen(["podman", *self.run_args(pod, container, extra_args,
                                                              fault)],
                                    env=ENV, stdout=log, stderr=subprocess.STDOUT)
            with self.lock:
                self.procs[name] = proc
            while proc.poll() is None:
                kp.poll_probes(probes, seen)
                if stop.wait(0.1):
                    podman("kill", name, check=False)
                    proc.wait()
        return proc.returncode, len(seen) == len(probes)

    def kill(self, pod, container_name):
        """SIGKILLs the pod's running container (its node lost, say); returns its exit code."""
        container = next(c for c in pod.spec["containers"] if c["name"] == container_name)
        name = self.container_name(pod, container)
        podman("kill", "--signal", "KILL", name)
        with self.lock:
            proc = self.procs[name]
        return proc.wait(timeout=60)

    def close(self):
        for name in list(self.procs):
            podman("rm", "-f", name, check=False)


class Attempt:
    """One pod (attempt) of an index: its containers' results and log."""

    def __init__(self, pod):
        self.pod_name = pod.name
        self.attempt = pod.attempt
        self.dir = pod.dir
        self.results = {}  # container -> (exit code, probes ok)
        self.log = os.path.join(pod.dir, "pod.log")
        self.ended = None

    def text(self):
        if not os.path.exists(self.log):
            return ""
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def termination_message(self, container):
        """What the container left at its terminationMessagePath ("" when nothing)."""
        path = os.path.join(self.dir, "termination-" + container)
        if not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def exit_code(self):
        """The pod's outcome: the first failing container's code, else 0 (None: not run)."""
        for code, _ in self.results.values():
            if code != 0:
                return code
        return 0 if self.results else None


class JobRun:
    """The Job controllers of one job: runs every pod, replaces failed pods under their index
    (backoffLimit, backoffLimitPerIndex, the podFailurePolicy's rules on exit codes), decides
    success as the JobSet does. `faults`: {(pod name, attempt): f(argv) -> (podman arguments,
    argv)}, a node's fault the test puts into that attempt's container (ContainerJob.run_args)."""

    def __init__(self, job, stop=None, worker_args=(), faults=None):
        self.job = job
        self.worker_args = list(worker_args)
        self.faults = dict(faults or {})
        self.stop = stop or threading.Event()
        self.attempts = {}  # pod name -> [Attempt]
        self.failures = {}  # replicated job (Job) name, or (Job, index) per index -> failed pods
        self.failed_indexes = {}  # Job name -> indexes out of retries
        self.killed = set()  # (pod name, attempt) the test killed
        # (pod name, attempt, exit code, the podFailurePolicy's action) of every failed pod
        self.decisions = []
        self.failed_job = None
        self.threads = []
        self.lock = threading.Lock()
        self.job_specs = {}
        for pod in job.pods:
            self.attempts[pod.name] = []

    def extra_args(self, pod, container):
        if pod.role == "worker" and container["name"] == "worker":
            return ["--dump_weights=/tmp/replica-{rank}.f32", *WORKER_SUMMARY_ARGS,
                    *self.worker_args]
        return []

    @staticmethod
    def policy(pod):
        """(backoffLimit, backoffLimitPerIndex or None, maxFailedIndexes or None) of the pod's
        Job."""
        spec = pod.job_spec
        per_index = spec.get("backoffLimitPerIndex")
        # With backoffLimitPerIndex the Job-wide limit defaults to the largest int32.
        limit = spec.get("backoffLimit", 6 if per_index is None else 2 ** 31 - 1)
        return limit, per_index, spec.get("maxFailedIndexes")

    @staticmethod
    def failure_action(pod, code):
        """What the pod's Job's podFailurePolicy does with the pod that failed with exit `code`,
        as the Job controller decides it: the action of the first rule whose onExitCodes
        matches (Count, FailJob, FailIndex, Ignore), else Count. A pod here has no
        DisruptionTarget condition (the test's kills are counted failures), so the
        onPodConditions rules never match."""
        for rule in pod.job_spec.get("podFailurePolicy", {}).get("rules", []):
            codes = rule.get("onExitCodes")
            if codes is None:
                continue
            if codes["operator"] not in ("In", "NotIn") or "containerName" in codes:
                raise AssertionError(f"{pod.job}: onExitCodes {codes} not played")
            if rule["action"] not in ("Count", "FailJob", "FailIndex", "Ignore"):
                raise AssertionError(f"{pod.job}: action {rule['action']} not played")
            if (code in codes["values"]) == (codes["operator"] == "In"):
                return rule["action"]
        return "Count"

    def run_pod(self, pod):
        while True:
            attempt = Attempt(pod)
            with self.lock:
                self.attempts[pod.name].append(attempt)
            fault = self.faults.get((pod.name, pod.attempt))
            for c in pod.containers():
                main = c["name"] == pod.spec["containers"][0]["name"]
                result = self.job.run_container(pod, c, attempt.log, self.stop,
                                                self.extra_args(pod, c),
                                                fault if main else None)
                attempt.results[c["name"]] = result
                if result[0] != 0:
                    break
            attempt.ended = time.monotonic()
            code = attempt.exit_code()
            if code == 0:
                self.check_success()
            if code == 0 or self.stop.is_set():
                return
            backoff_limit, per_index, max_failed_indexes = self.policy(pod)
            action = self.failure_action(pod, code)
            with self.lock:
                self.decisions.append((pod.name, attempt.attempt, code, action))
            if action == "FailJob":
                self.failed_job = (pod.job, code, action)
                self.stop.set()  # the Job failed: the JobSet's failure policy takes over
                return
            if action == "Ignore":  # replaced, counted nowhere
                pod.new_attempt(self.job.network)
                continue
            with self.lock:
                failed = self.failures.get(pod.job, 0) + 1
                self.failures[pod.job] = failed
                index_failed = self.failures.get((pod.job, pod.index), 0) + 1
                self.failures[(pod.job, pod.index)] = index_failed
                index_lost = per_index is not None and (index_failed > per_index or
                                                        action == "FailIndex")
                if index_lost:
                    self.failed_indexes.setdefault(pod.job, set()).add(pod.index)
                lost = len(self.failed_indexes.get(pod.job, ()))
            # An index out of retries fails the Job once more indexes failed than
            # maxFailedIndexes allows (unset: when the other indexes end; here at once, since
            # sieve cannot finish without every rank).
            if (failed > backoff_limit or
                    (index_lost and (max_failed_indexes is None or lost > max_failed_indexes))):
                self.failed_job = (pod.job, code, f"{failed} failed pods")
                self.stop.set()  # the Job failed: the JobSet's failure policy takes over
                return
            if index_lost:
                return  # the index failed; the Job runs its other indexes on
            pod.new_attempt(self.job.network)  # a new pod for the same index

    def check_success(self):
        """The JobSet controller: once its success policy is met, the JobSet has succeeded and
        every Job still active is deleted, its pods killed (here: stop), whatever they were
        doing."""
        policy = self.job.success_policy
        if policy is None:
            return
        targets = policy.get("targetReplicatedJobs")
        label = "jobset.sigs.k8s.io/replicatedjob-name"
        with self.lock:
            for pod in self.job.pods:
                if targets and pod.labels.get(label) not in targets:
                    continue
                attempts = self.attempts[pod.name]
                if not attempts or attempts[-1].ended is None or attempts[-1].exit_code() != 0:
                    return
        self.stop.set()

    def start(self):
        for pod in self.job.pods:
            t = threading.Thread(target=self.run_pod, args=(pod,))
            t.start()
            self.threads.append(t)

    def current(self, pod):
        with self.lock:
            return self.attempts[pod.name][-1] if self.attempts[pod.name] else None

    def wait(self, deadline):
        for t in list(self.threads):
            t.join(max(1.0, deadline - time.monotonic()))
        timed_out = any(t.is_alive() for t in self.threads)
        self.stop.set()
        for t in self.threads:
            t.join()
        return timed_out

    def dump(self):
        out = []
        for name, attempts in self.attempts.items():
            for a in attempts:
                out.append(f"--- {name} attempt {a.attempt} {a.results}\n{a.text()[-3000:]}")
        if self.failed_job:
            out.append(f"--- Job {self.failed_job[0]} failed (exit {self.failed_job[1]}, "
                       f"{self.failed_job[2]})")
        return "\n".join(out)


def in_chroot():
    """Whether / is a plain directory (a chroot) rather than a mount: podman's storage remounts /,
    which fails there ("remount /, flags: 0x44000: invalid argument")."""
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return not any(line.split()[4] == "/" for line in f if len(line.split()) > 4)


def can_run_containers():
    """(ok, why): whether a plain Debian container runs here (not: whether sieve's image works).
    Makes the base images on the way (podman-build --bases-only)."""
    for tool in ("podman", "buildah", "runc", "debootstrap"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed (scripts/setup installs it)"
    bases = subprocess.run([PODMAN_BUILD, "--bases-only"], env=ENV, capture_output=True,
                           text=True, timeout=1200, check=False)
    if bases.returncode != 0:
        return False, f"the Debian base images could not be made:\n{bases.stderr[-2000:]}"
    probe = subprocess.run(["podman", "run", "--rm", "docker.io/library/debian:bookworm-slim",
                            "true"], env=ENV, capture_output=True, text=True, timeout=120,
                           check=False)
    if probe.returncode != 0:
        return False, f"podman cannot run a container here: {probe.stderr.strip()[-1000:]}"
    return True, ""


class ContainerRunTest(unittest.TestCase):

    def test_image(self):
        info = podman("image", "inspect", IMAGE, "--format", "{{.Config.User}} {{.Size}}")
        user, size = info.stdout.split()
        print(f"image {IMAGE}: {int(size) / 1e6:.1f} MB, user {user}")
        self.assertEqual(user, "10001:10001")
        self.assertLessEqual(int(size), IMAGE_SIZE_LIMIT)
        # As an arbitrary non-root user (OpenShift style) on a read-only root file system.
        version = podman("run", "--rm", "--read-only", "--read-only-tmpfs=false", "--user",
                         "12345:0", "--cap-drop", "all", IMAGE, "sieve-server", "--version")
        self.assertIn(VERSION, version.stdout + version.stderr)
        tools = podman("run", "--rm", IMAGE, "sh", "-c",
                       "for t in cc gcc g++ c++ clang ld as make cmake ninja apt-get; do "
                       "command -v $t; done; true")
        self.assertEqual(tools.stdout.split(), ["/usr/bin/apt-get"],
                         "the runtime image carries build tools")
        data = podman("run", "--rm", IMAGE, "ls", "/usr/share/datasets/fashion-mnist")
        self.assertIn("t10k-images-idx3-ubyte.gz", data.stdout)

    @staticmethod
    def token_secret(name):
        """The <job>-token Secret as docs/deploy.md makes it: 32 random bytes, base64."""
        return {f"{name}-token": {"token": base64.b64encode(os.urandom(32)) + b"\n"}}

    def start_job(self, docs, tmp, network):
        name = k.one(docs, "NetworkPolicy")["metadata"]["name"]
        job = ContainerJob(docs, os.path.join(tmp, name), network, self.token_secret(name))
        self.assertEqual(len(job.pods), 1 + 2 + 2)
        return job

    def wait_for_file(self, run, path, deadline, what):
        while not os.path.exists(path):
            self.assertLess(time.monotonic(), deadline, f"{what} never appeared\n{run.dump()}")
            self.assertFalse(run.stop.is_set(), f"the job failed before {what}\n{run.dump()}")
            time.sleep(0.02)

    def check_job(self, run, timed_out, floor):
        """The JobSet's success and the training's result; returns the final attempts."""
        job = run.job
        self.assertFalse(timed_out, f"job {job.name} did not end within {JOB_TIMEOUT_S} s\n"
                                    f"{run.dump()}")
        self.assertIsNone(run.failed_job, run.dump())
        final = {}
        for pod in job.pods:
            attempts = run.attempts[pod.name]
            for a in attempts[:-1]:  # only the pods the test killed or faulted were replaced
                self.assertIn((pod.name, a.attempt), run.killed | set(run.faults),
                              f"{pod.name} attempt {a.attempt} failed\n{run.dump()}")
            last = attempts[-1]
            for container, (code, probes_ok) in last.results.items():
                self.assertEqual(code, 0, f"{pod.name}/{container} failed\n{run.dump()}")
                self.assertTrue(probes_ok, f"{pod.name}/{container}: a probe never answered "
                                           f"200\n{run.dump()}")
            final[pod.name] = last
        # The JobSet's success (All of every replicated job) comes after the servers' dumps, and the
        # scheduler and servers end soon after the workers.
        workers_done = max(final[p.name].ended for p in job.by_role("worker"))
        for p in job.by_role("scheduler") + job.by_role("server"):
            self.assertLess(final[p.name].ended - workers_done, LINGER_LIMIT_S,
                            f"{p.name} ran on after the workers' success")
        # How the job ended, as `kubectl get pod -o jsonpath='{..terminated.message}'` shows it:
        # the scheduler's termination message (docs/deploy.md, "Job status").
        message = final[job.by_role("scheduler")[0].name].termination_message("scheduler")
        fields = dict(f.split("=", 1) for f in message.split() if "=" in f)
        self.assertEqual(fields.get("phase"), "FINISHED", f"{message!r}\n{run.dump()}")
        workers, servers = job.by_role("worker"), job.by_role("server")
        self.assertEqual(fields.get("workers"), f"{len(workers)}/{len(workers)}", message)
        self.assertIn("test_acc", fields, message)
        accuracy = float(fields["test_acc"])
        print(f"job {job.name}: {message}")
        self.assertGreaterEqual(accuracy, floor)
        shards = b"".join(read_bytes(os.path.join(checkpoint_dir(job), f"shard-{s.index}.f32"))
                          for s in servers)
        self.assertGreater(len(shards), 0)
        for w in workers:
            replica = read_bytes(os.path.join(final[w.name].dir, "emptydir-tmp",
                                              f"replica-{w.index}.f32"))
            self.assertEqual(replica, shards, f"{w.name}: replica differs from the servers")
            self.assertEqual(worker_summaries(final[w.name].dir),
                             [f"summary-worker-{w.index}.json"], f"{w.name}\n{run.dump()}")
        return final, int(fields.get("foreign", "0"))

    def test_two_jobs_train_side_by_side(self):
        """cpu-small and the same overlay named cpu-small-b at once on one network; a stray
        worker of the second job pointed at the first job's scheduler is refused and counted."""
        docs_a = k.render(KUBECTL, "overlays/cpu-small")
        docs_b = k.render_with_knobs(KUBECTL, "cpu-small", name="cpu-small-b")
        with tempfile.TemporaryDirectory(prefix="sieve-containers-") as tmp:
            os.chmod(tmp, 0o755)
            network = Network("two")
            jobs = []
            try:
                job_a = self.start_job(docs_a, tmp, network)
                job_b = self.start_job(docs_b, tmp, network)
                jobs = [job_a, job_b]
                # The stray: job b's worker 1 as a pod of its own, its scheduler address job a's.
                stray_docs = copy.deepcopy(docs_b)
                stray_job = ContainerJob(stray_docs, os.path.join(tmp, "stray"), network,
                                         job_b.secrets, publish=False)
                stray = stray_job.by_role("worker")[1]
                stray.name = "stray-worker"
                target = f"{job_a.by_role('scheduler')[0].dns[0]}:9310"
                for c in stray.containers():
                    for e in c.get("env", []):
                        if e["name"] == "SIEVE_SCHEDULER":
                            e["value"] = target
                jobs.append(stray_job)
                runs = [JobRun(job_a), JobRun(job_b)]
                start = time.monotonic()
                deadline = start + JOB_TIMEOUT_S
                for run in runs:
                    run.start()
                stray_attempt = Attempt(stray)
                stray_container = stray.spec["containers"][0]
                stray_thread = threading.Thread(target=lambda: stray_attempt.results.update(
                    {c["name"]: stray_job.run_container(
                        stray, c, stray_attempt.log, runs[0].stop,
                        WORKER_SUMMARY_ARGS if c["name"] == "worker" else ())
                     for c in stray.containers()}))
                stray_thread.start()
                timed_out = [run.wait(deadline) for run in runs]
                stray_thread.join()
                print(f"two jobs took {time.monotonic() - start:.1f} s")
                (_, foreign_a), (_, foreign_b) = (self.check_job(run, t, ACCURACY_FLOOR)
                                                  for run, t in zip(runs, timed_out))
                stray_text = stray_attempt.text()
                print(f"stray worker: {stray_attempt.results}; scheduler of {job_a.name}: "
                      f"foreign={foreign_a}, of {job_b.name}: foreign={foreign_b}")
                self.assertEqual(worker_summaries(stray_attempt.dir), [], stray_text)
                self.assertNotEqual(stray_attempt.results.get(stray_container["name"],
                                                              (0,))[0], 0, stray_text)
                self.assertGreater(foreign_a, 0, "job a's scheduler counted nothing foreign")
                self.assertEqual(foreign_b, 0)
            finally:
                for job in jobs:
                    job.close()
                network.close()

    def run_with_kill(self, role, index, when, worker_args=(), scheduler_flags=()):
        """Runs cpu-small (with `scheduler_flags` added to its scheduler.flags), SIGKILLs the pod
        <role> <index> once `when(job)` (a path) exists, and checks that its replacement under the
        same index finished the job with it. Returns the job's final status (the scheduler's
        --status_file, a dict)."""
        docs = k.render(KUBECTL, "overlays/cpu-small")
        for cm in k.by_kind(docs, "ConfigMap"):
            if "scheduler.flags" in cm.get("data", {}):
                cm["data"]["scheduler.flags"] += "".join(f"{f}\n" for f in scheduler_flags)
        with_status_file(docs)
        with tempfile.TemporaryDirectory(prefix="sieve-containers-") as tmp:
            os.chmod(tmp, 0o755)
            network = Network(role)
            job = None
            try:
                job = self.start_job(docs, tmp, network)
                run = JobRun(job, worker_args=worker_args)
                start = time.monotonic()
                deadline = start + JOB_TIMEOUT_S
                run.start()
                pod = job.by_role(role)[index]
                self.wait_for_file(run, when(job), deadline, f"{when(job)}")
                victim = run.current(pod)
                with run.lock:
                    run.killed.add((pod.name, victim.attempt))
                code = job.kill(pod, pod.spec["containers"][0]["name"])
                self.assertEqual(code, 137, f"{pod.name} was not killed mid-run\n{run.dump()}")
                print(f"killed {pod.name} (exit {code})")
                timed_out = run.wait(deadline)
                print(f"job with {pod.name} killed took {time.monotonic() - start:.1f} s")
                final, _ = self.check_job(run, timed_out, ACCURACY_FLOOR_AFTER_KILL)
                self.assertEqual(len(run.attempts[pod.name]), 2, run.dump())
                scheduler = final[job.by_role("scheduler")[0].name]
                with open(os.path.join(scheduler.dir, "emptydir-tmp",
                                       os.path.basename(STATUS_FILE))) as f:
                    status = json.load(f)
                self.assertEqual(status["phase"], "JOB_FINISHED", status)
                return status
            finally:
                if job:
                    job.close()
                network.close()

    def test_server_pod_killed_is_replaced_and_resumes(self):
        """Server 1's pod dies once its first checkpoint is on the volume; the servers' Job
        replaces it under index 1, and the new pod restores its shard from the checkpoint. The
        workers are slowed down as in the worker test, so that the kill (a podman command, slow
        on a loaded machine) lands well before the end."""
        status = self.run_with_kill("server", 1, lambda job: os.path.join(
            checkpoint_dir(job), "server-1.ckpt"),
            worker_args=SLOW_WORKERS)
        server = status_node(status, "server", 1)
        self.assertEqual(server["restarts"], 1, server)
        # The round it restored: the new process's report (on its heartbeats, about once a
        # second; it lived on for the rest of the job) in the final status. An int64, so a string.
        self.assertIn("server", server, f"the new server 1 never reported\n{status}")
        restored = int(server["server"]["restored_round"])
        print(f"the new server 1 restored round {restored}")
        self.assertGreater(restored, 0, f"the new server 1 restored nothing\n{status}")

    def test_replicated_server_pod_killed_fails_over_and_is_rebuilt(self):
        """The same kill with the scheduler's --replication=1 (the manifests unchanged but for that
        flag): server 1's shard fails over to its copy on server 0 after the heartbeat timeout,
        the Job's replacement pod is rebuilt from the copies (no checkpoint restored into the
        shard it serves) and takes its shard back, and the replicas still equal the servers'
        dumps."""
        status = self.run_with_kill("server", 1, lambda job: os.path.join(
            checkpoint_dir(job), "server-1.ckpt"),
            worker_args=SLOW_WORKERS, scheduler_flags=["--replication=1"])
        # The job status at the end: the new server 1 (a restart of the rank) serves its shard
        # again, which the shard's primary on server 0 hands back only to a rebuilt copy, and
        # holds a copy of server 0's shard (rebuilt too); server 0 follows shard 1 as its backup.
        new, other = status_node(status, "server", 1), status_node(status, "server", 0)
        self.assertEqual(new["restarts"], 1, status)
        self.assertEqual(new["primary_shards"], [1],
                         f"the new server 1 did not take its shard back\n{status}")
        self.assertEqual(new["backup_shards"], [0], f"the new server 1 was not rebuilt\n{status}")
        self.assertEqual(other["primary_shards"], [0], status)
        self.assertEqual(other["backup_shards"], [1], status)

    def test_worker_pod_killed_is_replaced_and_rejoins(self):
        """Worker 1's pod dies mid-run (after the servers' first checkpoint, round 100); the
        workers' Job replaces it under index 1, and the new pod rejoins the running job and
        trains its share of the rest. The workers are slowed down (SLOW_WORKERS: 10 ms more a
        round, the epoch's 468 rounds about 12 s) so that the new pod, which takes a second or two
        to start, joins before the end."""
        status = self.run_with_kill("worker", 1, lambda job: os.path.join(
            checkpoint_dir(job), "server-0.ckpt"),
            worker_args=SLOW_WORKERS)
        # The job status at the end: rank 1 was lost and taken again by one new process, which
        # finished every round of the job; its report (its own counters) says it pushed, so it
        # joined before the end.
        worker = status_node(status, "worker", 1)
        report = worker["worker"]
        print(f"the new worker 1 rejoined (lost: {worker['lost_reason']}), reached round "
              f"{report['round']} of {report['total_rounds']}, pushed {report['bytes_pushed']} "
              "bytes")
        self.assertEqual(worker["restarts"], 1, worker)
        self.assertNotEqual(worker["lost_reason"], "", worker)
        self.assertEqual(worker["state"], "NODE_FINISHED",
                         f"the new worker 1 did not finish\n{status}")
        self.assertGreater(int(report["total_rounds"]), 0, worker)
        self.assertEqual(report["round"], report["total_rounds"], worker)
        self.assertGreater(int(report["bytes_pushed"]), 0, "the new worker joined after the end")

    def no_gpu_fault(self, tmp):
        """(fault, real) for a worker's container on a node whose GPU is not visible (JobRun's
        faults): what the GPU overlays' worker does there, `--device=cuda` (their worker.flags;
        appended, it wins over cpu-small's --device=cpu), run by sieve-worker built with the CUDA
        backend. The cpu image's own sieve-worker has no CUDA backend and refuses --device=cuda
        as a usage error (2, checked here), so the fault mounts the build tree's sieve-worker
        (build_worker()) over the image's where that one has the CUDA backend (nvcc found at
        build time; the CUDA runtime is linked statically, so it needs no library the image
        lacks): a container here has no GPU device and no driver, so it exits 75 as on such a
        node (real=True). Without a CUDA build the fault is emulated at the pod level: the
        container exits 75 with the worker's message, nothing of sieve run (real=False,
        printed)."""
        usage = podman("run", "--rm", IMAGE, "sieve-worker", "--device=cuda", check=False)
        self.assertEqual(usage.returncode, 2, "the cpu image's worker and --device=cuda: "
                                              f"{usage.stderr}")
        self.assertIn("without the CUDA backend", usage.stderr)
        worker = build_worker()
        if worker is not None:
            binary = os.path.join(tmp, "cuda-bin", "sieve-worker")
            os.makedirs(os.path.dirname(binary))
            os.chmod(os.path.dirname(binary), 0o755)
            shutil.copy(worker, binary)  # a copy: a rebuild of the tree cannot change it mid-test
            os.chmod(binary, 0o755)
            mount = ["-v", f"{binary}:/opt/sieve/bin/sieve-worker:ro"]
            probe = podman("run", "--rm", *mount, IMAGE, "sieve-worker", "--device=cuda",
                           check=False)
            if probe.returncode == EXIT_DEVICE_UNAVAILABLE:
                print(f"no-GPU fault: {worker} (the CUDA build) in the image, --device=cuda")
                return (lambda argv: (mount, argv + ["--device=cuda"])), True
            self.assertIn("without the CUDA backend", probe.stderr,
                          f"{worker} and --device=cuda in the image: exit {probe.returncode}")
        print("no-GPU fault EMULATED at the pod level: no sieve-worker with the CUDA backend in "
              "the build tree (SIEVE_BUILD_DIR)")
        message = "sieve-worker: --device: device 'cuda' requested but no GPU is visible"
        return (lambda argv: ([], ["sh", "-c", f"echo \"{message}\" >&2; "
                                               f"exit {EXIT_DEVICE_UNAVAILABLE}"])), False

    def test_worker_without_a_visible_gpu_is_retried_not_failed(self):
        """Worker 1's first pod runs on a node whose GPU is not visible: its sieve-worker, with
        --device=cuda, exits 75 (no_gpu_fault: the real daemon, built with the CUDA backend). The
        workers' Job counts it as one failure of index 1 (the podFailurePolicy's Count rule for
        75, within backoffLimitPerIndex), not FailJob, and replaces it under index 1; the new pod
        runs as rendered, the job finishes, and every pod's final attempt exits 0."""
        docs = k.render(KUBECTL, "overlays/cpu-small")
        with tempfile.TemporaryDirectory(prefix="sieve-containers-") as tmp:
            os.chmod(tmp, 0o755)
            fault, real = self.no_gpu_fault(tmp)
            network = Network("nogpu")
            job = None
            try:
                job = self.start_job(docs, tmp, network)
                pod = job.by_role("worker")[1]
                # The contrast, decided by the same emulation from the same rendered policy: the
                # same pod exiting 2 (a usage error, as the cpu image's own worker answers
                # --device=cuda above) fails its Job at once (FailJob), and so the JobSet. Not
                # run as a job here: the rules themselves are checked on every overlay by
                # tests/deploy/render_test.py (exit_code_violations in check_overlay, e.g.
                # RenderTest.test_cpu_small; they are broken on purpose in
                # RenderTest.test_exit_code_check_catches_a_fatal_gpu_fault).
                self.assertEqual(JobRun.failure_action(pod, 2), "FailJob")
                self.assertEqual(JobRun.failure_action(pod, EXIT_DEVICE_UNAVAILABLE), "Count")
                _, per_index, max_failed_indexes = JobRun.policy(pod)
                self.assertIsNotNone(per_index, "the workers' Job has no backoffLimitPerIndex")
                self.assertGreaterEqual(per_index, 1)
                run = JobRun(job, faults={(pod.name, 0): fault})
                start = time.monotonic()
                run.start()
                timed_out = run.wait(start + JOB_TIMEOUT_S)
                print(f"job with {pod.name}'s first pod on a node without a GPU took "
                      f"{time.monotonic() - start:.1f} s")
                first, *rest = run.attempts[pod.name]
                text = first.text()
                self.assertEqual(first.exit_code(), EXIT_DEVICE_UNAVAILABLE,
                                 f"{first.results}\n{run.dump()}")
                self.assertIn("requested but no GPU is visible", text)
                if real:  # the message ends the daemon's own output: it connected nowhere
                    self.assertTrue(text.rstrip().endswith("no GPU is visible"), text)
                self.assertEqual(worker_summaries(first.dir), [], text)
                # One Count of index 1 against its own budget; nothing else failed.
                self.assertEqual(run.decisions, [(pod.name, 0, EXIT_DEVICE_UNAVAILABLE, "Count")],
                                 run.dump())
                self.assertEqual(run.failures.get((pod.job, pod.index)), 1)  # <= per_index
                self.assertEqual(run.failed_indexes.get(pod.job, set()), set())
                self.assertEqual(len(rest), 1, run.dump())
                final, _ = self.check_job(run, timed_out, ACCURACY_FLOOR)
                self.assertEqual(final[pod.name].attempt, 1)
                print(f"{pod.name}: attempt 0 exit {EXIT_DEVICE_UNAVAILABLE} (Count, "
                      f"{'real daemon' if real else 'EMULATED'}), attempt 1 exit 0; "
                      f"backoffLimitPerIndex {per_index}, maxFailedIndexes {max_failed_indexes}")
            finally:
                if job:
                    job.close()
                network.close()


def main():
    global PODMAN_BUILD, KUBECTL, VERSION, IMAGE, ENV
    PODMAN_BUILD, KUBECTL, VERSION = sys.argv[1:4]
    del sys.argv[1:4]
    conf = subprocess.run([PODMAN_BUILD, "--conf-only"], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]
    ENV = dict(os.environ, CONTAINERS_CONF=conf)
    if in_chroot():
        print("SKIPPED: / is not a mount point here (a chroot): podman's storage cannot work")
        sys.exit(SKIP)
    ok, why = can_run_containers()
    if not ok:
        print(f"FAILED: {why}")
        sys.exit(1)
    start = time.monotonic()
    build = subprocess.run([PODMAN_BUILD, "--target", "cpu"], env=ENV, stdout=subprocess.PIPE,
                           text=True, check=False)
    if build.returncode != 0:
        print(f"image build failed ({build.returncode})")
        sys.exit(1)
    IMAGE = build.stdout.strip().splitlines()[-1]
    print(f"built {IMAGE} in {time.monotonic() - start:.0f} s")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
