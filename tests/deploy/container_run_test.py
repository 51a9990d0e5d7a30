"""DeployContainerRun: builds the `cpu` image with podman (deploy/docker/podman-build) and runs the
rendered cpu-small overlay as podman containers, one per manifest container, with the rendered
command, args, env, security context and mounts. A wrong port, flag, path, mount or permission in
a manifest fails here.

What stands in for Kubernetes:
- every pod gets its own address on a podman network made for the test; its init containers run
  one after another, then its container, all on that address and with the pod's name as host
  name; Service names (all DNS spellings) and StatefulSet pod names (<pod>.<service>) are
  /etc/hosts entries of every container;
- env: literal values and Downward API fieldRefs (the pod's address, name, namespace, labels,
  completion index), $(VAR) expanded as the kubelet does (tests/deploy/k8s_pods.py);
- securityContext: runAsUser/runAsGroup -> --user, fsGroup -> the group of the volume directories
  and --group-add, readOnlyRootFilesystem -> --read-only with no tmpfs added, drop ALL ->
  --cap-drop=all, allowPrivilegeEscalation: false -> no-new-privileges; any other field fails the
  test (so that a new one is translated, not ignored);
- volumes: a configMap volume is a directory of the ConfigMap's files mounted where the manifest
  mounts it (read-only when it says so), an emptyDir a fresh directory, a volumeClaimTemplate a
  directory per pod that outlives its containers (the PVC);
- probes: every container's httpGet readiness and liveness probe is polled from the host at the
  pod's address and must answer 200 at least once;
- resource requests and limits are not applied (this kind's cgroup setup does not allow them).
The one addition to the manifests: each worker also gets --dump_weights=/tmp/replica-{rank}.f32
(its /tmp emptyDir), so that the replicas can be compared with the servers' final shards.

Tests:
- the image: runs as 10001:10001, has no compiler or build tool, `sieve-server --version` works on
  a read-only root file system as an arbitrary non-root user, size (printed) at most 250 MB;
- the cpu-small job trains and finishes: every container exits 0, probes answer, the scheduler
  reports the job finished, test accuracy >= 0.65 (0.7298 measured), both replicas equal the
  concatenated shards;
- server-1's container is killed (SIGKILL) once its first checkpoint is on its volume; a new
  container for the same ordinal with the same volume restores the checkpoint, and the job
  finishes with the same checks (accuracy >= 0.50: the replayed rounds move the result).

usage: container_run_test.py PODMAN_BUILD KUBECTL VERSION
Skips (exit 77) only inside a chroot (/ not a mount point), where podman cannot import or run an
image; anywhere else a plain Debian container that cannot run is a failure (scripts/setup
installs what it needs).
"""

import ipaddress
import os
import re
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
# With server-1 killed after its round-100 checkpoint, the rounds the workers ran past it are
# replayed against the restored shard, which moves the end of this 1-epoch job: 0.683-0.734 seen.
# The floor only has to tell training from its failure (chance is 0.10).
ACCURACY_FLOOR_AFTER_KILL = 0.50
IMAGE_SIZE_LIMIT = 250 * 1000 * 1000
SKIP = 77


def podman(*args, check=True, timeout=120, **kwargs):
    proc = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return proc


def read_floats(path):
    with open(path, "rb") as f:
        return f.read()


