"""DeployOpenApiValidate: every object rendered from every overlay validates offline: built-in kinds
against the Kubernetes OpenAPI schemas of the npm package kubernetes-models, the JobSet against
the subset of its API that the manifests use (jobset_schema.js, written from the JobSet API
reference; its replicated jobs' templates as batch/v1 Jobs, its volume claim templates as core/v1
PersistentVolumeClaims), the Kueue queue label included (validate_objects.js). The JobSet also
against the API of the oldest JobSet release docs/deploy.md says it needs (and must fail against
the release before it, while components/checkpoint-pvc makes it valid there).

The package is installed once into NODE_DIR (an ignored build folder) with the ordinary npm
client and reused while its version matches; when npm cannot install it the test fails. A
deliberately broken object must be rejected, so a validator that accepts everything fails too.

usage: validate_test.py KUBECTL NODE_DIR
"""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import k8s_render as k

PACKAGE = "kubernetes-models"
VERSION = "4.5.1"
KUBECTL = None
NODE_DIR = None
VALIDATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validate_objects.js")
# The release before the first with spec.volumeClaimPolicies (the JobSet changelog of v0.11.0).
JOBSET_BEFORE_CLAIM_POLICIES = "v0.10.0"


SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"
SKIP_EXIT = 77  # ctest SKIP_RETURN_CODE


class RegistryUnreachable(RuntimeError):
    """The validator package could not be fetched: nothing was validated (a skip, not a pass)."""


def ensure_package():
    """Installs kubernetes-models@VERSION into NODE_DIR unless it is there already."""
    stamp = os.path.join(NODE_DIR, "node_modules", PACKAGE, "package.json")
    if os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as f:
            if json.load(f).get("version") == VERSION:
                return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install Node.js/npm (Debian: nodejs npm)")
    os.makedirs(NODE_DIR, exist_ok=True)
    env = dict(os.environ)
    # Node only trusts its bundled roots unless told otherwise; trust the system store too (a
    # registry reached through a TLS-inspecting proxy is signed by a CA installed there).
    if "NODE_EXTRA_CA_CERTS" not in env and os.path.exists(SYSTEM_CA):
        env["NODE_EXTRA_CA_CERTS"] = SYSTEM_CA
    try:
        proc = subprocess.run(
            [npm, "install", "--prefix", NODE_DIR, "--no-audit", "--no-fund", "--no-save",
             "--loglevel=error", "--fetch-timeout=60000", "--fetch-retries=1",
             f"{PACKAGE}@{VERSION}"],
            capture_output=True, text=True, timeout=180, check=False, env=env)
    except subprocess.TimeoutExpired as e:
        raise RegistryUnreachable(f"npm install {PACKAGE}@{VERSION} timed out: {e}") from e
    if proc.returncode != 0 or not os.path.exists(stamp):
        raise RegistryUnreachable(
            f"npm install {PACKAGE}@{VERSION} failed:\n{proc.stdout}{proc.stderr}")


