"""DeployKustomizeRender: every overlay renders offline with `kubectl kustomize`, and the rendered
objects describe one training job that ends, named and sized by its job.yaml:

- names: every object is <name> or <name>-<what> (the checkpoint claim checkpoints-<name>, the
  JobSet controller's name for it), carries app.kubernetes.io/instance=<name>, and a second job
  rendered with another name shares no object name and no DNS name with it;
- checkpoints: the servers' checkpoint claim is the JobSet's (a volumeClaimPolicies template
  with whenDeleted: Delete, so that it goes with the job), mounted by the servers only; a claim
  object of the rendering only in the documented variants (components/plain,
  components/checkpoint-pvc); components/retain-checkpoints keeps it (Retain);
- pods (as the JobSet or Job controller makes them, tests/deploy/k8s_pods.py): 1 scheduler, S
  servers, W workers, Indexed; each server's and worker's --rank and SIEVE_RANK are its index;
  the scheduler's --num_servers/--num_workers (command line and flag files) equal S and W, and
  so does every pod's SIEVE_NUM_*: a rendering where they differ fails here;
- DNS: every server and worker finds the scheduler at a DNS name the rendering publishes for the
  scheduler's pod, on its zmq port;
- the JobSet's success policy (all workers), failure policy (a usage error and a deadline fail
  the set), pod failure policies (exit 2 fails the Job, a worker's missing GPU, exit 75, and a
  failure, exit 1, count as retries of their index; a mutated policy must fail the check),
  restarts, its ttlSecondsAfterFinished (the plain Jobs' too);
  retries per index (backoffLimitPerIndex, maxFailedIndexes 0, no Job-wide backoffLimit) on the
  servers' and workers' Jobs; activeDeadlineSeconds = the job's deadline_s on every Job;
- failure timing: the scheduler's --server_restart_timeout_ms is well above the replacement of
  a lost node's pod, the workers' --round_timeout_ms above that, the deadline above both;
  servers restore with --restore=always; the init containers' wait for the scheduler is bounded
  (the rendered script, run here, exits 1 with a message when the bound passes);
- security: every pod mounts the <name>-token Secret where --job_token_file points; a
  NetworkPolicy selects exactly the job's pods, admits only them (and the metrics port from
  the scraper namespaces) and lets them reach only each other and the cluster DNS; CURVE
  overlays mount <name>-curve-<role>; the scheduler's PodDisruptionBudget lets a drain evict
  it; every pod meets the Pod Security Standard "restricted" (checked field by field, with
  violations that must be caught) with seccomp RuntimeDefault and no service account token;
- the flags ConfigMap is immutable; every object carries the recommended labels, component
  included; python-cpu's worker image is moved by an overlay's `images:` entry; a job of 256
  workers renders with every name and label value within 63 characters;
- the worker env contract (SIEVE_SCHEDULER, SIEVE_RANK, SIEVE_NUM_*, SIEVE_BIND, SIEVE_HOST,
  SIEVE_JOB_TOKEN_FILE, SIEVE_METRICS_PORT, SIEVE_CURVE_* with CURVE) agrees with the flags;
- probes on /healthz, resources, the recommended labels, locked-down security contexts; GPUs,
  cnn_large and --device=cuda only in the GPU overlays; the plain variant runs the same
  containers as the JobSet.

usage: render_test.py KUBECTL
"""

import copy
import functools
import os
import socket
import subprocess
import sys
import time
import unittest

import k8s_pods as kp
import k8s_render as k

KUBECTL = None
RECOMMENDED = ("app.kubernetes.io/name", "app.kubernetes.io/instance",
               "app.kubernetes.io/component", "app.kubernetes.io/part-of",
               "app.kubernetes.io/managed-by", "app.kubernetes.io/version")
INSTANCE = "app.kubernetes.io/instance"
CONTRACT = ("SIEVE_SCHEDULER", "SIEVE_RANK", "SIEVE_NUM_WORKERS", "SIEVE_NUM_SERVERS",
            "SIEVE_BIND", "SIEVE_HOST", "SIEVE_JOB_TOKEN_FILE", "SIEVE_METRICS_PORT")
FAKE_IP = "10.1.2.3"
# The component label of the objects that are not one role's.
COMPONENT = {"ConfigMap": "config", "NetworkPolicy": "network-policy", "JobSet": "job",
             "Service": "dns", "PersistentVolumeClaim": "server",
             "PodDisruptionBudget": "scheduler"}
# What replacing a server pod whose node was lost takes with Kubernetes' defaults, at most: the
# node declared unreachable (node-monitor-grace-period, 40 s, 50 s in newer releases), the
# pod's default toleration of that taint (300 s), then its removal, scheduling, image pull, start
# and restore (2 min allowed here). The scheduler's wait must be well above it.
LOST_NODE_REPLACEMENT_S = 50 + 300 + 120
RETRIES_PER_INDEX = 3
TTL_AFTER_FINISHED_S = 7 * 24 * 3600
INIT_WAIT_S = 600
# Pod Security Standard "restricted" (and "baseline", which it includes): the volume types it
# allows, the capability a container may add, the seccomp profiles it allows.
PSS_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
               "persistentVolumeClaim", "projected", "secret"}
PSS_SECCOMP = {"RuntimeDefault", "Localhost"}
PSS_SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                    "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                    "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}


def main_container(pod):
    return pod.spec["containers"][0]


def env_of(pod, container):
    return kp.container_env(container, pod, FAKE_IP)


def flags_of(pod, container, docs):
    """The daemon's flags as gflags sees them: command line and flag files (from the mounted
    ConfigMap), in order; name -> last value."""
    env = env_of(pod, container)
    argv = kp.container_argv(container, env, pod.name)
    volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
    files = {}
    for m in container.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "configMap" in v:
            cm = k.one(docs, "ConfigMap", v["configMap"]["name"])
            for key, text in cm["data"].items():
                files[f"{m['mountPath']}/{key}"] = text
    out = {}

    def visit(args):
        for a in args:
            if not a.startswith("--"):
                continue
            name, _, value = a[2:].partition("=")
            if name == "flagfile":
                if value not in files:
                    raise AssertionError(f"{pod.name}: flag file {value} is not mounted")
                visit(k.parse_flagfile(files[value]))
            else:
                out[name] = value
    visit(argv[1:])
    return out


def check_counts(docs):
    """The scheduler waits for as many servers and workers as the rendering starts, and every
    pod says so in its SIEVE_NUM_* env; raises AssertionError otherwise."""
    pods = kp.pods(docs)
    count = {role: sum(p.role == role for p in pods) for role in ("scheduler", "server", "worker")}
    if count["scheduler"] != 1:
        raise AssertionError(f"{count['scheduler']} scheduler pods")
    sched = next(p for p in pods if p.role == "scheduler")
    flags = flags_of(sched, main_container(sched), docs)
    for flag, role in (("num_servers", "server"), ("num_workers", "worker")):
        if flags.get(flag) != str(count[role]):
            raise AssertionError(f"the scheduler expects --{flag}={flags.get(flag)}, the "
                                 f"rendering starts {count[role]} {role} pods")
    for p in pods:
        env = env_of(p, main_container(p))
        for var, role in (("SIEVE_NUM_SERVERS", "server"), ("SIEVE_NUM_WORKERS", "worker")):
            if env.get(var) != str(count[role]):
                raise AssertionError(f"{p.name}: {var}={env.get(var)}, {count[role]} started")
    return count


CHECKPOINT_CLAIM = "checkpoints"  # the claim template's name, the servers' volume's name
CHECKPOINT_MOUNT = "/var/lib/sieve/checkpoints"


