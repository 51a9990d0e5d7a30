"""DeployLocalRun: runs the rendered cpu-small, cpu-small-plain and cpu-secure overlays as local
processes, container by container, with exactly the command, args and env of the manifests, and
checks that each job trains to completion.

What stands in for Kubernetes:
- every pod is a set of processes: its init containers one after another, then its container;
  the pods are those the JobSet and Job controllers make (tests/deploy/k8s_pods.py): the
  replicated jobs' (or Indexed Jobs') `completions` pods, each with its completion index;
- env: literal values and Downward API fieldRefs (status.podIP -> 127.0.0.1, metadata.name,
  metadata.namespace, metadata.labels[...], metadata.annotations[...]); $(VAR) references in
  env values, command and args are expanded as the kubelet does ($$ escapes, unknown names stay);
- the image: PATH holds one wrapper per binary (sieve-scheduler, sieve-server, sieve-worker,
  sieve) that records its argv and execs the build's binary; nothing else from this shell's
  environment is passed on. The wrappers of sieve-server and sieve-worker append one flag of the
  test's own, --summary_out=<the pod's directory>/summary-{role}-{rank}.json: the end-of-run
  summary each writes for programs (docs/protocol.md, "Run summaries"), which the checks read;
- networking: every containerPort of every pod gets its own free local port (`--<x>port=N` flags
  are rewritten), and every DNS name the rendering publishes for a pod
  (<hostname>.<subdomain>[.<ns>[.svc[.cluster.local]]]) with a port resolves to 127.0.0.1 and
  that pod's local port;
- volumes: configMap volumes become directories holding the ConfigMap's files (paths inside them
  mapped the same way), Secret volumes the directory the test wrote that Secret's files into
  (the job token Secret <job>-token is made for every job, as docs/deploy.md says), each PVC one
  directory shared by the pods that mount it, emptyDirs temporary directories; mountPath
  prefixes in strings are rewritten to those directories.
Checks: every recorded daemon argv and every flagfile it reads (recursively) names only flags the
daemon defines (`--helpxml`; the daemons also exit 2 on one, this names the manifest), every
container's readiness and liveness probe answers HTTP 200 while it runs, every process exits 0,
every server and worker wrote its summary (each server its pod's index as its rank), the
scheduler reports the job finished, the servers
wrote their checkpoints and final shards to the checkpoint volume (PVC), and `sieve export` of
the run's directory gives the servers' final shards in rank order, byte for byte.

usage: local_run_test.py KUBECTL SCHEDULER SERVER WORKER LAUNCHER
"""

import base64
import glob
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import xml.etree.ElementTree as ET

import k8s_pods as kp
import k8s_render as k

KUBECTL = None
BINARIES = {}  # program name in the image -> build path
JOB_TIMEOUT_S = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pod(kp.Pod):
    """One pod instance, with its local ports and directories."""

    def __init__(self, job, template, index, subdomain, tmp, **kwargs):
        super().__init__(job, template, index, subdomain, **kwargs)
        self.dir = os.path.join(tmp, "pods", self.name)
        os.makedirs(self.dir)
        # containerPort -> local port, and port name -> local port.
        self.ports, self.named_ports = {}, {}
        for c in self.containers():
            for p in c.get("ports", []):
                local = self.ports.setdefault(p["containerPort"], free_port())
                if "name" in p:
                    self.named_ports[p["name"]] = local

    def local_port(self, port):
        return self.named_ports[port] if isinstance(port, str) else self.ports[port]