class ContainerPod(kp.Pod):
    """A pod with its address and the host directories that stand in for its volumes."""

    def __init__(self, workload, index, tmp, addresses):
        super().__init__(workload, index, job_suffix="-pod")
        self.ip = next(addresses)
        self.dir = os.path.join(tmp, self.name)
        os.makedirs(self.dir)
        ctx = self.spec.get("securityContext", {})
        unknown = set(ctx) - {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup"}
        if unknown:
            raise AssertionError(f"{self.name}: pod securityContext {unknown} not translated")
        self.user, self.group = ctx.get("runAsUser"), ctx.get("runAsGroup")
        self.fs_group = ctx.get("fsGroup")
        if ctx.get("runAsNonRoot") and not self.user:
            raise AssertionError(f"{self.name}: runAsNonRoot without runAsUser")
        self.claims = {name: self.volume_dir("pvc-" + name) for name in self.claim_templates}

    def volume_dir(self, name):
        """A directory the pod's user can write, as the kubelet prepares volumes."""
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        if self.fs_group is not None:
            os.chown(path, 0, self.fs_group)
            os.chmod(path, 0o2775)
        else:
            os.chmod(path, 0o1777)
        return path


class ContainerCluster:
    """The rendered overlay as podman containers on a network of its own."""

    def __init__(self, docs, tmp, tag):
        self.tmp = tmp
        self.network = f"sieve-test-{os.getpid()}-{tag}"
        podman("network", "create", self.network)
        info = podman("network", "inspect", self.network,
                      "--format", "{{range .Subnets}}{{.Subnet}} {{end}}").stdout.split()
        subnet = ipaddress.ip_network(info[0])
        addresses = (str(a) for a in list(subnet.hosts())[9:])  # .10 on: clear of the gateway
        self.configmaps = kp.configmaps(docs)
        self.pods = kp.pods(docs, ContainerPod, tmp=tmp, addresses=addresses)
        self.hosts = self.host_entries(k.by_kind(docs, "Service"))
        self.procs = {}  # container name -> Popen of `podman run`
        self.lock = threading.Lock()

    def host_entries(self, services):
        out = {}
        for svc in services:
            name = svc["metadata"]["name"]
            backends = kp.backends(svc, self.pods)
            for host in kp.dns_names(name):
                if len(backends) == 1:
                    out[host] = backends[0].ip
                for b in backends:  # StatefulSet pods: <pod>.<service>
                    if b.kind == "StatefulSet":
                        out[f"{b.name}.{host}"] = b.ip
        return out

    def mounts(self, pod, container):
        """[(host directory, mountPath, read-only)] of one container."""
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        out = []
        for m in container.get("volumeMounts", []):
            name = m["name"]
            if name in pod.claims:
                host = pod.claims[name]
            elif "configMap" in volumes[name]:
                host = os.path.join(pod.dir, "configmap-" + name)
                if not os.path.isdir(host):
                    kp.write_configmap(self.configmaps[volumes[name]["configMap"]["name"]],
                                       host)
            elif "emptyDir" in volumes[name]:
                host = pod.volume_dir("emptydir-" + name)
            else:
                raise AssertionError(f"volume {name}: only configMap, PVC and emptyDir here")
            out.append((host, m["mountPath"], bool(m.get("readOnly"))))
        return out

    def run_args(self, pod, container, extra_args=()):
        """The `podman run` command line of one manifest container."""
        env = kp.container_env(container, pod, pod.ip)
        argv = kp.container_argv(container, env, f"{pod.name}/{container['name']}")
        args = ["run", "--rm", "--name", f"{self.network}-{pod.name}-{container['name']}",
                "--network", self.network, "--ip", pod.ip, "--hostname", pod.name,
                "--pull=never"]
        for host, ip in sorted(self.hosts.items()):
            args += ["--add-host", f"{host}:{ip}"]
        if pod.user is not None:
            args += ["--user", f"{pod.user}:{pod.group if pod.group is not None else pod.user}"]
        if pod.fs_group is not None:
            args += ["--group-add", str(pod.fs_group)]
        ctx = container.get("securityContext", {})
        unknown = set(ctx) - {"allowPrivilegeEscalation", "readOnlyRootFilesystem",
                              "capabilities"}
        if unknown:
            raise AssertionError(f"{pod.name}: container securityContext {unknown} not translated")
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
        return args + [IMAGE] + argv + list(extra_args)

    def probes(self, pod, container):
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        out = []
        for kind in ("readinessProbe", "livenessProbe"):
            if kind in container:
                get = container[kind]["httpGet"]
                port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
                out.append((kind, f"http://{pod.ip}:{port}{get['path']}"))
        return out

    def run_container(self, pod, container, log_path, stop, extra_args=()):
        """Runs one container to its end; returns (exit code, probes that answered 200)."""
        name = f"{self.network}-{pod.name}-{container['name']}"
        probes, seen = self.probes(pod, container), set()
        with open(log_path, "a", encoding="utf-8") as log:
            proc = subprocess.Popen(["podman", *self.run_args(pod, container, extra_args)],
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
        name = f"{self.network}-{pod.name}-{container_name}"
        podman("kill", "--signal", "KILL", name)
        with self.lock:
            proc = self.procs[name]
        return proc.wait(timeout=60)

    def close(self):
        for pod in self.pods:
            for c in pod.containers():
                podman("rm", "-f", f"{self.network}-{pod.name}-{c['name']}", check=False)
        podman("network", "rm", "-f", self.network, check=False)


class JobRun:
    """Runs every pod of a cluster (init containers, then the container) in threads."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.stop = threading.Event()
        self.results = {}  # (pod, container) -> (exit code, probes ok) of the last run
        self.threads = []
        self.kills = set()  # pods whose container the test kills: exit 137 there is not a failure
        self.lock = threading.Lock()

    @staticmethod
    def extra_args(pod, container):
        if pod.kind == "Job" and container["name"] == "worker":
            return ["--dump_weights=/tmp/replica-{rank}.f32"]
        return []

    def log_path(self, pod, container):
        return os.path.join(pod.dir, f"{container['name']}.log")

    def run_pod(self, pod, containers):
        for c in containers:
            result = self.cluster.run_container(pod, c, self.log_path(pod, c), self.stop,
                                                self.extra_args(pod, c))
            self.results[(pod.name, c["name"])] = result
            if result[0] != 0:
                with self.lock:
                    killed = result[0] == 137 and pod.name in self.kills
                    self.kills.discard(pod.name)
                if not killed:
                    self.stop.set()  # a failed container fails the job
                return

    def start(self, pod, containers=None):
        t = threading.Thread(target=self.run_pod, args=(pod, containers or pod.containers()))
        t.start()
        self.threads.append(t)

    def wait(self, deadline):
        for t in list(self.threads):
            t.join(max(1.0, deadline - time.monotonic()))
        timed_out = any(t.is_alive() for t in self.threads)
        self.stop.set()
        for t in self.threads:
            t.join()
        return timed_out

    def logs(self):
        out = {}
        for pod in self.cluster.pods:
            for c in pod.containers():
                path = self.log_path(pod, c)
                out[(pod.name, c["name"])] = ""
                if os.path.exists(path):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        out[(pod.name, c["name"])] = f.read()
        return out


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

    def run_job(self, tag, kill_server=None):
        docs = k.render(KUBECTL, "overlays/cpu-small")
        with tempfile.TemporaryDirectory(prefix="sieve-containers-") as tmp:
            os.chmod(tmp, 0o755)
            cluster = ContainerCluster(docs, tmp, tag)
            try:
                self.assertEqual(len(cluster.pods), 1 + 2 + 2)
                run = JobRun(cluster)
                start = time.monotonic()
                deadline = start + JOB_TIMEOUT_S
                for pod in cluster.pods:
                    run.start(pod)
                restored = None
                if kill_server is not None:
                    restored = self.kill_and_restart(cluster, run, kill_server, deadline)
                timed_out = run.wait(deadline)
                elapsed = time.monotonic() - start
                logs = run.logs()
                print(f"job ({tag}) took {elapsed:.1f} s")
                self.check_job(cluster, run, logs, timed_out, restored)
            finally:
                cluster.close()

    def kill_and_restart(self, cluster, run, ordinal, deadline):
        """SIGKILLs server-<ordinal> once its first checkpoint is written; starts a new one."""
        pod = next(p for p in cluster.pods if p.name == f"sieve-server-{ordinal}")
        ckpt = os.path.join(pod.claims["checkpoints"], f"server-{ordinal}.ckpt")
        while not os.path.exists(ckpt):
            self.assertLess(time.monotonic(), deadline, "no checkpoint was ever written")
            self.assertFalse(run.stop.is_set(), "the job failed before the checkpoint")
            time.sleep(0.02)
        with run.lock:
            run.kills.add(pod.name)
        code = cluster.kill(pod, "server")
        self.assertEqual(code, 137, "server container was not killed mid-run (did it finish?)")
        print(f"killed sieve-server-{ordinal} (exit {code}); starting a new container")
        while True:  # its thread has seen the kill (and not stopped the job)
            with run.lock:
                if pod.name not in run.kills:
                    break
            time.sleep(0.01)
        run.start(pod, pod.spec["containers"])
        return pod

    def check_job(self, cluster, run, logs, timed_out, restored):
        def dump():
            return "\n".join(f"--- {p}/{c} ({run.results.get((p, c))})\n{text[-3000:]}"
                             for (p, c), text in logs.items())

        self.assertFalse(timed_out, f"job did not end within {JOB_TIMEOUT_S} s\n{dump()}")
        for key in logs:
            code, probes_ok = run.results.get(key, (None, False))
            self.assertEqual(code, 0, f"{key} failed\n{dump()}")
            self.assertTrue(probes_ok, f"{key}: a probe never answered 200\n{dump()}")
        sched = next(p for p in cluster.pods if p.kind == "Deployment")
        self.assertIn("sieve-scheduler: job finished", logs[(sched.name, "scheduler")], dump())
        workers = sorted((p for p in cluster.pods if p.kind == "Job"), key=lambda p: p.index)
        servers = sorted((p for p in cluster.pods if p.kind == "StatefulSet"),
                         key=lambda p: p.index)
        accuracy = re.search(r"sieve-worker summary: rank=0 .* test_acc=([0-9.]+)",
                             logs[(workers[0].name, "worker")])
        self.assertIsNotNone(accuracy, dump())
        print(f"test accuracy {float(accuracy.group(1)):.4f}")
        floor = ACCURACY_FLOOR if restored is None else ACCURACY_FLOOR_AFTER_KILL
        self.assertGreaterEqual(float(accuracy.group(1)), floor)
        shards = b"".join(read_floats(os.path.join(s.claims["checkpoints"],
                                                   f"shard-{s.index}.f32")) for s in servers)
        self.assertGreater(len(shards), 0)
        for w in workers:
            tmp = next(d for d in os.listdir(w.dir) if d.startswith("emptydir-tmp"))
            replica = read_floats(os.path.join(w.dir, tmp, f"replica-{w.index}.f32"))
            self.assertEqual(replica, shards, f"{w.name}: replica differs from the servers")
        if restored is not None:
            m = re.search(r"restored shard .* at round (\d+)", logs[(restored.name, "server")])
            self.assertIsNotNone(m, f"the new server-{restored.index} restored nothing\n{dump()}")
            print(f"the new sieve-server-{restored.index} restored round {m.group(1)}")
            self.assertGreater(int(m.group(1)), 0)

    def test_cpu_small_trains_in_containers(self):
        self.run_job("run")

    def test_server_killed_mid_run_is_restored_from_its_volume(self):
        self.run_job("kill", kill_server=1)


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
