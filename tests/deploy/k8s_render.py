"""Shared helpers of the Deploy* tests: render the kustomize tree and read the objects back."""

import os
import shutil
import subprocess
import tempfile

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(REPO, "deploy", "k8s")
OVERLAYS = ("bsp-gpu", "asp-gpu", "cpu-small", "cpu-secure", "python-cpu", "cpu-small-plain")
KNOBS = ("name", "servers", "workers", "model", "compressor", "consistency", "deadline_s",
         "queue")


def render(kubectl, target, root=K8S):
    """Runs `kubectl kustomize` on <root>/<target> (offline) and returns the objects."""
    path = os.path.join(root, target)
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


def render_edited(kubectl, overlay, edit):
    """Renders overlays/<overlay> of a copy of deploy/k8s after `edit(overlay_dir)` changed the
    copy's overlay directory (what a user does to their own copy of an overlay)."""
    with tempfile.TemporaryDirectory(prefix="sieve-k8s-") as tmp:
        root = os.path.join(tmp, "k8s")
        shutil.copytree(K8S, root)
        edit(os.path.join(root, "overlays", overlay))
        return render(kubectl, f"overlays/{overlay}", root)


def render_with_knobs(kubectl, overlay, kustomization_extra="", **knobs):
    """Renders a copy of deploy/k8s in which overlays/<overlay>/job.yaml has the given knob values
    (what a user does for a second job: copy the overlay, change its name) and its
    kustomization.yaml ends with `kustomization_extra`."""
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise ValueError(f"not a knob: {unknown}")

    def edit(directory):
        job_path = os.path.join(directory, "job.yaml")
        with open(job_path, encoding="utf-8") as f:
            job = yaml.safe_load(f)
        for knob, value in knobs.items():
            job["data"][knob] = str(value)
        with open(job_path, "w", encoding="utf-8") as f:
            yaml.safe_dump(job, f)
        if kustomization_extra:
            with open(os.path.join(directory, "kustomization.yaml"), "a",
                      encoding="utf-8") as f:
                f.write("\n" + kustomization_extra + "\n")
    return render_edited(kubectl, overlay, edit)


def knobs_of(kubectl_overlay_dir):
    """The knob values of deploy/k8s/<overlay>/job.yaml."""
    with open(os.path.join(K8S, kubectl_overlay_dir, "job.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["data"]