class LocalCluster:
    def __init__(self, docs, tmp, secrets=None, pvc_root=None):
        self.tmp = tmp
        self.secrets = secrets or {}  # Secret name -> directory holding its keys as files
        self.configmaps = kp.configmaps(docs)
        self.pods = kp.pods(docs, Pod, tmp=tmp)
        self.addresses = self.pod_addresses()
        self.claims = {}  # PVC claimName -> directory
        for pod in self.pods:
            for claim in pod.claims().values():
                self.claims.setdefault(claim, os.path.join(pvc_root or os.path.join(tmp, "pvc"),
                                                           claim))
                os.makedirs(self.claims[claim], exist_ok=True)
        self.bin_dir = os.path.join(tmp, "bin")
        self.argv_dir = os.path.join(tmp, "argv")
        os.makedirs(self.bin_dir)
        os.makedirs(self.argv_dir)
        for program, path in BINARIES.items():
            wrapper = os.path.join(self.bin_dir, program)
            extra = ""
            if program in ("sieve-server", "sieve-worker"):  # the test's own: not recorded
                extra = ' "--summary_out=$PWD/summary-{role}-{rank}.json"'  # $PWD: the pod's
            with open(wrapper, "w", encoding="utf-8") as f:
                f.write("#!/bin/sh\n"
                        f"printf '%s\\n' \"$@\" > {shlex.quote(self.argv_dir)}/{program}.$$\n"
                        f"exec {shlex.quote(path)} \"$@\"{extra}\n")
            os.chmod(wrapper, 0o755)

    @staticmethod
    def summary(pod):
        """The end-of-run summary the server or worker of `pod` wrote (in the pod's directory),
        as a dict, or None when it wrote none."""
        paths = glob.glob(os.path.join(pod.dir, f"summary-{pod.role}-*.json"))
        assert len(paths) <= 1, paths
        if not paths:
            return None
        with open(paths[0], encoding="utf-8") as f:
            return json.load(f)

    @staticmethod
    def assertion(ok, message):
        if not ok:
            raise AssertionError(message)

    def pod_addresses(self):
        """'name:port' for every DNS name of every pod and its ports -> 127.0.0.1:local."""
        out = {}
        for pod in self.pods:
            for host in pod.dns:
                for port, local in pod.ports.items():
                    out[f"{host}:{port}"] = f"127.0.0.1:{local}"
        return out

    def mounts(self, pod, container):
        """mountPath -> local directory for one container."""
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        out = {}
        for m in container.get("volumeMounts", []):
            name = m["name"]
            v = volumes[name]
            if "persistentVolumeClaim" in v:
                out[m["mountPath"]] = self.claims[v["persistentVolumeClaim"]["claimName"]]
                continue
            local = os.path.join(pod.dir, "volumes", name)
            if "configMap" in v:
                if not os.path.isdir(local):
                    kp.write_configmap(self.configmaps[v["configMap"]["name"]], local)
            elif "emptyDir" in v:
                os.makedirs(local, exist_ok=True)
            elif "secret" in v:
                secret = v["secret"]["secretName"]
                if secret not in self.secrets:
                    raise AssertionError(f"volume {name}: Secret {secret} was not created")
                local = self.secrets[secret]
            else:
                raise AssertionError(f"volume {name}: only configMap, Secret, PVC and emptyDir "
                                     "here")
            out[m["mountPath"]] = local
        return out

    def localize(self, text, pod, mounts):
        if mounts:  # one pass: a local directory may itself contain a mount path (/tmp)
            alternatives = "|".join(re.escape(p) for p in sorted(mounts, key=len, reverse=True))
            text = re.sub(rf"(?<![\w./-])({alternatives})(?=/|$|[\s\"',:])",
                          lambda m: mounts[m.group(1)], text)
        for addr in sorted(self.addresses, key=len, reverse=True):
            text = re.sub(rf"(?<![\w.-]){re.escape(addr)}(?!\d)", self.addresses[addr], text)
        for port, local in pod.ports.items():
            text = re.sub(rf"(--\w*port)=\"?{port}\"?(?!\d)", rf"\g<1>={local}", text)
        return text

    def localize_configmap_files(self, mounts_of_all):
        """Flagfiles name mount paths of their own; map them like everything else."""
        for mounts, pod in mounts_of_all:
            for local in mounts.values():
                if not local.startswith(os.path.join(pod.dir, "volumes")):
                    continue
                for fname in os.listdir(local):
                    path = os.path.join(local, fname)
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(self.localize(text, pod, mounts))

    def process(self, pod, container):
        """(argv, env, probes) of one container, localized."""
        mounts = self.mounts(pod, container)
        env = kp.container_env(container, pod, "127.0.0.1")
        argv = kp.container_argv(container, env, f"{pod.name}/{container['name']}")
        argv = [self.localize(a, pod, mounts) for a in argv]
        env = {n: self.localize(v, pod, mounts) for n, v in env.items()}
        env["PATH"] = f"{self.bin_dir}:/usr/local/bin:/usr/bin:/bin"
        env["HOME"] = pod.dir
        probes = []
        for kind in ("readinessProbe", "livenessProbe"):
            if kind in container:
                get = container[kind]["httpGet"]
                probes.append((kind, f"http://127.0.0.1:{pod.local_port(get['port'])}"
                                     f"{get['path']}"))
        return argv, env, probes, mounts


