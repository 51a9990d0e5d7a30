"""What the JobSet and Job controllers and a kubelet make of a rendering, for the tests that run the
manifests without a cluster (DeployLocalRun: local processes; DeployContainerRun: podman
containers).

- pods(): the pods the workloads ask for. A JobSet's replicated job R with `replicas` Jobs
  <jobset>-R-<j>, each Indexed with `completions` pods; an Indexed Job's `completions` pods. Each
  pod has the hostname <job>-<index> and the subdomain of its JobSet (spec.network.subdomain, by
  default the JobSet's name) or of its pod template, the completion-index annotation and label,
  and for a JobSet the labels its controller adds and the volumes of its volumeClaimPolicies
  (claim_volumes()). A Deployment or StatefulSet fails: sieve's daemons end with the job;
- dns_names(): the names under which a pod is found (<hostname>.<subdomain>[.<ns>[.svc[.cluster.
  local]]]), when the rendering publishes them: a JobSet with enableDNSHostnames, or a headless
  Service named like the subdomain whose selector picks the pod and that publishes not-ready
  addresses;
- container_env(): literal values and Downward API fieldRefs (status.podIP, metadata.name,
  metadata.namespace, metadata.labels[...], metadata.annotations[...]);
- expand_vars(): the kubelet's $(VAR) expansion of env values, command and args;
- write_configmap(): a configMap volume as a directory of the ConfigMap's files.
"""

import copy
import os
import re
import uuid
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


INDEX_KEY = "batch.kubernetes.io/job-completion-index"


class Pod:
    """One pod of an Indexed Job (on its own or a JobSet's): hostname, template spec, labels."""

    def __init__(self, job, template, index, subdomain, jobset=None, replicated_job=None,
                 jobset_uid=None, job_uid=None):
        self.kind = "JobSet" if jobset else "Job"
        self.job = job
        self.index = index
        self.hostname = f"{job}-{index}"
        self.name = self.hostname  # the real pod name has a random suffix; this one is unique
        self.subdomain = subdomain
        self.spec = template["spec"]
        self.labels = dict(template["metadata"].get("labels", {}))
        self.annotations = dict(template["metadata"].get("annotations", {}))
        self.annotations[INDEX_KEY] = str(index)
        self.labels[INDEX_KEY] = str(index)
        if job_uid:  # what the Job controller adds: its Job's UID
            self.labels["batch.kubernetes.io/controller-uid"] = job_uid
        if jobset_uid:
            self.labels["jobset.sigs.k8s.io/jobset-uid"] = jobset_uid
        if jobset:  # what the JobSet controller adds (first attempt)
            for key, value in (("jobset.sigs.k8s.io/jobset-name", jobset),
                               ("jobset.sigs.k8s.io/replicatedjob-name", replicated_job),
                               ("jobset.sigs.k8s.io/restart-attempt", "0")):
                self.labels[key] = self.annotations[key] = value
        self.role = self.labels.get("app.kubernetes.io/component")
        self.instance = self.labels.get("app.kubernetes.io/instance")
        self.dns = []  # set by pods()

    def containers(self):
        """Init containers in order, then the containers."""
        return self.spec.get("initContainers", []) + self.spec["containers"]

    def claims(self):
        """volume name -> PVC claimName of the pod's persistentVolumeClaim volumes."""
        return {v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in self.spec.get("volumes", []) if "persistentVolumeClaim" in v}


def claim_name(template_name, jobset_name):
    """The name the JobSet controller gives the claim it makes from a volumeClaimPolicies
    template: <template>-<jobset>."""
    return f"{template_name}-{jobset_name}"


def mounts_volume(pod_spec, name):
    return any(m["name"] == name for c in pod_spec.get("initContainers", []) +
               pod_spec.get("containers", []) for m in c.get("volumeMounts", []))


