#!/usr/bin/env python3
"""Validate the manifests of deploy/kubernetes offline (CI: .ci/run).

Every resource of a core kind against the Kubernetes OpenAPI schemas kubernetes-validate
bundles, strictly (an unknown field fails), for the oldest and the newest release named
below. The ServiceMonitor is a CRD (prometheus-operator's) and no package on the registries
bundles its schema: its structure is checked here, by hand, field by field (the fields this
file uses, as the operator's CRD types them), and against the Service it selects. Then what
ties the resources together: the Service selects the DaemonSet's pods and names its port, the
Job runs one pod per node.

usage: validate.py FILE.yaml...
"""

import re
import sys

import kubernetes_validate
import yaml

# backoffLimitPerIndex and maxFailedIndexes (the Job) are GA from 1.33.
KUBERNETES_VERSIONS = ["1.33.0", "1.37.0"]
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")

errors = []


def fail(where, what):
    errors.append(f"{where}: {what}")


def need(where, cond, what):
    if not cond:
        fail(where, what)


def check_service_monitor(where, sm, services):
    need(where, sm.get("apiVersion") == "monitoring.coreos.com/v1", "apiVersion must be monitoring.coreos.com/v1")
    meta = sm.get("metadata", {})
    need(where, isinstance(meta.get("name"), str) and meta["name"], "metadata.name")
    spec = sm.get("spec")
    if not isinstance(spec, dict):
        return fail(where, "spec must be an object")
    known = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels", "sampleLimit"}
    for k in spec:
        need(where, k in known, f"spec.{k}: not a ServiceMonitor field this check knows")
    labels = (spec.get("selector") or {}).get("matchLabels")
    need(where, isinstance(labels, dict) and labels, "spec.selector.matchLabels: the Service's labels")
    endpoints = spec.get("endpoints")
    if not isinstance(endpoints, list) or not endpoints:
        return fail(where, "spec.endpoints: a non-empty list")
    selected = [s for s in services if labels and all(s["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())]
    need(where, len(selected) == 1, f"spec.selector selects {len(selected)} Services of these files, not 1")
    ep_fields = {"port", "path", "interval", "scrapeTimeout", "scheme", "relabelings", "metricRelabelings", "honorLabels"}
    for i, ep in enumerate(endpoints):
        at = f"{where}: spec.endpoints[{i}]"
        for k in ep:
            need(at, k in ep_fields, f"{k}: not an endpoint field this check knows")
        port = ep.get("port")
        need(at, isinstance(port, str), "port: a Service port's name")
        for s in selected:
            names = [p.get("name") for p in s["spec"].get("ports", [])]
            need(at, port in names, f"port {port!r} is none of the Service's ports {names}")
        need(at, str(ep.get("path", "/metrics")).startswith("/"), "path starts with /")
        for k in ("interval", "scrapeTimeout"):
            if k in ep:
                need(at, isinstance(ep[k], str) and DURATION.match(ep[k]), f"{k}: a Prometheus duration such as 60s")
        for j, r in enumerate(ep.get("relabelings", [])):
            need(at, isinstance(r.get("sourceLabels", []), list), f"relabelings[{j}].sourceLabels: a list")
            need(at, r.get("action", "replace") in {"replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep", "hashmod", "lowercase", "uppercase", "keepequal", "dropequal"}, f"relabelings[{j}].action")


def pod_spec(r):
    return r["spec"]["template"]["spec"]


def check_pod_security(where, spec):
    psc = spec.get("securityContext", {})
    need(where, psc.get("runAsNonRoot") is True, "securityContext.runAsNonRoot: true")
    for c in spec["containers"]:
        sc = c.get("securityContext", {})
        at = f"{where}: container {c['name']}"
        need(at, sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
        need(at, sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true")
        need(at, sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities.drop: [ALL]")
        need(at, not sc.get("privileged"), "not privileged")
        for m in c.get("volumeMounts", []):
            if m["mountPath"] != "/tmp":
                need(at, m.get("readOnly") is True, f"{m['mountPath']}: read-only")
    tolerations = spec.get("tolerations", [])
    need(where, any(t.get("key") == "nvidia.com/gpu" and t.get("effect") == "NoSchedule" for t in tolerations), "tolerates nvidia.com/gpu:NoSchedule")


def main(files):
    resources = []
    for f in files:
        with open(f) as fh:
            for doc in yaml.safe_load_all(fh):
                if doc:
                    resources.append((f, doc))
    core = [(f, r) for f, r in resources if r.get("kind") != "ServiceMonitor"]
    for f, r in core:
        for v in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(r, v, strict=True)
            except kubernetes_validate.ValidationError as e:
                fail(f"{f} {r['kind']}/{r['metadata']['name']} (Kubernetes {v})", f"{'.'.join(map(str, e.path))}: {e.message}")
    print(f"  {len(core)} resources checked against the Kubernetes {' and '.join(KUBERNETES_VERSIONS)} schemas (strict)")
    services = [r for _, r in resources if r.get("kind") == "Service"]
    monitors = [(f, r) for f, r in resources if r.get("kind") == "ServiceMonitor"]
    for f, r in monitors:
        check_service_monitor(f"{f} ServiceMonitor/{r['metadata'].get('name')}", r, services)
    print(f"  {len(monitors)} ServiceMonitor checked by structure (no registry package bundles its CRD schema)")
    for f, r in resources:
        where = f"{f} {r['kind']}/{r['metadata']['name']}"
        if r["kind"] == "DaemonSet":
            spec = pod_spec(r)
            check_pod_security(where, spec)
            pod_labels = r["spec"]["template"]["metadata"]["labels"]
            ports = [p["name"] for c in spec["containers"] for p in c.get("ports", [])]
            for s in services:
                sel = s["spec"].get("selector", {})
                if all(pod_labels.get(k) == v for k, v in sel.items()):
                    for p in s["spec"]["ports"]:
                        need(where, p.get("targetPort") in ports, f"Service port {p['name']} targets {p.get('targetPort')!r}, not a container port {ports}")
                    break
            else:
                fail(where, "no Service selects its pods")
        if r["kind"] == "Job":
            s = r["spec"]
            spec = pod_spec(r)
            check_pod_security(where, spec)
            need(where, s.get("completionMode") == "Indexed", "completionMode: Indexed")
            need(where, s.get("parallelism") == s.get("completions"), "parallelism = completions (one pod per node, all at once)")
            terms = spec.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
            labels = r["spec"]["template"]["metadata"]["labels"]
            need(where, any(t.get("topologyKey") == "kubernetes.io/hostname" and all(labels.get(k) == v for k, v in t.get("labelSelector", {}).get("matchLabels", {}).items()) for t in terms), "a required pod anti-affinity on kubernetes.io/hostname that matches its own pods")
            need(where, any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {}) for c in spec["containers"]), "requests nvidia.com/gpu")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print(f"  {len(resources)} resources of {len(files)} files: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