def validate(objects, jobset_version=None):
    """(exit status, output) of validate_objects.js; against the API of the JobSet release
    `jobset_version` (vX.Y.Z) when given, else the newest."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        raise RuntimeError("node not found")
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_DIR, "node_modules"))
    env.pop("JOBSET_VERSION", None)
    if jobset_version:
        env["JOBSET_VERSION"] = jobset_version
    proc = subprocess.run([node, VALIDATOR], input=json.dumps(objects), capture_output=True,
                          text=True, timeout=120, env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def documented_minimum_jobset():
    """The JobSet release docs/deploy.md says the manifests need at least: its line
    `**JobSet vX.Y.Z or later.**`."""
    with open(os.path.join(k.REPO, "docs", "deploy.md"), encoding="utf-8") as f:
        found = set(re.findall(r"\*\*JobSet (v\d+\.\d+\.\d+) or later\.\*\*", f.read()))
    if len(found) != 1:
        raise AssertionError("docs/deploy.md states the minimum JobSet release "
                             f"{found or 'nowhere'}")
    return found.pop()


class ValidateTest(unittest.TestCase):


    def check(self, target):
        docs = k.render(KUBECTL, target)
        rc, out = validate(docs)
        print(f"--- {target}\n{out}")
        self.assertEqual(rc, 0, out)
        self.assertIn(f"{len(docs)}/{len(docs)} objects valid", out)

    def test_jobset(self):
        self.check("jobset")

    def test_overlays(self):
        for overlay in k.OVERLAYS:
            with self.subTest(overlay=overlay):
                self.check(f"overlays/{overlay}")

    def test_minimum_jobset_release(self):
        """Every overlay's JobSet validates against the API of the JobSet release docs/deploy.md
        names as the minimum, and needs nothing newer; against the release before
        volumeClaimPolicies it fails on that field (what a strict `kubectl apply` against that
        release's CRD reports), and components/checkpoint-pvc, documented for such clusters,
        makes it valid there."""
        minimum = documented_minimum_jobset()
        for overlay in k.OVERLAYS:
            with self.subTest(overlay=overlay):
                docs = k.render(KUBECTL, f"overlays/{overlay}")
                if not k.by_kind(docs, "JobSet"):
                    continue  # the plain variant: no JobSet
                rc, out = validate(docs, minimum)
                self.assertEqual(rc, 0, out)
                self.assertIn(f"(needs JobSet {minimum} or later)", out)
                rc, out = validate(docs, JOBSET_BEFORE_CLAIM_POLICIES)
                self.assertNotEqual(rc, 0, out)
                self.assertIn(f"JobSet.spec.volumeClaimPolicies: unknown field in JobSet "
                              f"{JOBSET_BEFORE_CLAIM_POLICIES}", out)
        older = k.render_with_knobs(
            KUBECTL, "cpu-small", "components: [../../components/cpu-small, "
            "../../components/job, ../../components/checkpoint-pvc]")
        rc, out = validate(older, JOBSET_BEFORE_CLAIM_POLICIES)
        self.assertEqual(rc, 0, out)
        self.assertIn(f"{len(older)}/{len(older)} objects valid", out)
        self.assertIn(f"(nothing newer than JobSet {JOBSET_BEFORE_CLAIM_POLICIES})", out)

    def test_kueue_queue_label(self):
        docs = k.render_with_knobs(KUBECTL, "cpu-small", queue="team-a")
        rc, out = validate(docs)
        self.assertEqual(rc, 0, out)

    def test_broken_objects_are_rejected(self):
        docs = k.render(KUBECTL, "overlays/cpu-small")

        def replicated(d, name):
            return next(r for r in k.one(d, "JobSet")["spec"]["replicatedJobs"]
                        if r["name"] == name)

        def pod(d, name):
            return replicated(d, name)["template"]["spec"]["template"]["spec"]

        def claim_policy(d):
            return k.one(d, "JobSet")["spec"]["volumeClaimPolicies"][0]

        for what, mutate in (
                ("a port as a string",
                 lambda d: pod(d, "servers")["containers"][0]["ports"][0]
                 .__setitem__("containerPort", "9320")),
                ("a non-Indexed completion mode",
                 lambda d: replicated(d, "workers")["template"]["spec"]
                 .__setitem__("completionMode", "Ordered")),
                ("a container without a name",
                 lambda d: pod(d, "scheduler")["containers"][0].__delitem__("name")),
                ("a NetworkPolicy port as an object",
                 lambda d: k.one(d, "NetworkPolicy")["spec"]["ingress"][1]["ports"][0]
                 .__setitem__("port", {"n": 1})),
                ("a success policy operator that does not exist",
                 lambda d: k.one(d, "JobSet")["spec"]["successPolicy"]
                 .__setitem__("operator", "Most")),
                ("a success policy target that does not exist",
                 lambda d: k.one(d, "JobSet")["spec"]["successPolicy"]
                 .__setitem__("targetReplicatedJobs", ["worker"])),
                ("a misspelt JobSet field",
                 lambda d: k.one(d, "JobSet")["spec"]["network"]
                 .__setitem__("enableDnsHostnames", True)),
                ("maxRestarts as a string",
                 lambda d: k.one(d, "JobSet")["spec"]["failurePolicy"]
                 .__setitem__("maxRestarts", "2")),
                ("a failure policy action that does not exist",
                 lambda d: k.one(d, "JobSet")["spec"]["failurePolicy"]["rules"][0]
                 .__setitem__("action", "Restart")),
                ("a queue name that is not a DNS label",
                 lambda d: k.one(d, "JobSet")["metadata"]["labels"]
                 .__setitem__("kueue.x-k8s.io/queue-name", "Team A")),
                ("a JobSet name too long for its pods' names",
                 lambda d: k.one(d, "JobSet")["metadata"].__setitem__("name", "j" * 45)),
                ("a JobSet name starting with a digit",
                 lambda d: k.one(d, "JobSet")["metadata"].__setitem__("name", "1job")),
                ("a job failure reason that does not exist",
                 lambda d: k.one(d, "JobSet")["spec"]["failurePolicy"]["rules"][0]
                 .__setitem__("onJobFailureReasons", ["PodFailed"])),
                ("a deadline rule's reason misspelt",
                 lambda d: k.one(d, "JobSet")["spec"]["failurePolicy"]["rules"][1]
                 .__setitem__("onJobFailureReasons", ["DeadlineExceed"])),
                ("backoffLimitPerIndex as a string",
                 lambda d: replicated(d, "workers")["template"]["spec"]
                 .__setitem__("backoffLimitPerIndex", "3")),
                ("activeDeadlineSeconds as a string",
                 lambda d: replicated(d, "servers")["template"]["spec"]
                 .__setitem__("activeDeadlineSeconds", "3600")),
                ("a negative ttlSecondsAfterFinished",
                 lambda d: k.one(d, "JobSet")["spec"].__setitem__("ttlSecondsAfterFinished", -1)),
                ("a seccomp profile without a type",
                 lambda d: pod(d, "workers")["securityContext"]
                 .__setitem__("seccompProfile", {})),
                ("automountServiceAccountToken as a string",
                 lambda d: pod(d, "servers").__setitem__("automountServiceAccountToken", "no")),
                ("a NetworkPolicy egress port as an object",
                 lambda d: k.one(d, "NetworkPolicy")["spec"]["egress"][1]["ports"][0]
                 .__setitem__("port", {"n": 53})),
                ("an immutable ConfigMap flag as a string",
                 lambda d: k.one(d, "ConfigMap").__setitem__("immutable", "true")),
                ("a retention policy that does not exist",
                 lambda d: claim_policy(d)["retentionPolicy"].__setitem__("whenDeleted", "Keep")),
                ("a misspelt retention policy field",
                 lambda d: claim_policy(d).__setitem__("retentionPolicy",
                                                       {"whenDelete": "Delete"})),
                ("a claim template with a namespace",
                 lambda d: claim_policy(d)["templates"][0]["metadata"]
                 .__setitem__("namespace", "sieve")),
                ("a claim template's access modes as a string",
                 lambda d: claim_policy(d)["templates"][0]["spec"]
                 .__setitem__("accessModes", "ReadWriteMany")),
                ("a claim template no container mounts",
                 lambda d: claim_policy(d)["templates"][0]["metadata"]
                 .__setitem__("name", "ckpt")),
                ("a pod volume named like a claim template",
                 lambda d: pod(d, "servers")["volumes"].append(
                     {"name": "checkpoints", "emptyDir": {}})),
                ("a claim name longer than 63",
                 lambda d: claim_policy(d)["templates"][0]["metadata"]
                 .__setitem__("name", "c" * 60))):
            with self.subTest(what):
                broken = copy.deepcopy(docs)
                mutate(broken)
                rc, out = validate(broken)
                self.assertNotEqual(rc, 0, out)
                self.assertIn("FAIL", out)


if __name__ == "__main__":
    KUBECTL = sys.argv.pop(1)
    NODE_DIR = os.path.abspath(sys.argv.pop(1))
    try:
        ensure_package()
    except RegistryUnreachable as e:
        # Reported as SKIPPED by ctest, with the reason; any validation failure still fails.
        print(f"SKIPPED: the schema validator could not be installed from the npm registry: {e}")
        sys.exit(SKIP_EXIT)
    unittest.main(verbosity=2)
