"""Shared helpers of the Deploy* tests: render the kustomize tree and read the objects back."""

import os
import subprocess

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(REPO, "deploy", "k8s")
OVERLAYS = ("bsp-gpu", "asp-gpu", "cpu-small", "cpu-secure", "python-cpu")


def render(kubectl, target):
    """Runs `kubectl kustomize` on deploy/k8s/<target> (offline) and returns the objects."""
    path = os.path.join(K8S, target)
    proc = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True,
                          timeout=60, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed:\n{proc.stderr}")
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    if not docs:
        raise RuntimeError(f"kubectl kustomize {path} rendered nothing")
    return docs


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, name=None):
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def parse_flagfile(text):
    """gflags flagfile syntax: one --flag[=value] per line, '#' comments, blank lines."""
    flags = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        flags.append(line)
    return flags


def flag_value(flags, name):
    value = None
    for f in flags:
        if f.startswith(f"--{name}="):
            value = f.split("=", 1)[1]
    return value