def checkpoint_problems(docs, name, when_deleted="Delete", standalone=False,
                        template_spec=None):
    """What is wrong with the servers' checkpoint volume of a rendering of job `name`: [] when
    every server pod (as the controllers make it, with the volumes the JobSet controller adds)
    mounts the claim checkpoints-<name> at CHECKPOINT_MOUNT and no other pod mounts a claim, and
    - with a JobSet (standalone False): the claim is the JobSet's, its one volumeClaimPolicies
      template, with the recommended labels and `retentionPolicy.whenDeleted` written out as
      `when_deleted` (the controller makes the JobSet the claim's owner only for an explicit
      Delete), and no PersistentVolumeClaim object is rendered;
    - standalone (components/plain, components/checkpoint-pvc): no volumeClaimPolicies, one
      PersistentVolumeClaim checkpoints-<name> of the rendering, owned by nothing (no static
      owner reference can name an owner's UID), whose spec is `template_spec` when given."""
    out = []
    claim = kp.claim_name(CHECKPOINT_CLAIM, name)
    try:
        pods = kp.pods(docs)
    except AssertionError as e:  # what the JobSet webhook refuses
        return [str(e)]
    for p in pods:
        want = {CHECKPOINT_CLAIM: claim} if p.role == "server" else {}
        if p.claims() != want:
            out.append(f"{p.name}: claims {p.claims()}, not {want}")
        if p.role == "server":
            mounts = {m["name"]: m["mountPath"] for m in main_container(p)["volumeMounts"]}
            if mounts.get(CHECKPOINT_CLAIM) != CHECKPOINT_MOUNT:
                out.append(f"{p.name}: {CHECKPOINT_CLAIM} mounted at "
                           f"{mounts.get(CHECKPOINT_CLAIM)}")
    pvcs = k.by_kind(docs, "PersistentVolumeClaim")
    policies = [js["spec"].get("volumeClaimPolicies") for js in k.by_kind(docs, "JobSet")]
    if not standalone:
        if pvcs:
            out.append(f"claim objects in the rendering: {[d['metadata']['name'] for d in pvcs]}")
        if len(policies) != 1 or not policies[0] or len(policies[0]) != 1:
            return out + [f"not one volumeClaimPolicy: {policies}"]
        (policy,) = policies[0]
        templates = policy.get("templates", [])
        if [t["metadata"]["name"] for t in templates] != [CHECKPOINT_CLAIM]:
            out.append(f"claim templates {[t['metadata']['name'] for t in templates]}")
        for t in templates:
            labels = t["metadata"].get("labels", {})
            want = {"app.kubernetes.io/name": "sieve", INSTANCE: name,
                    "app.kubernetes.io/component": "server", "app.kubernetes.io/part-of": "sieve",
                    "app.kubernetes.io/managed-by": "kustomize",
                    "app.kubernetes.io/version": "0.1.0"}
            if {key: labels.get(key) for key in RECOMMENDED} != want:
                out.append(f"claim template labels {labels}")
            if "namespace" in t["metadata"]:
                out.append("a namespace in the claim template")
        if policy.get("retentionPolicy") != {"whenDeleted": when_deleted}:
            out.append(f"retentionPolicy {policy.get('retentionPolicy')}, not whenDeleted: "
                       f"{when_deleted} written out")
        return out
    if any(p is not None for p in policies):
        out.append(f"volumeClaimPolicies beside the claim object: {policies}")
    if [d["metadata"]["name"] for d in pvcs] != [claim]:
        return out + [f"claim objects {[d['metadata']['name'] for d in pvcs]}, not [{claim}]"]
    (pvc,) = pvcs
    if pvc["metadata"].get("ownerReferences"):
        out.append("a static owner reference")
    if template_spec is not None and pvc["spec"] != template_spec:
        out.append(f"claim spec {pvc['spec']}, not the template's {template_spec}")
    return out


def selects(selector, labels):
    return all(labels.get(a) == b for a, b in selector.items())


def restricted_violations(spec):
    """What the Pod Security Standard "restricted" (baseline included) rejects in a pod spec, and
    a service account token mounted: [] for a compliant pod."""
    out = []
    pod_ctx = spec.get("securityContext", {})
    if spec.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken is not false")
    for host in ("hostNetwork", "hostPID", "hostIPC", "hostUsers"):
        if spec.get(host) is (host != "hostUsers"):
            out.append(f"{host}")
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= PSS_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds - PSS_VOLUMES)}")
    for sysctl in pod_ctx.get("sysctls", []):
        if sysctl["name"] not in PSS_SAFE_SYSCTLS:
            out.append(f"sysctl {sysctl['name']}")
    if pod_ctx.get("runAsUser") == 0:
        out.append("pod runAsUser 0")
    containers = (spec.get("initContainers", []) + spec.get("containers", []) +
                  spec.get("ephemeralContainers", []))
    for c in containers:
        ctx = c.get("securityContext", {})
        what = f"container {c['name']}"
        if ctx.get("privileged"):
            out.append(f"{what}: privileged")
        if ctx.get("allowPrivilegeEscalation") is not False:
            out.append(f"{what}: allowPrivilegeEscalation is not false")
        caps = ctx.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            out.append(f"{what}: capabilities not dropped (drop: [ALL])")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{what}: capabilities added {caps['add']}")
        non_root = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
        if ctx.get("runAsNonRoot") is False or non_root is not True:
            out.append(f"{what}: runAsNonRoot is not true")
        if ctx.get("runAsUser") == 0:
            out.append(f"{what}: runAsUser 0")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {})).get("type")
        if seccomp not in PSS_SECCOMP:
            out.append(f"{what}: seccompProfile {seccomp}")
        if ctx.get("procMount", "Default") != "Default":
            out.append(f"{what}: procMount")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"{what}: hostPort")
        for app_armor in (ctx.get("appArmorProfile"), pod_ctx.get("appArmorProfile")):
            if app_armor and app_armor.get("type") == "Unconfined":
                out.append(f"{what}: AppArmor unconfined")
    return out


