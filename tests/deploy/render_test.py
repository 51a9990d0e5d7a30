"""DeployKustomizeRender: every overlay renders offline with `kubectl kustomize`, and the rendered
objects describe one training job that ends, named and sized by its job.yaml:

- names: every object is <name> or <name>-<what>, carries app.kubernetes.io/instance=<name>, and
  a second job rendered with another name shares no object name and no DNS name with it;
- pods (as the JobSet or Job controller makes them, tests/deploy/k8s_pods.py): 1 scheduler, S
  servers, W workers, Indexed; each server's and worker's --rank and SIEVE_RANK are its index;
  the scheduler's --num_servers/--num_workers (command line and flag files) equal S and W, and
  so does every pod's SIEVE_NUM_*: a rendering where they differ fails here;
- DNS: every server and worker finds the scheduler at a DNS name the rendering publishes for the
  scheduler's pod, on its zmq port;
- the JobSet's success policy (all workers), failure policy, pod failure policies, restarts;
- security: every pod mounts the <name>-token Secret where --job_token_file points; a
  NetworkPolicy selects exactly the job's pods and admits only them (and the metrics port from
  the scraper namespaces); CURVE overlays mount <name>-curve-<role>; no PodDisruptionBudget that
  could hold a drain for ever;
- the worker env contract (SIEVE_SCHEDULER, SIEVE_RANK, SIEVE_NUM_*, SIEVE_BIND, SIEVE_HOST,
  SIEVE_JOB_TOKEN_FILE, SIEVE_METRICS_PORT, SIEVE_CURVE_* with CURVE) agrees with the flags;
- probes on /healthz, resources, the recommended labels, locked-down security contexts; GPUs,
  cnn_large and --device=cuda only in the GPU overlays; the plain variant runs the same
  containers as the JobSet.

usage: render_test.py KUBECTL
"""

import copy
import os
import sys
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


def selects(selector, labels):
    return all(labels.get(a) == b for a, b in selector.items())