def run_pod(cluster, pod, plan, results, probes_ok, stop):
    """Init containers in order, then the container (pods here have one); records exit codes."""
    for name, argv, env, probes in plan:
        log = open(os.path.join(pod.dir, f"{name}.log"), "w", encoding="utf-8")
        proc = subprocess.Popen(argv, env=env, cwd=pod.dir, stdout=log,
                                stderr=subprocess.STDOUT)
        seen = set()
        while proc.poll() is None:
            kp.poll_probes(probes, seen)
            if stop.wait(0.05):
                proc.kill()
        log.close()
        results[(pod.name, name)] = proc.returncode
        probes_ok[(pod.name, name)] = len(seen) == len(probes)
        if proc.returncode != 0:
            stop.set()  # a failed container fails the job: stop the others at once
            return


def helpxml_flags(binary):
    proc = subprocess.run([binary, "--helpxml"], capture_output=True, text=True, timeout=30,
                          check=False)
    root = ET.fromstring(proc.stdout)
    return {f.findtext("name") for f in root.iter("flag")}


def flag_names(args, known_file_reader):
    """Flag names in an argv (and, recursively, in the flagfiles it names)."""
    names = []
    for a in args:
        if not a.startswith("-"):
            continue
        name, _, value = a.lstrip("-").partition("=")
        names.append(name)
        if name == "flagfile":
            for path in value.split(","):
                names += flag_names(k.parse_flagfile(known_file_reader(path)), known_file_reader)
    return names


