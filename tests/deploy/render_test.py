"""DeployKustomizeRender: every overlay renders offline with `kubectl kustomize`, and the rendered
objects are consistent with each other: the scheduler waits for as many servers and workers as
the StatefulSet and the Job start, every container has probes on /healthz, resources, the pod IP
from the Downward API and the recommended labels; only the GPU overlays ask for GPUs.

usage: render_test.py KUBECTL
"""

import os
import sys
import unittest

import k8s_render as k

KUBECTL = None
RECOMMENDED = ("app.kubernetes.io/name", "app.kubernetes.io/instance",
               "app.kubernetes.io/component", "app.kubernetes.io/part-of",
               "app.kubernetes.io/managed-by", "app.kubernetes.io/version")


class RenderTest(unittest.TestCase):

    def check_overlay(self, overlay):
        docs = k.render(KUBECTL, f"overlays/{overlay}")
        kinds = sorted(d["kind"] for d in docs)
        self.assertEqual(kinds, ["ConfigMap", "Deployment", "Job", "PodDisruptionBudget",
                                 "Service", "Service", "StatefulSet"])
        cm = k.one(docs, "ConfigMap")
        flags = {key: k.parse_flagfile(text) for key, text in cm["data"].items()}
        sched = k.one(docs, "Deployment", "sieve-scheduler")
        servers = k.one(docs, "StatefulSet", "sieve-server")
        workers = k.one(docs, "Job", "sieve-worker")

        # The scheduler's expected counts match what the workloads start.
        self.assertEqual(sched["spec"]["replicas"], 1)
        self.assertEqual(int(k.flag_value(flags["scheduler.flags"], "num_servers")),
                         servers["spec"]["replicas"])
        self.assertEqual(int(k.flag_value(flags["scheduler.flags"], "num_workers")),
                         workers["spec"]["completions"])
        self.assertEqual(workers["spec"]["parallelism"], workers["spec"]["completions"])
        self.assertEqual(workers["spec"]["completionMode"], "Indexed")
        self.assertEqual(servers["spec"]["podManagementPolicy"], "Parallel")
        self.assertEqual(servers["spec"]["serviceName"], "sieve-server")
        headless = k.one(docs, "Service", "sieve-server")
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertTrue(servers["spec"]["volumeClaimTemplates"])
        # Servers and workers share the model file.
        for role in ("server.flags", "worker.flags"):
            self.assertIn("--flagfile=/etc/sieve/model.flags", flags[role])

        # Every daemon reads security.flags and job.flags. The multi-node overlays (GPU, and
        # cpu-secure) turn CurveZMQ on there and mount their role's Secret (sieve-curve-<role>:
        # no pod holds another role's keys) where --curve_dir points, readable by the pod group;
        # cpu-secure also mounts the sieve-job-token Secret where --job_token_file points.
        curve = overlay.endswith("-gpu") or overlay == "cpu-secure"
        token = overlay == "cpu-secure"
        curve_dir = k.flag_value(flags["security.flags"], "curve_dir")
        self.assertEqual(curve_dir, "/etc/sieve-curve" if curve else None, overlay)
        token_file = k.flag_value(flags["job.flags"], "job_token_file")
        self.assertEqual(token_file, "/etc/sieve-job/token" if token else None, overlay)
        roles = {"sieve-scheduler": "scheduler", "sieve-server": "servers",
                 "sieve-worker": "workers"}
        for w in (sched, servers, workers):
            name = w["metadata"]["name"]
            spec = k.pod_spec(w)
            c = spec["containers"][0]
            text = " ".join(c.get("command", []) + c.get("args", []))
            self.assertIn("--flagfile=/etc/sieve/security.flags", text, name)
            self.assertIn("--flagfile=/etc/sieve/job.flags", text, name)
            secrets = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            want = {}
            if curve:
                want["curve"] = (f"sieve-curve-{roles[name]}", curve_dir)
            if token:
                want["job-token"] = ("sieve-job-token", os.path.dirname(token_file))
            self.assertEqual(sorted(secrets), sorted(want), name)
            for volume, (secret_name, path) in want.items():
                self.assertEqual(secrets[volume]["secretName"], secret_name, name)
                self.assertEqual(secrets[volume]["defaultMode"], 0o440, name)
                self.assertEqual(mounts[volume]["mountPath"], path, name)
                self.assertTrue(mounts[volume]["readOnly"], name)
            if want:
                self.assertEqual(spec["securityContext"]["fsGroup"],
                                 spec["securityContext"]["runAsGroup"], name)
        for w in (sched, servers, workers):
            name = w["metadata"]["name"]
            tmpl_labels = w["spec"]["template"]["metadata"]["labels"]
            for label in RECOMMENDED:
                self.assertIn(label, w["metadata"]["labels"], f"{name}: {label}")
                self.assertIn(label, tmpl_labels, f"{name} pod template: {label}")
            spec = k.pod_spec(w)
            self.assertTrue(spec["securityContext"]["runAsNonRoot"], name)
            # Every container, init containers included, is locked down the same way.
            for c in spec.get("initContainers", []) + spec["containers"]:
                ctx = c.get("securityContext", {})
                self.assertEqual(ctx.get("readOnlyRootFilesystem"), True, f"{name} {c['name']}")
                self.assertEqual(ctx.get("allowPrivilegeEscalation"), False,
                                 f"{name} {c['name']}")
                self.assertEqual(ctx.get("capabilities", {}).get("drop"), ["ALL"],
                                 f"{name} {c['name']}")
            for c in spec["containers"]:
                for probe in ("readinessProbe", "livenessProbe"):
                    self.assertEqual(c[probe]["httpGet"]["path"], "/healthz", f"{name} {probe}")
                    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
                    self.assertIn(c[probe]["httpGet"]["port"], ports, f"{name} {probe} port")
                res = c["resources"]
                self.assertIn("cpu", res["requests"], name)
                self.assertIn("memory", res["limits"], name)
                env = {e["name"]: e for e in c.get("env", [])}
                self.assertEqual(env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"],
                                 "status.podIP", name)
                text = " ".join(c.get("command", []) + c.get("args", []))
                self.assertIn("--bind=0.0.0.0", text, name)
                self.assertIn("--metrics_port=", text, name)
                self.assertTrue(c["image"].startswith("ghcr.io/sieve/sieve:"), name)
                gpu_overlay = overlay.endswith("-gpu")
                self.assertEqual(c["image"].endswith("-cuda"), gpu_overlay, name)
                wants_gpu = "nvidia.com/gpu" in res.get("limits", {})
                self.assertEqual(wants_gpu, gpu_overlay and w is workers, name)
        return docs

    def test_base_renders(self):
        docs = k.render(KUBECTL, "base")
        self.assertEqual(len(docs), 7)

    def test_bsp_gpu(self):
        docs = self.check_overlay("bsp-gpu")
        cm = k.one(docs, "ConfigMap")
        self.assertEqual(k.flag_value(k.parse_flagfile(cm["data"]["server.flags"]),
                                      "consistency"), "bsp")

    def test_asp_gpu(self):
        docs = self.check_overlay("asp-gpu")
        cm = k.one(docs, "ConfigMap")
        self.assertEqual(k.flag_value(k.parse_flagfile(cm["data"]["server.flags"]),
                                      "consistency"), "asp")

    def test_cpu_small(self):
        docs = self.check_overlay("cpu-small")
        cm = k.one(docs, "ConfigMap")
        self.assertEqual(k.flag_value(k.parse_flagfile(cm["data"]["worker.flags"]), "device"),
                         "cpu")
        self.assertNotIn("tolerations", k.pod_spec(k.one(docs, "Job")))

    def test_cpu_secure(self):
        # cpu-small, the same job, with the curve and job-token components on top.
        docs = self.check_overlay("cpu-secure")
        small = k.render(KUBECTL, "overlays/cpu-small")
        for kind in ("StatefulSet", "Job", "Deployment"):
            a, b = k.pod_spec(k.one(docs, kind)), k.pod_spec(k.one(small, kind))
            self.assertEqual(a["containers"][0]["args"], b["containers"][0]["args"], kind)
        data, small_data = k.one(docs, "ConfigMap")["data"], k.one(small, "ConfigMap")["data"]
        for key in ("model.flags", "scheduler.flags", "server.flags", "worker.flags"):
            self.assertEqual(data[key], small_data[key], key)

    def test_python_cpu(self):
        # The cpu-small job with the worker command replaced by a Python worker that takes
        # exactly sieve-worker's arguments (docs/worker-api.md, "Python").
        docs = self.check_overlay("python-cpu")
        base = k.one(k.render(KUBECTL, "overlays/cpu-small"), "Job")["spec"]["template"]["spec"]
        job = k.pod_spec(k.one(docs, "Job"))
        worker, cpp = job["containers"][0], base["containers"][0]
        self.assertEqual(worker["command"],
                         ["python3", "/opt/sieve/examples/torch/fashion_mnist.py"])
        self.assertEqual(cpp["command"], ["sieve-worker"])
        self.assertEqual(worker["args"], cpp["args"])
        self.assertEqual(worker["image"], "ghcr.io/sieve/sieve:0.1.0-cpu-python")
        cm = k.one(docs, "ConfigMap")
        self.assertEqual(k.flag_value(k.parse_flagfile(cm["data"]["model.flags"]), "model"),
                         "fnn3")


if __name__ == "__main__":
    KUBECTL = sys.argv.pop(1)
    unittest.main(verbosity=2)
