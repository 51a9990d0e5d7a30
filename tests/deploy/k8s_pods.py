"""What a kubelet makes of a rendered pod template, for the tests that run the manifests without a
cluster (DeployLocalRun: local processes; DeployContainerRun: podman containers).

- pods(): the pods the workloads ask for: a Deployment's `replicas` pods, a StatefulSet's
  `replicas` pods named <name>-<ordinal>, an Indexed Job's `completions` pods with the
  completion-index annotation;
- container_env(): literal values and Downward API fieldRefs (status.podIP, metadata.name,
  metadata.namespace, metadata.labels[...], metadata.annotations[...]);
- expand_vars(): the kubelet's $(VAR) expansion of env values, command and args;
- write_configmap(): a configMap volume as a directory of the ConfigMap's files.
"""

import os
import re
import urllib.request

import k8s_render as k

NAMESPACE = "default"


def expand_vars(text, env):
    """The kubelet's $(VAR) expansion: $$ -> $, $(NAME) -> env[NAME] if defined, else kept."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i):
            end = text.find(")", i)
            name = text[i + 2:end] if end > 0 else None
            if name is not None and name in env:
                out.append(env[name])
                i = end + 1
            else:
                out.append("$(")
                i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class Pod:
    """One pod of a workload: its name, template spec, labels and annotations."""

    def __init__(self, workload, index, job_suffix="-local"):
        kind, meta = workload["kind"], workload["metadata"]
        tmpl = workload["spec"]["template"]
        self.kind = kind
        self.workload = meta["name"]
        self.index = index
        self.spec = tmpl["spec"]
        self.labels = dict(tmpl["metadata"].get("labels", {}))
        self.annotations = dict(tmpl["metadata"].get("annotations", {}))
        if kind == "StatefulSet":
            self.name = f"{meta['name']}-{index}"
        elif kind == "Job":
            self.name = f"{meta['name']}-{index}{job_suffix}"
            self.annotations["batch.kubernetes.io/job-completion-index"] = str(index)
        else:
            self.name = f"{meta['name']}{job_suffix}-{index}"
        self.claim_templates = [t["metadata"]["name"]
                                for t in workload["spec"].get("volumeClaimTemplates", [])]

    def containers(self):
        """Init containers in order, then the containers."""
        return self.spec.get("initContainers", []) + self.spec["containers"]


def pods(docs, pod_class=Pod, **kwargs):
    """Every pod of the Deployments, StatefulSets and Indexed Jobs in `docs`."""
    out = []
    for w in k.by_kind(docs, "Deployment") + k.by_kind(docs, "StatefulSet"):
        out += [pod_class(w, i, **kwargs) for i in range(w["spec"].get("replicas", 1))]
    for w in k.by_kind(docs, "Job"):
        if w["spec"].get("completionMode") != "Indexed":
            raise AssertionError(f"Job {w['metadata']['name']} must be Indexed")
        out += [pod_class(w, i, **kwargs) for i in range(w["spec"]["completions"])]
    return out


def field_ref(path, pod, pod_ip):
    if path == "status.podIP":
        return pod_ip
    if path == "metadata.name":
        return pod.name
    if path == "metadata.namespace":
        return NAMESPACE
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return (pod.labels if m.group(1) == "labels" else pod.annotations)[m.group(2)]
    raise AssertionError(f"fieldRef {path} is not supported here")


def container_env(container, pod, pod_ip):
    """The container's environment as the kubelet sets it (values expanded in order)."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = expand_vars(e["value"], env)
        else:
            ref = e["valueFrom"]
            if "fieldRef" not in ref:
                raise AssertionError(f"{e['name']}: only fieldRef env sources are supported")
            env[e["name"]] = field_ref(ref["fieldRef"]["fieldPath"], pod, pod_ip)
    return env


def container_argv(container, env, what):
    """command + args with $(VAR) expanded; the manifests never rely on the image's entrypoint."""
    argv = [expand_vars(a, env) for a in container.get("command", [])]
    argv += [expand_vars(a, env) for a in container.get("args", [])]
    if not argv:
        raise AssertionError(f"{what}: no command (image entrypoint)")
    return argv


def configmaps(docs):
    return {d["metadata"]["name"]: d for d in k.by_kind(docs, "ConfigMap")}


def write_configmap(configmap, directory):
    """A configMap volume: one file per key."""
    os.makedirs(directory, exist_ok=True)
    for key, text in configmap["data"].items():
        with open(os.path.join(directory, key), "w", encoding="utf-8") as f:
            f.write(text)


def backends(service, pods):
    """The pods a Service's selector picks."""
    selector = service["spec"].get("selector", {})
    return [p for p in pods if all(p.labels.get(a) == b for a, b in selector.items())]


def dns_names(service):
    """The spellings under which a pod in the namespace reaches a Service."""
    return [service, f"{service}.{NAMESPACE}", f"{service}.{NAMESPACE}.svc",
            f"{service}.{NAMESPACE}.svc.cluster.local"]


def poll_probes(probes, seen):
    """One round of httpGet probes [(kind, url)]: adds those that answer 200 to `seen`."""
    for kind, url in probes:
        if (kind, url) in seen:
            continue
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    seen.add((kind, url))
        except OSError:
            pass