class RenderTest(unittest.TestCase):

    def check_overlay(self, overlay):
        docs = k.render(KUBECTL, f"overlays/{overlay}")
        knobs = k.knobs_of(f"overlays/{overlay.removesuffix('-plain')}")
        name = knobs["name"]
        plain = overlay.endswith("-plain")
        gpu = overlay.endswith("-gpu")
        curve = gpu or overlay == "cpu-secure"
        kinds = sorted(d["kind"] for d in docs)
        want = ["ConfigMap", "NetworkPolicy", "PersistentVolumeClaim", "PodDisruptionBudget"]
        want += ["Job", "Job", "Job", "Service"] if plain else ["JobSet"]
        self.assertEqual(kinds, sorted(want), overlay)

        # Names: everything derives from the job's name.
        for d in docs:
            what = f"{overlay}: {d['kind']} {d['metadata']['name']}"
            self.assertTrue(d["metadata"]["name"] == name
                            or d["metadata"]["name"].startswith(name + "-"), what)
            self.assertEqual(d["metadata"]["labels"][INSTANCE], name, what)

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
            self.assertEqual(env["SIEVE_BIND"], "0.0.0.0", p.name)
            self.assertEqual(env["SIEVE_HOST"], FAKE_IP, p.name)
            self.assertEqual(env["SIEVE_METRICS_PORT"], str(metrics), p.name)
            self.assertEqual(flags["model"], knobs["model"], p.name)
            if p.role == "server":
                self.assertEqual(flags["consistency"], knobs["consistency"], p.name)
                claims = p.claims()
                self.assertEqual(claims, {"checkpoints": f"{name}-checkpoints"}, p.name)
                mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
                # One directory for every attempt, restored by a restarted set's servers.
                self.assertEqual(flags["checkpoint_dir"], mounts["checkpoints"], p.name)
                self.assertEqual(flags["restore"], "always", p.name)
            else:
                self.assertEqual(flags["compressor"], knobs["compressor"], p.name)
                self.assertEqual(flags["device"], "cuda" if gpu else
                                 ("auto" if overlay == "base" else "cpu"), p.name)
            if curve:
                self.assertEqual(env["SIEVE_CURVE_DIR"], flags["curve_dir"], p.name)
                self.assertEqual(env["SIEVE_CURVE_KEY"],
                                 f"{flags['curve_dir']}/{p.role}-{p.index}.key", p.name)
        pvc = k.one(docs, "PersistentVolumeClaim")
        self.assertEqual(pvc["metadata"]["name"], f"{name}-checkpoints")

        # Job semantics.
        if not plain:
            js = k.one(docs, "JobSet", name)
            spec = js["spec"]
            self.assertEqual(spec["successPolicy"], {"operator": "All",
                                                     "targetReplicatedJobs": ["workers"]})
            self.assertGreaterEqual(spec["failurePolicy"]["maxRestarts"], 1)
            self.assertTrue(spec["network"]["enableDNSHostnames"])
            jobs = {rj["name"]: rj["template"]["spec"] for rj in spec["replicatedJobs"]}
        else:
            jobs = {j["metadata"]["name"].removeprefix(name + "-").removesuffix("-0"): j["spec"]
                    for j in k.by_kind(docs, "Job")}
        self.assertEqual(sorted(jobs), ["scheduler", "servers", "workers"], overlay)
        self.assertEqual(jobs["scheduler"]["backoffLimit"], 0)
        for role in ("servers", "workers"):
            spec = jobs[role]
            self.assertGreater(spec["backoffLimit"], 0, f"{role}: a failed pod is replaced")
            rules = spec["podFailurePolicy"]["rules"]
            self.assertIn({"action": "Ignore", "onPodConditions": [
                {"type": "DisruptionTarget", "status": "True"}]}, rules, role)
        for spec in jobs.values():
            self.assertEqual(spec["template"]["spec"]["restartPolicy"], "Never")

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

        # The NetworkPolicy: exactly the job's pods, reachable from exactly them.
        policy = k.one(docs, "NetworkPolicy", name)["spec"]
        self.assertEqual(policy["policyTypes"], ["Ingress"])
        for p in pods:
            self.assertTrue(selects(policy["podSelector"]["matchLabels"], p.labels), p.name)
        own, scrape = policy["ingress"]
        self.assertEqual(own["from"], [{"podSelector": policy["podSelector"]}])
        self.assertNotIn("ports", own)
        self.assertEqual(scrape["from"], [{"namespaceSelector": {"matchLabels": {
            "sieve/metrics-scraper": "true"}}}])
        self.assertEqual(scrape["ports"], [{"protocol": "TCP", "port": 9100}])
        self.assertEqual(policy["podSelector"]["matchLabels"][INSTANCE], name)

        # Disruption budgets: the scheduler's only, and never for a stuck pod.
        pdb = k.one(docs, "PodDisruptionBudget")["spec"]
        self.assertEqual([p.role for p in pods if selects(pdb["selector"]["matchLabels"],
                                                          p.labels)], ["scheduler"])
        self.assertEqual(pdb["unhealthyPodEvictionPolicy"], "AlwaysAllow")

        # Pod templates: labels, security, probes, resources, images, GPUs.
        for p in pods:
            for label in RECOMMENDED:
                self.assertIn(label, p.labels, f"{p.name}: {label}")
            self.assertTrue(p.spec["securityContext"]["runAsNonRoot"], p.name)
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
        self.assertEqual(len(docs), 5)
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
        for n, p in plain.items():
            self.assertEqual(p.dns, jobset[n].dns, n)
            self.assertEqual(p.containers(), jobset[n].containers(), n)
            self.assertEqual(p.spec["subdomain"], "cpu-small")

    def test_knobs_each_set_once(self):
        """One value in job.yaml changes every place that depends on it."""
        docs = k.render_with_knobs(KUBECTL, "cpu-small", name="other", servers=3, workers=5,
                                   model="fnn3", compressor="gaussiank", consistency="ssp")
        self.assertEqual(check_counts(docs), {"scheduler": 1, "server": 3, "worker": 5})
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
                self.assertFalse(selects(policy["ingress"][0]["from"][0]["podSelector"]
                                         ["matchLabels"], p.labels))
            self.assertTrue(all(selects(policy["podSelector"]["matchLabels"], p.labels)
                                for p in mine))
        for docs in (a, b):
            for p in kp.pods(docs):
                if p.role != "scheduler":
                    host, _ = kp.host_port(env_of(p, main_container(p))["SIEVE_SCHEDULER"])
                    self.assertIn(host, dns(kp.pods(docs)))

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

    def test_kueue_label_is_one_line(self):
        """The overlays' commented Kueue line, uncommented, queues the JobSet."""
        with open(os.path.join(k.K8S, "overlays", "cpu-small", "kustomization.yaml"),
                  encoding="utf-8") as f:
            line = next(l for l in f if "kueue.x-k8s.io/queue-name" in l and
                        l.startswith("# labels:"))
        docs = k.render_with_knobs(KUBECTL, "cpu-small", line.removeprefix("# ").strip())
        js = k.one(docs, "JobSet")
        self.assertEqual(js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "user-queue")
        self.assertNotIn("kueue.x-k8s.io/queue-name",
                         k.one(k.render(KUBECTL, "overlays/cpu-small"), "JobSet")["metadata"]
                         ["labels"])


if __name__ == "__main__":
    KUBECTL = sys.argv.pop(1)
    unittest.main(verbosity=2)