def pdb_allowed_disruptions(pdb, healthy):
    """How many of `healthy` (all the pods it selects, all ready) a PodDisruptionBudget lets an
    eviction take now, as the disruption controller computes it."""
    def value(v):
        if isinstance(v, str) and v.endswith("%"):
            return -(-int(v[:-1]) * healthy // 100)  # rounded up, as the controller does
        return int(v)
    spec = pdb["spec"]
    if "maxUnavailable" in spec:  # none unavailable now
        return max(0, value(spec["maxUnavailable"]))
    return max(0, healthy - value(spec.get("minAvailable", 1)))


@functools.lru_cache(maxsize=None)
def _init_wait_command():
    docs = k.render(KUBECTL, "jobset")
    servers = next(rj for rj in k.one(docs, "JobSet")["spec"]["replicatedJobs"]
                   if rj["name"] == "servers")
    return tuple(k.pod_spec(servers["template"])["initContainers"][0]["command"])


def init_wait_command():
    """The wait-for-scheduler init container's command, as jobset.yaml writes it."""
    return list(_init_wait_command())


# sieve-worker's exit status for --device=cuda without a usable GPU (worker/worker_flags.h's
# kExitDeviceUnavailable) and every daemon's usage error (daemon/daemon_main.h's kExitUsage).
EXIT_DEVICE_UNAVAILABLE = 75
EXIT_USAGE = 2


def pod_failure_action(rules, exit_code):
    """What a Job's podFailurePolicy does with a pod whose container exited `exit_code` (and no
    DisruptionTarget condition), as the Job controller decides it: the first rule whose
    onExitCodes matches, else Count (the pod counts against its backoff limit)."""
    for rule in rules:
        codes = rule.get("onExitCodes")
        if codes is None:
            continue
        listed = exit_code in codes["values"]
        if listed == (codes["operator"] == "In"):
            return rule["action"]
    return "Count"


def exit_code_violations(rules):
    """Problems of a podFailurePolicy's handling of the daemons' exit codes: a usage error (2)
    must fail the Job at once; a missing GPU (75) must count as one retry of its index, never
    FailJob, and be named by a Count rule of its own; a failure (1) must count too."""
    problems = []
    if pod_failure_action(rules, EXIT_USAGE) != "FailJob":
        problems.append(f"exit {EXIT_USAGE} is not FailJob")
    for code in (EXIT_DEVICE_UNAVAILABLE, 1):
        action = pod_failure_action(rules, code)
        if action != "Count":
            problems.append(f"exit {code} is {action}, not Count")
    for rule in rules:
        codes = rule.get("onExitCodes")
        if rule["action"] == "FailJob" and codes is not None and codes["operator"] == "In" and \
                EXIT_DEVICE_UNAVAILABLE in codes["values"]:
            problems.append(f"exit {EXIT_DEVICE_UNAVAILABLE} is listed in a FailJob rule")
    if not any(r["action"] == "Count" and r.get("onExitCodes", {}).get("operator") == "In" and
               EXIT_DEVICE_UNAVAILABLE in r["onExitCodes"]["values"] for r in rules):
        problems.append(f"no Count rule names exit {EXIT_DEVICE_UNAVAILABLE}")
    return problems


def role_of_job(name):
    """The component of a plain Job named <job>-<replicatedJob>-0."""
    return {"scheduler": "scheduler", "servers": "server", "workers": "worker"}[
        name.rsplit("-", 2)[-2]]


class RenderTest(unittest.TestCase):

    def check_overlay(self, overlay):
        docs = k.render(KUBECTL, f"overlays/{overlay}")
        knobs = k.knobs_of(f"overlays/{overlay.removesuffix('-plain')}")
        name = knobs["name"]
        plain = overlay.endswith("-plain")
        gpu = overlay.endswith("-gpu")
        curve = gpu or overlay == "cpu-secure"
        kinds = sorted(d["kind"] for d in docs)
        want = ["ConfigMap", "NetworkPolicy", "PodDisruptionBudget"]
        # The checkpoint claim is the JobSet's (volumeClaimPolicies); only without a JobSet is
        # it an object of the rendering.
        want += ["Job", "Job", "Job", "Service", "PersistentVolumeClaim"] if plain else [
            "JobSet"]
        self.assertEqual(kinds, sorted(want), overlay)

        # Names: everything derives from the job's name. Labels: the recommended ones on every
        # object, its component included.
        for d in docs:
            what = f"{overlay}: {d['kind']} {d['metadata']['name']}"
            self.assertTrue(d["metadata"]["name"] == name
                            or d["metadata"]["name"].startswith(name + "-")
                            or (d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"]
                                == kp.claim_name(CHECKPOINT_CLAIM, name)), what)
            labels = d["metadata"]["labels"]
            component = (role_of_job(d["metadata"]["name"]) if d["kind"] == "Job"
                         else COMPONENT[d["kind"]])
            self.assertEqual({key: labels.get(key) for key in RECOMMENDED}, {
                "app.kubernetes.io/name": "sieve", INSTANCE: name,
                "app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "sieve",
                "app.kubernetes.io/managed-by": "kustomize",
                "app.kubernetes.io/version": "0.1.0"}, what)

        # The flags cannot change under a running job.
        self.assertIs(k.one(docs, "ConfigMap")["immutable"], True, overlay)

        # Pods, counts, ranks.
        count = check_counts(docs)
        self.assertEqual(count["server"], int(knobs["servers"]), overlay)
        self.assertEqual(count["worker"], int(knobs["workers"]), overlay)
        pods = kp.pods(docs)
        sched = next(p for p in pods if p.role == "scheduler")
        self.assertTrue(sched.dns, f"{overlay}: the scheduler's pod has no DNS name")
        sched_port = {p["name"]: p["containerPort"] for p in main_container(sched)["ports"]}["zmq"]
        for p in pods:
            self.assertEqual(p.instance, name, p.name)
            # The pod's name is its hostname and 6 random characters: an RFC 1035 label.
            self.assertLessEqual(len(p.hostname) + 6, 63, p.hostname)
            self.assertRegex(p.hostname, r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
            c = main_container(p)
            env, flags = env_of(p, c), flags_of(p, c, docs)
            self.assertEqual(flags["bind"], "0.0.0.0", p.name)
            self.assertEqual(flags["host"], FAKE_IP, p.name)
            self.assertEqual(flags["job_token_file"], env["SIEVE_JOB_TOKEN_FILE"], p.name)
            metrics = {q["name"]: q["containerPort"] for q in c["ports"]}["metrics"]
            self.assertEqual(flags["metrics_port"], str(metrics), p.name)
            if p.role == "scheduler":
                continue
            for var in CONTRACT:
                self.assertIn(var, env, f"{p.name}: {var}")
            self.assertEqual(flags["rank"], str(p.index), p.name)
            self.assertEqual(env["SIEVE_RANK"], str(p.index), p.name)
            self.assertEqual(flags["scheduler"], env["SIEVE_SCHEDULER"], p.name)
            host, port = kp.host_port(env["SIEVE_SCHEDULER"])
            self.assertIn(host, sched.dns, p.name)
            self.assertEqual(port, sched_port, p.name)
            init = {i["name"]: i for i in p.spec.get("initContainers", [])}["wait-for-scheduler"]
            self.assertEqual(env_of(p, init)["SIEVE_SCHEDULER"], env["SIEVE_SCHEDULER"], p.name)
            # Bounded: the script test_init_wait_is_bounded runs, in every pod, the bound its
            # env's WAIT_TIMEOUT_S.
            self.assertEqual(init["command"], init_wait_command(), p.name)
            self.assertEqual(env_of(p, init)["WAIT_TIMEOUT_S"], str(INIT_WAIT_S), p.name)
            self.assertEqual(env["SIEVE_BIND"], "0.0.0.0", p.name)
            self.assertEqual(env["SIEVE_HOST"], FAKE_IP, p.name)
            self.assertEqual(env["SIEVE_METRICS_PORT"], str(metrics), p.name)
            self.assertEqual(flags["model"], knobs["model"], p.name)
            if p.role == "server":
                self.assertEqual(flags["consistency"], knobs["consistency"], p.name)
                claims = p.claims()
                self.assertEqual(claims, {CHECKPOINT_CLAIM: kp.claim_name(CHECKPOINT_CLAIM, name)},
                                 p.name)
                mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
                # One directory per run, for every attempt of it (restored by a restarted set's
                # servers): the JobSet's UID, or without a JobSet the servers' Job's UID; a job
                # applied again (a new UID) does not find the last run's checkpoints.
                run = p.labels.get("jobset.sigs.k8s.io/jobset-uid") or p.labels[
                    "batch.kubernetes.io/controller-uid"]
                self.assertTrue(run, p.name)
                self.assertEqual(flags["checkpoint_dir"], f"{mounts['checkpoints']}/run-{run}",
                                 p.name)
                self.assertEqual(flags["dump_shard"],
                                 f"{mounts['checkpoints']}/run-{run}/shard-{{rank}}.f32", p.name)
                # A replaced server and a restarted set's servers both restore (`auto`, the
                # daemon's default, would restore only in the former).
                self.assertEqual(flags["restore"], "always", p.name)
            else:
                self.assertEqual(flags["compressor"], knobs["compressor"], p.name)
                self.assertEqual(flags["device"], "cuda" if gpu else
                                 ("auto" if overlay == "base" else "cpu"), p.name)
            if curve:
                self.assertEqual(env["SIEVE_CURVE_DIR"], flags["curve_dir"], p.name)
                self.assertEqual(env["SIEVE_CURVE_KEY"],
                                 f"{flags['curve_dir']}/{p.role}-{p.index}.key", p.name)
        self.assertEqual(checkpoint_problems(docs, name, standalone=plain), [], overlay)

        # Job semantics.
        if not plain:
            js = k.one(docs, "JobSet", name)
            spec = js["spec"]
            # Every replicated job (no targets): the servers' Jobs complete (their final shards
            # written) before the set succeeds and the controller deletes what is still active.
            self.assertEqual(spec["successPolicy"], {"operator": "All"})
            self.assertGreaterEqual(spec["failurePolicy"]["maxRestarts"], 1)
            # A usage error and a Job past its deadline fail the set; anything else restarts it.
            self.assertEqual(spec["failurePolicy"]["rules"], [
                {"name": "usageError", "action": "FailJobSet",
                 "onJobFailureReasons": ["PodFailurePolicy"]},
                {"name": "deadlineExceeded", "action": "FailJobSet",
                 "onJobFailureReasons": ["DeadlineExceeded"]}])
            self.assertTrue(spec["network"]["enableDNSHostnames"])
            self.assertEqual(spec["ttlSecondsAfterFinished"], TTL_AFTER_FINISHED_S)
            jobs = {rj["name"]: rj["template"]["spec"] for rj in spec["replicatedJobs"]}
        else:
            jobs = {j["metadata"]["name"].removeprefix(name + "-").removesuffix("-0"): j["spec"]
                    for j in k.by_kind(docs, "Job")}
            for spec in jobs.values():
                self.assertEqual(spec["ttlSecondsAfterFinished"], TTL_AFTER_FINISHED_S)
        self.assertEqual(sorted(jobs), ["scheduler", "servers", "workers"], overlay)
        self.assertEqual(jobs["scheduler"]["backoffLimit"], 0)
        self.assertNotIn("backoffLimitPerIndex", jobs["scheduler"])
        # The scheduler's usage error (2) fails its Job by the pod failure policy, which the
        # JobSet's usageError rule turns into the set's failure, instead of a set restart; any
        # other exit fails the Job by its backoff limit of 0 (a restart from the checkpoints).
        scheduler_rules = jobs["scheduler"]["podFailurePolicy"]["rules"]
        self.assertEqual(pod_failure_action(scheduler_rules, EXIT_USAGE), "FailJob", overlay)
        for code in (1, EXIT_DEVICE_UNAVAILABLE, 137):
            self.assertEqual(pod_failure_action(scheduler_rules, code), "Count", overlay)
        self.assertFalse(any("onPodConditions" in r for r in scheduler_rules), overlay)
        for role in ("servers", "workers"):
            spec = jobs[role]
            # Retries per index: every rank has its own, however many there are; an index out
            # of them fails the Job at once; no Job-wide limit shared by all the indexes (it
            # defaults to the largest int32 with backoffLimitPerIndex).
            self.assertEqual(spec["completionMode"], "Indexed", role)
            self.assertEqual(spec["backoffLimitPerIndex"], RETRIES_PER_INDEX, role)
            self.assertEqual(spec["maxFailedIndexes"], 0, role)
            self.assertNotIn("backoffLimit", spec, role)
            rules = spec["podFailurePolicy"]["rules"]
            self.assertIn({"action": "Ignore", "onPodConditions": [
                {"type": "DisruptionTarget", "status": "True"}]}, rules, role)
            # Exit 2 (a usage error) fails the Job; exit 75 (a worker's missing GPU) and 1 (a
            # failure) are retried under their index.
            self.assertEqual(exit_code_violations(rules), [], f"{overlay} {role}")
            self.assertIn(EXIT_USAGE, next(r for r in rules if r["action"] == "FailJob")
                          ["onExitCodes"]["values"], f"{overlay} {role}")
        for spec in jobs.values():
            self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")
            # Nothing runs for ever: the job's deadline_s knob on every Job.
            self.assertEqual(spec["activeDeadlineSeconds"], int(knobs["deadline_s"]), overlay)

        # Failure timing: a lost server's replacement is waited for (not the set restarted),
        # the workers wait as long as the scheduler does, and the deadline is longer still.
        sched_flags = flags_of(sched, main_container(sched), docs)
        restart_ms = int(sched_flags["server_restart_timeout_ms"])
        self.assertEqual(sched_flags["server_failure"], "wait", overlay)
        self.assertGreaterEqual(restart_ms, 1.5 * LOST_NODE_REPLACEMENT_S * 1000, overlay)
        for p in pods:
            if p.role == "worker":
                self.assertGreater(int(flags_of(p, main_container(p), docs)["round_timeout_ms"]),
                                   restart_ms, p.name)
        self.assertGreater(int(knobs["deadline_s"]) * 1000, 2 * restart_ms, overlay)
        self.assertLess(INIT_WAIT_S, int(knobs["deadline_s"]), overlay)

        # The job token, in every overlay.
        for p in pods:
            c = main_container(p)
            token_file = flags_of(p, c, docs)["job_token_file"]
            secrets = {v["name"]: v["secret"] for v in p.spec["volumes"] if "secret" in v}
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            want = {"job-token": (f"{name}-token", os.path.dirname(token_file))}
            if curve:
                secret_role = {"scheduler": "scheduler", "server": "servers",
                               "worker": "workers"}[p.role]
                want["curve"] = (f"{name}-curve-{secret_role}",
                                 flags_of(p, c, docs)["curve_dir"])
            self.assertEqual(sorted(secrets), sorted(want), p.name)
            for volume, (secret_name, path) in want.items():
                self.assertEqual(secrets[volume]["secretName"], secret_name, p.name)
                self.assertEqual(secrets[volume]["defaultMode"], 0o440, p.name)
                self.assertEqual(mounts[volume]["mountPath"], path, p.name)
                self.assertTrue(mounts[volume]["readOnly"], p.name)
            self.assertEqual(p.spec["securityContext"]["fsGroup"],
                             p.spec["securityContext"]["runAsGroup"], p.name)

        # The NetworkPolicy: exactly the job's pods, reachable from exactly them, reaching
        # exactly them and the cluster DNS.
        policy = k.one(docs, "NetworkPolicy", name)["spec"]
        self.assertEqual(policy["policyTypes"], ["Ingress", "Egress"])
        self.assertEqual(policy["egress"], [
            {"to": [{"podSelector": policy["podSelector"]}]},
            {"to": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "kube-system"}},
                     "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
             "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}])
        for p in pods:
            self.assertTrue(selects(policy["podSelector"]["matchLabels"], p.labels), p.name)
        own, scrape = policy["ingress"]
        self.assertEqual(own["from"], [{"podSelector": policy["podSelector"]}])
        self.assertNotIn("ports", own)
        self.assertEqual(scrape["from"], [{"namespaceSelector": {"matchLabels": {
            "sieve/metrics-scraper": "true"}}}])
        self.assertEqual(scrape["ports"], [{"protocol": "TCP", "port": 9100}])
        self.assertEqual(policy["podSelector"]["matchLabels"][INSTANCE], name)

        # Disruption budgets: the scheduler's only, never for a stuck pod, and a drain may
        # evict the running scheduler (the set then restarts from the checkpoints).
        pdb_doc = k.one(docs, "PodDisruptionBudget")
        pdb = pdb_doc["spec"]
        selected = [p.role for p in pods if selects(pdb["selector"]["matchLabels"], p.labels)]
        self.assertEqual(selected, ["scheduler"])
        self.assertGreaterEqual(pdb_allowed_disruptions(pdb_doc, len(selected)), 1, overlay)
        self.assertEqual(pdb["unhealthyPodEvictionPolicy"], "AlwaysAllow")

        # Pod templates: labels, security, probes, resources, images, GPUs.
        for p in pods:
            for label in RECOMMENDED:
                self.assertIn(label, p.labels, f"{p.name}: {label}")
            self.assertTrue(p.spec["securityContext"]["runAsNonRoot"], p.name)
            # Pod Security Standard "restricted", every container (init containers too).
            self.assertEqual(restricted_violations(p.spec), [], p.name)
            self.assertIs(p.spec["automountServiceAccountToken"], False, p.name)
            self.assertEqual(p.spec["securityContext"]["seccompProfile"],
                             {"type": "RuntimeDefault"}, p.name)
            for c in p.containers():
                ctx = c.get("securityContext", {})
                what = f"{p.name} {c['name']}"
                self.assertEqual(ctx.get("readOnlyRootFilesystem"), True, what)
                self.assertEqual(ctx.get("allowPrivilegeEscalation"), False, what)
                self.assertEqual(ctx.get("capabilities", {}).get("drop"), ["ALL"], what)
            for c in p.spec["containers"]:
                for probe in ("readinessProbe", "livenessProbe"):
                    self.assertEqual(c[probe]["httpGet"]["path"], "/healthz", p.name)
                    ports = {q["name"]: q["containerPort"] for q in c["ports"]}
                    self.assertIn(c[probe]["httpGet"]["port"], ports, p.name)
                res = c["resources"]
                self.assertIn("cpu", res["requests"], p.name)
                self.assertIn("memory", res["limits"], p.name)
                self.assertTrue(c["image"].startswith("ghcr.io/sieve/sieve:"), p.name)
                self.assertEqual(c["image"].endswith("-cuda"), gpu, p.name)
                wants_gpu = "nvidia.com/gpu" in res.get("limits", {})
                self.assertEqual(wants_gpu, gpu and p.role == "worker", p.name)
                if wants_gpu:
                    self.assertIn("nodeSelector", p.spec, p.name)
                    self.assertIn("nvidia.com/gpu", [t["key"] for t in p.spec["tolerations"]])
        if gpu:
            self.assertEqual(knobs["model"], "cnn_large")
        return docs

    def test_jobset_renders(self):
        docs = k.render(KUBECTL, "jobset")
        self.assertEqual(len(docs), 4)
        self.assertEqual(checkpoint_problems(docs, "sieve"), [])
        check_counts(docs)

    def test_bsp_gpu(self):
        self.check_overlay("bsp-gpu")
        self.assertEqual(k.knobs_of("overlays/bsp-gpu")["consistency"], "bsp")

    def test_asp_gpu(self):
        docs = self.check_overlay("asp-gpu")
        self.assertEqual(k.knobs_of("overlays/asp-gpu")["consistency"], "asp")
        server_flags = k.parse_flagfile(k.one(docs, "ConfigMap")["data"]["server.flags"])
        self.assertIsNotNone(k.flag_value(server_flags, "checkpoint_every_s"))

    def test_cpu_small(self):
        self.check_overlay("cpu-small")

    def test_cpu_secure(self):
        # cpu-small, the same job, with the curve component on top.
        docs = self.check_overlay("cpu-secure")
        small = k.render(KUBECTL, "overlays/cpu-small")
        data, small_data = k.one(docs, "ConfigMap")["data"], k.one(small, "ConfigMap")["data"]
        for key in ("model.flags", "scheduler.flags", "server.flags", "worker.flags"):
            self.assertEqual(data[key], small_data[key], key)

    def test_python_cpu(self):
        # The cpu-small job with the worker command replaced by a Python worker that takes
        # exactly sieve-worker's arguments (docs/worker-api.md, "The Python module").
        docs = self.check_overlay("python-cpu")
        small = kp.pods(k.render(KUBECTL, "overlays/cpu-small"))
        worker = main_container(next(p for p in kp.pods(docs) if p.role == "worker"))
        cpp = main_container(next(p for p in small if p.role == "worker"))
        self.assertEqual(worker["command"],
                         ["python3", "/opt/sieve/examples/torch/fashion_mnist.py"])
        self.assertEqual(cpp["command"], ["sieve-worker"])
        self.assertEqual(worker["args"], cpp["args"])
        self.assertEqual(worker["image"], "ghcr.io/sieve/sieve:0.1.0-cpu-python")
        cm = k.one(docs, "ConfigMap")
        self.assertEqual(k.flag_value(k.parse_flagfile(cm["data"]["model.flags"]), "model"),
                         "fnn3")

    def test_plain_runs_the_same_pods(self):
        """cpu-small-plain: indexed Jobs and a headless Service giving the pods the JobSet's
        hostnames and DNS names, with the same containers."""
        docs = self.check_overlay("cpu-small-plain")
        jobset = {p.name: p for p in kp.pods(k.render(KUBECTL, "overlays/cpu-small"))}
        plain = {p.name: p for p in kp.pods(docs)}
        self.assertEqual(sorted(plain), sorted(jobset))
        # The one difference: a server's run id (JOB_RUN) is its Job's UID without a JobSet.
        run_ref = {"jobset": "metadata.labels['jobset.sigs.k8s.io/jobset-uid']",
                   "plain": "metadata.labels['batch.kubernetes.io/controller-uid']"}

        def run_ids(pod):
            return [e["valueFrom"]["fieldRef"]["fieldPath"] for c in pod.containers()
                    for e in c.get("env", []) if e["name"] == "JOB_RUN"]

        def without_run(pod):
            out = copy.deepcopy(pod.containers())
            for c in out:
                c["env"] = [e for e in c.get("env", []) if e["name"] != "JOB_RUN"]
            return out

        for n, p in plain.items():
            self.assertEqual(p.dns, jobset[n].dns, n)
            # The same claim, checkpoints-<job>: the plain variant's own object.
            self.assertEqual(p.claims(), jobset[n].claims(), n)
            self.assertEqual(without_run(p), without_run(jobset[n]), n)
            if p.role == "server":
                self.assertEqual(run_ids(p), [run_ref["plain"]], n)
                self.assertEqual(run_ids(jobset[n]), [run_ref["jobset"]], n)
            self.assertEqual(p.spec["subdomain"], "cpu-small")

    def test_checkpoints_go_with_the_job(self):
        """The servers' checkpoint volume goes with the job: in every overlay with a JobSet it is
        the JobSet's own claim, its volumeClaimPolicies template `checkpoints` with
        `whenDeleted: Delete` written out (the controller then makes the JobSet the claim's
        owner: deleting the JobSet, by its TTL or by hand, deletes the claim), which the JobSet
        controller names checkpoints-<job> and mounts in the servers' pods; no claim object is
        rendered. Only where documented is it an object of the rendering, named the same and
        with the template's spec: components/plain (cpu-small-plain) and components/checkpoint-pvc
        (a JobSet controller older than v0.11.0). components/retain-checkpoints turns Delete into
        Retain and changes nothing else. Each kind of mistake is caught."""
        for overlay in k.OVERLAYS:
            with self.subTest(overlay=overlay):
                docs = k.render(KUBECTL, f"overlays/{overlay}")
                name = k.knobs_of(f"overlays/{overlay.removesuffix('-plain')}")["name"]
                plain = overlay.endswith("-plain")
                spec = None
                if plain:
                    (policy,) = k.one(k.render(KUBECTL, f"overlays/{overlay[:-6]}"),
                                      "JobSet")["spec"]["volumeClaimPolicies"]
                    spec = policy["templates"][0]["spec"]
                self.assertEqual(checkpoint_problems(docs, name, standalone=plain,
                                                     template_spec=spec), [])

        small = k.render(KUBECTL, "overlays/cpu-small")
        (policy,) = k.one(small, "JobSet")["spec"]["volumeClaimPolicies"]
        self.assertEqual(policy["templates"][0]["spec"]["accessModes"], ["ReadWriteMany"])

        def with_components(*extra):
            return k.render_with_knobs(
                KUBECTL, "cpu-small", "components: [../../components/cpu-small, "
                "../../components/job" + "".join(f", ../../components/{c}" for c in extra) + "]")

        kept = with_components("retain-checkpoints")
        self.assertEqual(checkpoint_problems(kept, "cpu-small", when_deleted="Retain"), [])
        self.assertNotEqual(checkpoint_problems(kept, "cpu-small"), [])
        retained = copy.deepcopy(kept)
        k.one(retained, "JobSet")["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] = \
            policy["retentionPolicy"]
        self.assertEqual(retained, small)  # nothing else moved

        older = with_components("checkpoint-pvc")
        self.assertEqual(checkpoint_problems(older, "cpu-small", standalone=True,
                                             template_spec=policy["templates"][0]["spec"]), [])
        self.assertEqual({p.name: p.containers() for p in kp.pods(older)},
                         {p.name: p.containers() for p in kp.pods(small)})
        # Retained, then made an object of the rendering (plain on top of it): one claim.
        both = with_components("retain-checkpoints", "checkpoint-pvc")
        self.assertEqual(checkpoint_problems(both, "cpu-small", standalone=True), [])

        def jobset(d):
            return k.one(d, "JobSet")["spec"]

        def servers_pod(d):
            return jobset(d)["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]

        for what, mutate in (
                ("the policy left to the default", lambda d: jobset(d)["volumeClaimPolicies"][0]
                 .pop("retentionPolicy")),
                ("the claim retained", lambda d: jobset(d)["volumeClaimPolicies"][0]
                 ["retentionPolicy"].__setitem__("whenDeleted", "Retain")),
                ("a claim object beside the template", lambda d: d.append(
                    {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "checkpoints-cpu-small"}, "spec": {}})),
                ("the servers' volume declared too", lambda d: servers_pod(d)["volumes"].append(
                    {"name": "checkpoints",
                     "persistentVolumeClaim": {"claimName": "checkpoints-cpu-small"}})),
                ("a template no container mounts", lambda d: jobset(d)["volumeClaimPolicies"][0]
                 ["templates"][0]["metadata"].__setitem__("name", "ckpt")),
                ("no template", lambda d: jobset(d).pop("volumeClaimPolicies")),
                ("the workers mount it too", lambda d: jobset(d)["replicatedJobs"][2]["template"]
                 ["spec"]["template"]["spec"]["containers"][0]["volumeMounts"].append(
                     {"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT}))):
            with self.subTest(what):
                broken = copy.deepcopy(small)
                mutate(broken)
                self.assertNotEqual(checkpoint_problems(broken, "cpu-small"), [])
        owned = copy.deepcopy(older)
        k.one(owned, "PersistentVolumeClaim")["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "cpu-small-servers-0", "uid": "x"}]
        self.assertNotEqual(checkpoint_problems(owned, "cpu-small", standalone=True), [])

    def test_knobs_each_set_once(self):
        """One value in job.yaml changes every place that depends on it."""
        docs = k.render_with_knobs(KUBECTL, "cpu-small", name="other", servers=3, workers=5,
                                   model="fnn3", compressor="gaussiank", consistency="ssp",
                                   deadline_s=7200)
        self.assertEqual(check_counts(docs), {"scheduler": 1, "server": 3, "worker": 5})
        self.assertEqual([rj["template"]["spec"]["activeDeadlineSeconds"]
                          for rj in k.one(docs, "JobSet")["spec"]["replicatedJobs"]],
                         [7200, 7200, 7200])
        for p in kp.pods(docs):
            flags = flags_of(p, main_container(p), docs)
            self.assertTrue(p.name.startswith("other-"), p.name)
            if p.role == "server":
                self.assertEqual((flags["model"], flags["consistency"]), ("fnn3", "ssp"))
            if p.role == "worker":
                self.assertEqual((flags["model"], flags["compressor"]), ("fnn3", "gaussiank"))
                self.assertEqual(flags["scheduler"], "other-scheduler-0-0.other:9310")

    def test_two_jobs_share_nothing(self):
        """A second job rendered with another name: no object and no DNS name in common, and
        neither NetworkPolicy admits the other job's pods."""
        a = k.render(KUBECTL, "overlays/cpu-small")
        b = k.render_with_knobs(KUBECTL, "cpu-small", name="cpu-small-b")
        ids = lambda docs: {(d["kind"], d["metadata"]["name"]) for d in docs}
        self.assertFalse(ids(a) & ids(b))
        pods_a, pods_b = kp.pods(a), kp.pods(b)
        dns = lambda pods: {n for p in pods for n in p.dns}
        self.assertFalse(dns(pods_a) & dns(pods_b))
        for mine, theirs, docs in ((pods_a, pods_b, a), (pods_b, pods_a, b)):
            policy = k.one(docs, "NetworkPolicy")["spec"]
            for p in theirs:
                self.assertFalse(selects(policy["podSelector"]["matchLabels"], p.labels))
                self.assertFalse(selects(policy["egress"][0]["to"][0]["podSelector"]
                                         ["matchLabels"], p.labels))
                self.assertFalse(selects(policy["ingress"][0]["from"][0]["podSelector"]
                                         ["matchLabels"], p.labels))
            self.assertTrue(all(selects(policy["podSelector"]["matchLabels"], p.labels)
                                for p in mine))
        for docs in (a, b):
            for p in kp.pods(docs):
                if p.role != "scheduler":
                    host, _ = kp.host_port(env_of(p, main_container(p))["SIEVE_SCHEDULER"])
                    self.assertIn(host, dns(kp.pods(docs)))

    def test_restricted_check_catches_violations(self):
        """The Pod Security check above rejects what the "restricted" standard rejects: each
        mutation of a compliant pod is caught."""
        pods = kp.pods(k.render(KUBECTL, "overlays/cpu-secure"))
        server = next(p for p in pods if p.role == "server")
        self.assertEqual(restricted_violations(server.spec), [])

        def init_ctx(spec):
            return spec["initContainers"][0]["securityContext"]

        def main_ctx(spec):
            return spec["containers"][0]["securityContext"]

        for what, mutate in (
                ("no seccomp profile", lambda spec: spec["securityContext"].pop(
                    "seccompProfile")),
                ("seccomp unconfined in a container", lambda spec: main_ctx(spec).__setitem__(
                    "seccompProfile", {"type": "Unconfined"})),
                ("an init container may escalate", lambda spec: init_ctx(spec).__setitem__(
                    "allowPrivilegeEscalation", True)),
                ("an init container keeps its capabilities", lambda spec: init_ctx(spec).pop(
                    "capabilities")),
                ("a capability added", lambda spec: main_ctx(spec)["capabilities"].__setitem__(
                    "add", ["NET_RAW"])),
                ("a container as root", lambda spec: main_ctx(spec).__setitem__(
                    "runAsNonRoot", False)),
                ("runAsNonRoot nowhere", lambda spec: (spec["securityContext"].pop(
                    "runAsNonRoot"), init_ctx(spec).pop("runAsNonRoot"))),
                ("a privileged container", lambda spec: main_ctx(spec).__setitem__(
                    "privileged", True)),
                ("a hostPath volume", lambda spec: spec["volumes"].append(
                    {"name": "host", "hostPath": {"path": "/"}})),
                ("the host network", lambda spec: spec.__setitem__("hostNetwork", True)),
                ("a host port", lambda spec: spec["containers"][0]["ports"][0].__setitem__(
                    "hostPort", 9320)),
                ("a service account token", lambda spec: spec.pop(
                    "automountServiceAccountToken"))):
            with self.subTest(what):
                spec = copy.deepcopy(server.spec)
                mutate(spec)
                self.assertNotEqual(restricted_violations(spec), [], what)

    def test_pdb_check_catches_a_blocking_budget(self):
        """The drain check above fails a budget that holds the scheduler's node."""
        pdb = k.one(k.render(KUBECTL, "overlays/cpu-small"), "PodDisruptionBudget")
        self.assertEqual(pdb_allowed_disruptions(pdb, 1), 1)
        for spec in ({"maxUnavailable": 0}, {"minAvailable": 1}, {"maxUnavailable": "0%"},
                     {"minAvailable": "100%"}):
            blocking = copy.deepcopy(pdb)
            blocking["spec"].pop("maxUnavailable")
            blocking["spec"].update(spec)
            self.assertEqual(pdb_allowed_disruptions(blocking, 1), 0, spec)

    def test_init_wait_is_bounded(self):
        """The rendered wait-for-scheduler script, run here with a 2-s bound: it ends at once
        when the scheduler's port accepts, and otherwise exits 1 after the bound saying why, an
        address that never answers included."""
        pods = kp.pods(k.render(KUBECTL, "overlays/cpu-small"))
        pod = next(p for p in pods if p.role == "worker")
        init = pod.spec["initContainers"][0]
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            closed_port = closed.getsockname()[1]
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen(8)
            open_port = listening.getsockname()[1]
            for address, want_rc in ((f"127.0.0.1:{open_port}", 0),
                                     (f"127.0.0.1:{closed_port}", 1),
                                     ("192.0.2.1:9310", 1)):  # TEST-NET-1: nothing answers
                with self.subTest(address):
                    env = env_of(pod, init)
                    env.update(SIEVE_SCHEDULER=address, WAIT_TIMEOUT_S="2",
                               PATH="/usr/bin:/bin")
                    argv = kp.container_argv(init, env, pod.name)
                    start = time.monotonic()
                    proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                                          timeout=30, check=False)
                    elapsed = time.monotonic() - start
                    self.assertEqual(proc.returncode, want_rc, proc.stderr)
                    if want_rc == 0:
                        self.assertLess(elapsed, 2, proc.stderr)
                        self.assertEqual(proc.stderr, "")
                    else:
                        self.assertGreaterEqual(elapsed, 2)
                        self.assertLess(elapsed, 6)
                        self.assertIn(f"the scheduler at {address} accepted no connection "
                                      "within 2 s", proc.stderr)

    def test_python_cpu_image_follows_images(self):
        """python-cpu's worker image is an `images:` entry of the overlay: changing the entry
        moves it, and only it."""
        def edit(directory):
            path = os.path.join(directory, "kustomization.yaml")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            old = ("  - name: sieve-python\n    newName: ghcr.io/sieve/sieve\n"
                   "    newTag: 0.1.0-cpu-python\n")
            self.assertIn(old, text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, "  - name: sieve-python\n"
                                          "    newName: registry.example/team/sieve\n"
                                          "    newTag: 9.9-py\n"))
        moved = {(p.role, c["name"]): c["image"]
                 for p in kp.pods(k.render_edited(KUBECTL, "python-cpu", edit))
                 for c in p.containers()}
        before = {(p.role, c["name"]): c["image"]
                  for p in kp.pods(k.render(KUBECTL, "overlays/python-cpu"))
                  for c in p.containers()}
        self.assertEqual(before[("worker", "worker")], "ghcr.io/sieve/sieve:0.1.0-cpu-python")
        self.assertEqual(moved[("worker", "worker")], "registry.example/team/sieve:9.9-py")
        del before[("worker", "worker")], moved[("worker", "worker")]
        self.assertEqual(moved, before)
        self.assertEqual(set(moved.values()), {"ghcr.io/sieve/sieve:0.1.0-cpu"})

    def test_256_workers_names_fit(self):
        """A job of 256 workers and 64 servers, named as long as such a job can be (43
        characters): the counts follow, every object name, label value, pod hostname (with the
        pod name's random suffix) and DNS label fits in 63 characters (one character more in the
        name is caught), retries are per index and every Job has the deadline."""
        def problems(docs):
            out = []
            for d in docs:
                meta = d["metadata"]
                if len(meta["name"]) > 63:
                    out.append(f"{d['kind']} {meta['name']}")
                out += [f"{d['kind']} label {v}" for v in meta.get("labels", {}).values()
                        if len(v) > 63]
            for js in k.by_kind(docs, "JobSet"):
                # The claims its controller makes, <template>-<jobset> (its webhook: 63 at most).
                for policy in js["spec"].get("volumeClaimPolicies", []):
                    for t in policy["templates"]:
                        claim = kp.claim_name(t["metadata"]["name"], js["metadata"]["name"])
                        if len(claim) > 63:
                            out.append(f"claim {claim}")
                for rj in js["spec"]["replicatedJobs"]:
                    job = f"{js['metadata']['name']}-{rj['name']}-{rj.get('replicas', 1) - 1}"
                    if len(job) > 63:
                        out.append(f"Job {job}")
            for p in kp.pods(docs):
                if len(p.hostname) + 6 > 63:  # the pod's name: <hostname>-<5 random>
                    out.append(f"pod {p.hostname}")
                out += [f"{p.hostname} label {v}" for v in p.labels.values() if len(v) > 63]
                out += [f"DNS {n}" for n in p.dns for part in n.split(".") if len(part) > 63]
            return out

        name = "j" + "x" * 42
        docs = k.render_with_knobs(KUBECTL, "cpu-small", name=name, servers=64, workers=256)
        self.assertEqual(check_counts(docs), {"scheduler": 1, "server": 64, "worker": 256})
        self.assertEqual(problems(docs), [])
        self.assertTrue(all(len(p.dns) == 4 for p in kp.pods(docs)))
        # At that size too: retries per index (3 for each of the 256 workers, not a Job-wide
        # budget shared by all), and a deadline on every Job.
        deadline = int(k.knobs_of("overlays/cpu-small")["deadline_s"])
        for rj in k.one(docs, "JobSet")["spec"]["replicatedJobs"]:
            spec = rj["template"]["spec"]
            self.assertEqual(spec["activeDeadlineSeconds"], deadline, rj["name"])
            if rj["name"] != "scheduler":
                self.assertEqual((spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]),
                                 (RETRIES_PER_INDEX, 0), rj["name"])
                self.assertNotIn("backoffLimit", spec, rj["name"])
        longer = k.render_with_knobs(KUBECTL, "cpu-small", name=name + "x", servers=64,
                                     workers=256)
        self.assertIn(f"pod {name}x-workers-0-255", problems(longer))

    def test_count_mismatch_fails(self):
        """A rendering whose scheduler expects another worker count than the workers' Job
        starts (a hand-edited parallelism, a hand-written --num_workers) is caught."""
        docs = k.render(KUBECTL, "overlays/cpu-small")
        workers = next(rj for rj in k.one(docs, "JobSet")["spec"]["replicatedJobs"]
                       if rj["name"] == "workers")["template"]["spec"]

        def parallelism_and_completions(d):
            w = next(rj for rj in k.one(d, "JobSet")["spec"]["replicatedJobs"]
                     if rj["name"] == "workers")["template"]["spec"]
            w["parallelism"] = w["completions"] = workers["completions"] + 1

        def parallelism_only(d):
            next(rj for rj in k.one(d, "JobSet")["spec"]["replicatedJobs"]
                 if rj["name"] == "workers")["template"]["spec"]["parallelism"] = 1

        def scheduler_flag(d):
            rj = k.one(d, "JobSet")["spec"]["replicatedJobs"][0]
            rj["template"]["spec"]["template"]["spec"]["containers"][0]["args"].append(
                "--num_workers=7")

        def flag_file(d):
            cm = k.one(d, "ConfigMap")
            cm["data"]["scheduler.flags"] += "--num_servers=1\n"
            # A flag file cannot win over the command line: also drop the command line's.
            rj = k.one(d, "JobSet")["spec"]["replicatedJobs"][0]
            c = rj["template"]["spec"]["template"]["spec"]["containers"][0]
            c["args"] = [a for a in c["args"] if not a.startswith("--num_servers")]

        check_counts(docs)
        for mutate in (parallelism_and_completions, parallelism_only, scheduler_flag, flag_file):
            broken = copy.deepcopy(docs)
            mutate(broken)
            with self.assertRaises(AssertionError, msg=mutate.__name__):
                check_counts(broken)

    def test_exit_code_check_catches_a_fatal_gpu_fault(self):
        """The podFailurePolicy's exit-code check fails where a missing GPU (75) would fail the
        Job, or a usage error (2) would be retried."""
        js = k.one(k.render(KUBECTL, "overlays/bsp-gpu"), "JobSet")
        workers = next(rj for rj in js["spec"]["replicatedJobs"] if rj["name"] == "workers")
        rules = workers["template"]["spec"]["podFailurePolicy"]["rules"]
        self.assertEqual(exit_code_violations(rules), [])

        def fail_job_rule(r):
            return next(x for x in r if x["action"] == "FailJob")

        def tempfail_in_fail_job(r):
            fail_job_rule(r)["onExitCodes"]["values"].append(EXIT_DEVICE_UNAVAILABLE)

        def tempfail_first_in_fail_job(r):
            tempfail_in_fail_job(r)
            r.insert(0, r.pop(r.index(fail_job_rule(r))))

        def no_count_rule(r):
            r[:] = [x for x in r if x["action"] != "Count"]

        def usage_not_fatal(r):
            fail_job_rule(r)["onExitCodes"]["values"] = [3]

        def everything_fatal(r):
            r[:] = [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}]

        for mutate in (tempfail_in_fail_job, tempfail_first_in_fail_job, no_count_rule,
                       usage_not_fatal, everything_fatal):
            broken = copy.deepcopy(rules)
            mutate(broken)
            self.assertNotEqual(exit_code_violations(broken), [], mutate.__name__)

    def test_podmonitor_scrapes_every_pod_of_the_job(self):
        """components/podmonitor, added to an overlay: one PodMonitor named after the job whose
        selector matches every pod of the job (and no pod of another job) on a port every pod's
        daemon container names `metrics`, the port --metrics_port serves."""
        docs = k.render_with_knobs(
            KUBECTL, "cpu-small", "components: [../../components/cpu-small, "
            "../../components/podmonitor, ../../components/job]", name="monitored")
        pm = k.one(docs, "PodMonitor")
        self.assertEqual(pm["metadata"]["name"], "monitored")
        selector = pm["spec"]["selector"]["matchLabels"]
        self.assertEqual(selector["app.kubernetes.io/instance"], "monitored")
        js = k.one(docs, "JobSet")
        for rj in js["spec"]["replicatedJobs"]:
            template = rj["template"]["spec"]["template"]
            labels = template["metadata"]["labels"]
            self.assertTrue(all(labels.get(key) == value for key, value in selector.items()),
                            (rj["name"], labels))
            container = template["spec"]["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            self.assertEqual(ports.get("metrics"), 9100, rj["name"])
            self.assertIn("--metrics_port=9100", container["args"], rj["name"])
        self.assertEqual([e["port"] for e in pm["spec"]["podMetricsEndpoints"]], ["metrics"])
        other = k.one(k.render(KUBECTL, "overlays/cpu-small"), "JobSet")
        other_labels = other["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "metadata"]["labels"]
        self.assertNotEqual(other_labels["app.kubernetes.io/instance"],
                            selector["app.kubernetes.io/instance"])
        # Not in any overlay by default: a cluster without the Prometheus Operator has no CRD.
        for overlay in k.OVERLAYS:
            self.assertEqual(k.by_kind(k.render(KUBECTL, f"overlays/{overlay}"), "PodMonitor"),
                             [], overlay)

    def test_kueue_queues_every_jobset_by_default(self):
        """Every overlay's JobSet carries the Kueue queue label job.yaml's `queue` names (a gang:
        Kueue admits all its pods at once); the knob moves it; components/no-queue removes it."""
        label = "kueue.x-k8s.io/queue-name"
        for overlay in k.OVERLAYS:
            with self.subTest(overlay=overlay):
                js = k.by_kind(k.render(KUBECTL, f"overlays/{overlay}"), "JobSet")
                if not js:  # the plain variant: no JobSet, nothing for Kueue's JobSet gang
                    continue
                self.assertEqual(js[0]["metadata"]["labels"].get(label),
                                 k.knobs_of(f"overlays/{overlay}")["queue"])
        moved = k.one(k.render_with_knobs(KUBECTL, "cpu-small", queue="team-a"), "JobSet")
        self.assertEqual(moved["metadata"]["labels"][label], "team-a")
        out = k.one(k.render_with_knobs(
            KUBECTL, "cpu-small", "components: [../../components/cpu-small, "
            "../../components/job, ../../components/no-queue]"), "JobSet")
        self.assertNotIn(label, out["metadata"]["labels"])
        self.assertEqual(out["metadata"]["labels"]["app.kubernetes.io/component"], "job")

    def test_scheduler_leaves_its_result_as_termination_message(self):
        """In every overlay the scheduler writes how the job ended (--termination_message_file)
        to its container's terminationMessagePath, read as a File (kept in the pod's status after
        it exited), under the job's name (--job_name)."""
        for overlay in k.OVERLAYS:
            with self.subTest(overlay=overlay):
                docs = k.render(KUBECTL, f"overlays/{overlay}")
                name = k.knobs_of(f"overlays/{overlay.removesuffix('-plain')}")["name"]
                (sched,) = [p for p in kp.pods(docs) if p.role == "scheduler"]
                c = main_container(sched)
                flags = flags_of(sched, c, docs)
                self.assertEqual(c["terminationMessagePath"], "/dev/termination-log")
                self.assertEqual(c["terminationMessagePolicy"], "File")
                self.assertEqual(flags["termination_message_file"], c["terminationMessagePath"])
                self.assertEqual(flags["job_name"], name)

    def test_images_pin_by_digest(self):
        """An overlay whose `images:` entries give a digest (what `kustomize edit set image
        sieve=<registry>/sieve@sha256:<digest>` writes where the image is built) runs every
        container, init containers and python-cpu's workers included, by that digest: no
        container is left on a tag that can move under a running job."""
        digest = "sha256:" + "0123456789abcdef" * 4
        py_digest = "sha256:" + "fedcba9876543210" * 4

        def pin(directory):
            path = os.path.join(directory, "kustomization.yaml")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertIn("    newTag: 0.1.0-cpu\n", text)
            text = text.replace("    newTag: 0.1.0-cpu\n", f"    digest: {digest}\n")
            text = text.replace("    newTag: 0.1.0-cpu-python\n", f"    digest: {py_digest}\n")
            self.assertNotIn("newTag", text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        for overlay in ("cpu-small", "python-cpu"):
            with self.subTest(overlay=overlay):
                images = {(p.role, c["name"]): c["image"]
                          for p in kp.pods(k.render_edited(KUBECTL, overlay, pin))
                          for c in p.containers()}
                self.assertEqual(len(images), 1 + 2 * 2)  # scheduler; servers', workers' 2 each
                for (role, container), image in images.items():
                    python_worker = overlay == "python-cpu" and container == "worker"
                    self.assertEqual(image, "ghcr.io/sieve/sieve@" +
                                     (py_digest if python_worker else digest), (role, container))


if __name__ == "__main__":
    KUBECTL = sys.argv.pop(1)
    unittest.main(verbosity=2)