def claim_volumes(js):
    """{replicated job name: its Job's spec} with what the JobSet controller adds to each Job
    from spec.volumeClaimPolicies: for every claim template a container or init container of the
    Job mounts by the template's name, a volume of that name on the claim <template>-<jobset>.
    Raises AssertionError where the JobSet's webhook refuses the JobSet: a template no container
    of any replicated job mounts, a pod template that declares a volume of a template's name."""
    name = js["metadata"]["name"]
    specs = {rj["name"]: copy.deepcopy(rj["template"]["spec"])
             for rj in js["spec"]["replicatedJobs"]}
    for policy in js["spec"].get("volumeClaimPolicies", []):
        for template in policy.get("templates", []):
            claim = template["metadata"]["name"]
            mounted = False
            for rj, spec in specs.items():
                pod = spec["template"]["spec"]
                if any(v["name"] == claim for v in pod.get("volumes", [])):
                    raise AssertionError(f"{name}: replicated job {rj} declares a volume "
                                         f"{claim}, the name of a claim template")
                if mounts_volume(pod, claim):
                    mounted = True
                    pod.setdefault("volumes", []).append(
                        {"name": claim,
                         "persistentVolumeClaim": {"claimName": claim_name(claim, name)}})
            if not mounted:
                raise AssertionError(f"{name}: no container mounts the claim template {claim}")
    return specs


def indexed_job_pods(job_name, job_spec, subdomain, pod_class, kwargs, **extra):
    if job_spec.get("completionMode") != "Indexed":
        raise AssertionError(f"Job {job_name} must be Indexed (the index is the rank)")
    if job_spec.get("parallelism", 1) != job_spec["completions"]:
        raise AssertionError(f"Job {job_name}: parallelism {job_spec.get('parallelism')} != "
                             f"completions {job_spec['completions']}: every rank runs at once")
    out = [pod_class(job_name, job_spec["template"], i, subdomain, **extra, **kwargs)
           for i in range(job_spec["completions"])]
    for p in out:
        p.job_spec = job_spec
    return out


def pods(docs, pod_class=Pod, **kwargs):
    """Every pod of the JobSets and Indexed Jobs in `docs`, with its DNS names."""
    for kind in ("Deployment", "StatefulSet"):
        if k.by_kind(docs, kind):
            raise AssertionError(f"a {kind}: sieve's daemons end with the job, their controller "
                                 "would restart them into an empty job")
    out = []
    for js in k.by_kind(docs, "JobSet"):
        name = js["metadata"]["name"]
        jobset_uid = str(uuid.uuid4())  # one run: every pod of this JobSet, as its controller
        network = js["spec"].get("network", {})
        subdomain = network.get("subdomain") or name
        job_specs = claim_volumes(js)
        for rj in js["spec"]["replicatedJobs"]:
            for j in range(rj.get("replicas", 1)):
                job = f"{name}-{rj['name']}-{j}"
                new = indexed_job_pods(job, job_specs[rj["name"]], subdomain, pod_class,
                                       kwargs, jobset=name, replicated_job=rj["name"],
                                       jobset_uid=jobset_uid, job_uid=str(uuid.uuid4()))
                if network.get("enableDNSHostnames"):
                    if network.get("publishNotReadyAddresses") is False:
                        raise AssertionError(f"{name}: DNS names must be published before the "
                                             "pods are ready (the job forms first)")
                    for p in new:
                        p.dns = dns_names(f"{p.hostname}.{subdomain}")
                out += new
    services = {s["metadata"]["name"]: s for s in k.by_kind(docs, "Service")}
    for w in k.by_kind(docs, "Job"):
        spec = w["spec"]
        subdomain = spec["template"]["spec"].get("subdomain")
        new = indexed_job_pods(w["metadata"]["name"], spec, subdomain, pod_class, kwargs,
                               job_uid=str(uuid.uuid4()))
        svc = services.get(subdomain)
        if svc is not None:
            if svc["spec"].get("clusterIP") != "None" or not svc["spec"].get(
                    "publishNotReadyAddresses"):
                raise AssertionError(f"Service {subdomain} must be headless and publish "
                                     "not-ready addresses")
            for p in backends(svc, new):
                p.dns = dns_names(f"{p.hostname}.{subdomain}")
        out += new
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
        # A label or annotation the pod lacks is an empty string, as in the kubelet.
        return (pod.labels if m.group(1) == "labels" else pod.annotations).get(m.group(2), "")
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


def dns_names(name):
    """The spellings under which a pod in the namespace reaches <hostname>.<subdomain>."""
    return [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc",
            f"{name}.{NAMESPACE}.svc.cluster.local"]


def host_port(text):
    """'host:port' -> (host, port)."""
    host, _, port = text.rpartition(":")
    return host, int(port)


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
