"""Findings that only show up when a launch spec is projected onto a target (storage mostly).

Same shape as the rule catalog (:class:`~gpustack_k3.core.findings.Finding`); errors refuse the
render exactly like catalog errors do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from gpustack_k3.core.findings import Finding

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec

SRC_CACHE = "issue 3 (persistent JIT/compile caches); research/gpustack.md 'Persistent JIT/compile caches'"
SRC_K8S_PVC = "Kubernetes API apps/v1 StatefulSet.spec.volumeClaimTemplates: a new claim needs resources.requests.storage"
SRC_K8S_UID = "templates/kubernetes/workload.yaml.j2: pod runs as non-root uid/gid 10001 (fsGroup does not apply to hostPath)"

_FIELD = {"model": "spec.storage.model", "cache": "spec.storage.cache"}


def render_findings(launch: LaunchSpec, target: str) -> list[Finding]:
    """Storage problems for ``target`` (launch and argv mount nothing; every other target mounts volumes)."""
    if target in ("launch", "argv"):
        return []
    out: list[Finding] = []
    for v in launch.volumes:
        field = _FIELD.get(v.purpose)
        if field is None:
            continue
        if v.kind in ("pvc", "hostPath") and not v.source and (v.purpose == "model" or v.kind == "hostPath"):
            what = "claim name" if v.kind == "pvc" else "host path"
            out.append(Finding(
                "render-volume-source", "error", f"{field}.source",
                f"the {v.purpose} volume is a {v.kind} without a {what}"
                + (": the weights must already be on it" if v.purpose == "model" else ""),
                f"set {field}.source to the {what} that holds the {'weights' if v.purpose == 'model' else 'cache'}",
                SRC_CACHE if v.purpose == "cache" else "issue 3: model volume mounted read-only"))
        if v.purpose == "model" and v.kind == "emptyDir":
            out.append(Finding(
                "render-model-emptydir", "error", f"{field}.kind",
                "the model volume is an emptyDir: it is mounted read-only, so it can never hold the weights",
                f"set {field}.kind to pvc or hostPath and {field}.source to where the weights are",
                "issue 3: model volume mounted read-only"))
        if v.purpose == "cache" and v.kind == "pvc" and not v.source and not v.size_gib:
            out.append(Finding(
                "render-cache-claim-size", "error", f"{field}.sizeGiB",
                "the cache volume is a new per-pod claim (pvc without source) but has no size",
                f"set {field}.sizeGiB (e.g. 200), or {field}.source to an existing claim", SRC_K8S_PVC))
        if v.purpose == "cache" and v.kind == "emptyDir":
            out.append(Finding(
                "render-cache-ephemeral", "warning", f"{field}.kind",
                "the JIT/compile cache is an emptyDir: every restart recompiles (Triton, TorchInductor, "
                "FlashInfer, DeepGEMM) and the cold start is paid again",
                f"set {field}.kind to pvc (or hostPath) so a restart skips JIT", SRC_CACHE))
        if target in ("kubernetes", "all") and v.purpose == "cache" and v.kind == "hostPath" and v.source:
            out.append(Finding(
                "render-hostpath-cache-owner", "info", f"{field}.source",
                f"the pod runs as uid/gid 10001; fsGroup does not change hostPath ownership, so {v.source} "
                "must be writable by 10001 on every GPU node",
                f"on each node: install -d -o 10001 -g 10001 {v.source}", SRC_K8S_UID))
    return out