def read_file(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def flag_values(args, known_file_reader):
    """name -> value of an argv's flags, flagfiles read in place, the last one winning (as
    gflags does)."""
    values = {}
    for a in args:
        if not a.startswith("-"):
            continue
        name, _, value = a.lstrip("-").partition("=")
        if name == "flagfile":
            for path in value.split(","):
                values.update(flag_values(k.parse_flagfile(known_file_reader(path)),
                                          known_file_reader))
        else:
            values[name] = value
    return values


def npy_data(blob):
    """The data bytes of a .npy file of one float32 vector, after checking its header."""
    assert blob[:8] == b"\x93NUMPY\x01\x00", blob[:8]
    length = int.from_bytes(blob[8:10], "little")
    header = blob[10:10 + length].decode("latin-1")
    assert header.startswith("{'descr': '<f4', 'fortran_order': False, 'shape': ("), header
    assert (10 + length) % 64 == 0 and header.endswith("\n"), header
    return blob[10 + length:]


class LocalRunTest(unittest.TestCase):

    def run_overlay(self, overlay, tmp, secrets=None, pvc_root=None):
        """Runs the overlay's pods to the end; returns (cluster, logs) after the common checks.
        The job token Secret <job>-token is made here, as docs/deploy.md says (a random token)."""
        docs = k.render(KUBECTL, f"overlays/{overlay}")
        name = k.one(docs, "NetworkPolicy")["metadata"]["name"]
        secrets = dict(secrets or {})
        token = os.path.join(tmp, "secret-token")
        os.makedirs(token)
        with open(os.path.join(token, "token"), "w", encoding="utf-8") as f:
            f.write(base64.b64encode(os.urandom(32)).decode() + "\n")
        secrets[f"{name}-token"] = token
        cluster = LocalCluster(docs, tmp, secrets, pvc_root)
        plans, all_mounts = {}, []
        for pod in cluster.pods:
            plan = []
            for c in pod.containers():
                argv, env, probes, mounts = cluster.process(pod, c)
                all_mounts.append((mounts, pod))
                plan.append((c["name"], argv, env, probes))
            plans[pod.name] = plan
        self.assertEqual(len(cluster.pods), 1 + 2 + 2)
        cluster.localize_configmap_files(all_mounts)

        results, probes_ok, stop = {}, {}, threading.Event()
        threads = [threading.Thread(target=run_pod,
                                    args=(cluster, p, plans[p.name], results, probes_ok, stop))
                   for p in cluster.pods]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(1.0, JOB_TIMEOUT_S - (time.monotonic() - start)))
        timed_out = any(t.is_alive() for t in threads)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start

        logs = {}
        for pod in cluster.pods:
            for name, argv, _, _ in plans[pod.name]:
                path = os.path.join(pod.dir, f"{name}.log")
                logs[(pod.name, name)] = read_file(path) if os.path.exists(path) else ""
                print(f"=== {pod.name}/{name}: {shlex.join(argv)}")
        print(f"{overlay}: job took {elapsed:.1f} s")

        def dump():
            return "\n".join(f"--- {p}/{c} (rc {results.get((p, c))})\n{text[-3000:]}"
                             for (p, c), text in logs.items())

        self.assertFalse(timed_out, f"job did not end within {JOB_TIMEOUT_S} s\n{dump()}")
        for key in logs:
            self.assertEqual(results.get(key), 0, f"{key} failed\n{dump()}")
            self.assertTrue(probes_ok[key], f"{key}: a probe never answered 200\n{dump()}")
        self.check_trained(cluster, logs)
        return cluster, logs

    def check_trained(self, cluster, logs):
        # Every daemon flag, on the command line or in a flagfile, is one the daemon defines.
        recorded = os.listdir(cluster.argv_dir)
        self.assertEqual(sorted(r.split(".")[0] for r in recorded),
                         ["sieve-scheduler", "sieve-server", "sieve-server", "sieve-worker",
                          "sieve-worker"])
        known = {p: helpxml_flags(b) for p, b in BINARIES.items() if p.startswith("sieve-")}
        for r in recorded:
            program = r.split(".")[0]
            args = read_file(os.path.join(cluster.argv_dir, r)).splitlines()
            for name in flag_names(args, read_file):
                defined = name in known[program] or (
                    name.startswith("no") and name[2:] in known[program])
                self.assertTrue(defined, f"{program}: unknown flag --{name} in {args}")

        workers = [p for p in cluster.pods if p.role == "worker"]
        for w in workers:
            self.assertIsNotNone(cluster.summary(w), w.name)
        sched = next(p for p in cluster.pods if p.role == "scheduler")
        self.assertIn("sieve-scheduler: job finished", logs[(sched.name, "scheduler")])
        servers = [p for p in cluster.pods if p.role == "server"]
        for s in servers:
            summary = cluster.summary(s)
            self.assertIsNotNone(summary, s.name)
            self.assertEqual(summary["rank"], s.index, s.name)
        (claim,) = {c for s in servers for c in s.claims().values()}
        # This run's directory (run-<the JobSet's UID>, or the servers' Job's without a JobSet).
        (run,) = {s.labels.get("jobset.sigs.k8s.io/jobset-uid") or
                  s.labels["batch.kubernetes.io/controller-uid"] for s in servers}
        run_dir = os.path.join(cluster.claims[claim], f"run-{run}")
        files = sorted(os.path.relpath(os.path.join(d, f), run_dir)
                       for d, _, names in os.walk(run_dir) for f in names)
        self.assertEqual(files, sorted([f"server-{s.index}.ckpt" for s in servers] +
                                       [f"shard-{s.index}.f32" for s in servers]))
        self.check_export(cluster, run_dir, servers)

    def check_export(self, cluster, run_dir, servers):
        """`sieve export` of the run's directory, as docs/deploy.md tells an operator to run it
        (the servers' --model, --consistency and --seed, read here from what they were started
        with): the .npy file's values are the servers' final shards in rank order, byte for byte;
        the checkpoints export too (--source=checkpoint), D values; a file of the run cut short
        is refused with exit 1 and nothing written."""
        server_argv = [read_file(os.path.join(cluster.argv_dir, r)).splitlines()
                       for r in os.listdir(cluster.argv_dir) if r.startswith("sieve-server.")]
        (job,) = {tuple(flag_values(a, read_file).get(f, "") for f in ("model", "consistency",
                                                                     "seed"))
                  for a in server_argv}
        model, consistency, seed = job
        flags = [f"--model={model}", f"--consistency={consistency or 'bsp'}",
                 f"--seed={seed or 1}"]
        out = os.path.join(cluster.tmp, "weights.npy")
        proc = subprocess.run([BINARIES["sieve"], "export", f"--from={run_dir}", f"--out={out}"] +
                              flags, capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(f"from the final shards of {len(servers)} servers", proc.stdout)
        with open(out, "rb") as f:
            exported = npy_data(f.read())
        shards = b"".join(read_bytes(os.path.join(run_dir, f"shard-{i}.f32"))
                          for i in range(len(servers)))
        self.assertEqual(exported, shards)
        try:
            import numpy  # pylint: disable=import-outside-toplevel
        except ImportError:
            numpy = None
        if numpy is not None:
            loaded = numpy.load(out)
            self.assertEqual((loaded.dtype.str, loaded.shape), ("<f4", (len(shards) // 4,)))
            self.assertEqual(loaded.tobytes(), shards)

        raw = os.path.join(cluster.tmp, "checkpoint.f32")
        proc = subprocess.run([BINARIES["sieve"], "export", f"--from={run_dir}", f"--out={raw}",
                               "--source=checkpoint"] + flags,
                              capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("from the checkpoints, round", proc.stdout)
        self.assertEqual(os.path.getsize(raw), len(shards))

        # A copy of the run with its last shard cut short: refused, nothing written.
        cut = os.path.join(cluster.tmp, "cut-run")
        os.makedirs(cut)
        for name in os.listdir(run_dir):
            data = read_bytes(os.path.join(run_dir, name))
            if name == f"shard-{len(servers) - 1}.f32":
                data = data[:-4]
            with open(os.path.join(cut, name), "wb") as f:
                f.write(data)
        refused = os.path.join(cluster.tmp, "refused.npy")
        proc = subprocess.run([BINARIES["sieve"], "export", f"--from={cut}", f"--out={refused}"] +
                              flags, capture_output=True, text=True, timeout=60, check=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("truncated", proc.stderr)
        self.assertFalse(os.path.exists(refused))

    def test_cpu_small_trains_to_completion(self):
        with tempfile.TemporaryDirectory(prefix="sieve-deploy-") as tmp:
            self.run_overlay("cpu-small", tmp)

    def test_a_job_applied_again_does_not_restore_the_last_runs_checkpoints(self):
        """cpu-small run twice under the same name on the same checkpoint volume (what `kubectl
        delete` and `apply` again do: a new JobSet, a new UID): the second run's servers restore
        nothing (the summary's restored_round=-1; with one directory for every run they restored
        the first run's last checkpoint), and each run's checkpoints sit in a directory of its
        own."""
        with tempfile.TemporaryDirectory(prefix="sieve-deploy-") as tmp:
            pvc = os.path.join(tmp, "pvc")
            first, _ = self.run_overlay("cpu-small", os.path.join(tmp, "1"), pvc_root=pvc)
            second, _ = self.run_overlay("cpu-small", os.path.join(tmp, "2"), pvc_root=pvc)
            for s in (p for p in second.pods if p.role == "server"):
                self.assertEqual(second.summary(s)["restored_round"], -1, s.name)
            (claim,) = set(first.claims.values())
            self.assertEqual(set(second.claims.values()), {claim})
            runs = sorted(os.listdir(claim))
            self.assertEqual(len(runs), 2, runs)
            self.assertTrue(all(r.startswith("run-") for r in runs), runs)

    def test_cpu_small_plain_trains_to_completion(self):
        """The plain-Kubernetes variant: indexed Jobs and a headless Service."""
        with tempfile.TemporaryDirectory(prefix="sieve-deploy-") as tmp:
            self.run_overlay("cpu-small-plain", tmp)

    def test_cpu_secure_trains_with_a_key_per_node_and_a_job_token(self):
        """cpu-small with the curve component (and the job token every overlay has): the Secrets
        are what the docs tell a user to create (`sieve keygen --per_role`, a random token),
        each pod mounts only its role's keys, and the job trains with every connection
        authenticated."""
        with tempfile.TemporaryDirectory(prefix="sieve-deploy-") as tmp:
            keys = os.path.join(tmp, "keys")
            subprocess.run([BINARIES["sieve"], "keygen", f"--out={keys}", "--servers=2",
                            "--workers=2", "--per_role"], check=True, timeout=60)
            secrets = {f"cpu-secure-curve-{r}": os.path.join(keys, r)
                       for r in ("scheduler", "servers", "workers")}
            cluster, _ = self.run_overlay("cpu-secure", tmp, secrets)
            for s in (p for p in cluster.pods if p.role == "server"):
                summary = cluster.summary(s)
                # The scheduler and both workers connected, each through a CURVE handshake with
                # an allow-listed key; nothing was refused, nothing came from another job.
                self.assertIn(summary["auth_accepted"], range(3, 10), s.name)
                for counter in ("auth_denied", "foreign", "impostors"):
                    self.assertEqual(summary[counter], 0, f"{s.name}: {counter}")


if __name__ == "__main__":
    KUBECTL = sys.argv.pop(1)
    for program in ("sieve-scheduler", "sieve-server", "sieve-worker", "sieve"):
        BINARIES[program] = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
