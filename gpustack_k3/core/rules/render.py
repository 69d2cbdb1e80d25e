"""The render family: what only shows up when a launch spec is projected onto a target (storage mostly).

Errors refuse the render exactly like spec errors do. ``launch`` and ``argv`` mount nothing; every other target
mounts the volumes.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.findings import Finding
from gpustack_k3.core import k8s_names as kn
from gpustack_k3.core.rules.registry import Hit, of_family, rule

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec, Volume

BOTH = (ENGINE_VLLM, ENGINE_SGLANG)
_FIELD = {"model": "spec.storage.model", "cache": "spec.storage.cache"}
NO_VOLUMES = ("launch", "argv")
NOT_CEL = ("a property of the rendered target (its volumes), refused when that target is rendered; the CRD's "
           "Kubernetes target is checked by the operator's render")


def render_findings(launch: LaunchSpec, target: str) -> list[Finding]:
    """Findings of every render rule for ``target``."""
    if target in NO_VOLUMES:
        return []
    out: list[Finding] = []
    for r in of_family("render"):
        if launch.engine in r.engines:
            out.extend(r.findings(r.check(launch, target), engine=launch.engine, version=launch.engine_version))
    return out


def _volumes(launch: LaunchSpec, purpose: str) -> Iterator[tuple[Volume, str]]:
    for v in launch.volumes:
        if v.purpose == purpose:
            yield v, _FIELD[purpose]


@rule("render-volume-source", family="render", severity="error", engines=BOTH, field="spec.storage.model.source",
      title="A volume that must exist is not named",
      why="A pvc model volume must name the claim that already holds the weights, and a hostPath volume the host "
          "path; without it the pod has nothing to mount.",
      fix="Set spec.storage.model.source (or spec.storage.cache.source) to the claim name or host path.",
      source="gpustack_k3/render/kubernetes.py (the model volume is mounted read-only); "
             "docs/sources.md#persistent-caches",
      no_cel=NOT_CEL)
def check_render_volume_source(launch: LaunchSpec, target: str) -> Iterator[Hit]:
    for purpose in ("model", "cache"):
        for v, field in _volumes(launch, purpose):
            if v.kind in ("pvc", "hostPath") and not v.source and (purpose == "model" or v.kind == "hostPath"):
                what = "claim name" if v.kind == "pvc" else "host path"
                yield (f"{field}.source",
                       f"the {purpose} volume is a {v.kind} without a {what}"
                       + (": the weights must already be on it" if purpose == "model" else ""),
                       f"set {field}.source to the {what} that holds the {'weights' if purpose == 'model' else 'cache'}")


@rule("render-model-emptydir", family="render", severity="error", engines=BOTH, field="spec.storage.model.kind",
      title="The model volume is an emptyDir",
      why="The model volume is mounted read-only, so an emptyDir can never hold the weights.",
      fix="Set spec.storage.model.kind to pvc or hostPath and spec.storage.model.source to where the weights are.",
      source="gpustack_k3/render/kubernetes.py (the model volume is mounted read-only)",
      no_cel=NOT_CEL)
def check_render_model_emptydir(launch, target):
    for v, field in _volumes(launch, "model"):
        if v.kind == "emptyDir":
            yield f"{field}.kind", "the model volume is an emptyDir: it is mounted read-only, so it can never hold the weights"


@rule("render-cache-claim-size", family="render", severity="error", engines=BOTH, field="spec.storage.cache.sizeGiB",
      title="A new per-pod cache claim has no size",
      why="A cache volume of kind pvc without a source becomes a new claim per pod (volumeClaimTemplates), and a new "
          "claim needs resources.requests.storage.",
      fix="Set spec.storage.cache.sizeGiB (e.g. 200), or spec.storage.cache.source to an existing claim.",
      source="Kubernetes API apps/v1 StatefulSet.spec.volumeClaimTemplates (a new claim needs "
             "resources.requests.storage); gpustack_k3/render/kubernetes.py",
      no_cel=NOT_CEL)
def check_render_cache_claim_size(launch, target):
    for v, field in _volumes(launch, "cache"):
        if v.kind == "pvc" and not v.source and not v.size_gib:
            yield f"{field}.sizeGiB", "the cache volume is a new per-pod claim (pvc without source) but has no size"


@rule("render-cache-ephemeral", family="render", severity="warning", engines=BOTH, field="spec.storage.cache.kind",
      title="The JIT/compile cache does not survive a restart",
      why="An emptyDir cache is lost with the pod: every restart recompiles (Triton, TorchInductor, FlashInfer, "
          "DeepGEMM) and the cold start is paid again.",
      fix="Set spec.storage.cache.kind to pvc (or hostPath) so a restart skips JIT.",
      source="docs/sources.md#persistent-caches")
def check_render_cache_ephemeral(launch, target):
    for v, field in _volumes(launch, "cache"):
        if v.kind == "emptyDir":
            yield f"{field}.kind", ("the JIT/compile cache is an emptyDir: every restart recompiles (Triton, TorchInductor, "
                                    "FlashInfer, DeepGEMM) and the cold start is paid again")


@rule("render-hostpath-cache-owner", family="render", severity="info", engines=BOTH, field="spec.storage.cache.source",
      title="A hostPath cache must be writable by the pod's user",
      why="The pod runs as uid/gid 10001; fsGroup does not change hostPath ownership.",
      fix="On each GPU node: install -d -o 10001 -g 10001 <the host path>.",
      source="gpustack_k3/render/kubernetes.py RUN_AS (the pod runs as non-root uid/gid 10001; fsGroup does "
             "not apply to hostPath)")
def check_render_hostpath_cache_owner(launch, target):
    if target not in ("kubernetes", "all"):
        return
    for v, field in _volumes(launch, "cache"):
        if v.kind == "hostPath" and v.source:
            yield (f"{field}.source",
                   f"the pod runs as uid/gid 10001; fsGroup does not change hostPath ownership, so {v.source} must be "
                   "writable by 10001 on every GPU node", f"on each node: install -d -o 10001 -g 10001 {v.source}")


# ----------------------------------------------------------------------------- Kubernetes' own name limits

def _role_workload_name(t_role) -> tuple[str, int, str]:
    """(name, longest allowed, what) of the workload one role of a document becomes on Kubernetes."""

    doc = t_role.resolved.doc
    name = doc.metadata.name
    if t_role.prefix == "spec":    # a roleless document: a Deployment, or a StatefulSet for a per-pod claim
        storage = doc.spec.storage
        per_pod_claim = any(v.kind == "pvc" and not v.source for v in (storage.model, storage.cache))
        if per_pod_claim:
            return name, kn.STATEFULSET_NAME_MAX, "StatefulSet (its pods' controller-revision-hash label)"
        return name, kn.LABEL_VALUE_MAX, "Service and the app.kubernetes.io/instance label"
    return (name, kn.lws_name_max(t_role.instances, t_role.pods),
            f"LeaderWorkerSet (its StatefulSets{' <lws>-<group>' if t_role.pods > 1 else ''} and their "
            "controller-revision-hash labels)")


@rule("k8s-name-length", checked_by="product", family="topology", severity="error", engines=BOTH,
      field="metadata.name",
      title="A name Kubernetes refuses",
      why="The deployment's name (and with roles, <name>-<role>) becomes the names and labels of the Kubernetes "
          "objects: a Service name is a DNS-1035 label of at most 63 characters, a label value at most 63, and a "
          "StatefulSet's pods carry <statefulset>-<10-character hash> as a label, so a StatefulSet (and a "
          "LeaderWorkerSet, whose leaders are one and whose worker groups are <lws>-<group>) is named in at most 52 "
          "characters less its group suffix. The API server (or the controller, at pod creation) refuses longer "
          "ones, after the apply has started.",
      fix="Shorten metadata.name (or the role's name) to the length the message names; begin it with a letter.",
      source="k8s.io/apimachinery pkg/util/validation/validation.go (DNS1035LabelMaxLength, LabelValueMaxLength); "
             "k8s.io/kubernetes pkg/controller/history/controller_history.go (ControllerRevisionName); "
             "kubernetes-sigs/lws pkg/controllers/pod_controller.go@v0.10.0 (worker StatefulSet <lws>-<group>); "
             "gpustack_k3/core/k8s_names.py",
      no_cel="the limit depends on the storage (StatefulSet or Deployment) and on each role's instances and pods; "
             "validate checks it and the operator's render refuses the object before it is applied")
def check_k8s_name_length(t) -> Iterator[Hit]:

    if t.source != "document":
        return
    for r in t.roles:
        name, limit, what = _role_workload_name(r)
        field = "metadata.name" if r.prefix == "spec" else f"{r.prefix}.name"
        shown = "metadata.name" if r.prefix == "spec" else f"<metadata.name>-<{r.prefix}.name>"
        if len(name) > limit:
            yield (field, f"{shown} = {name!r} has {len(name)} characters; the {what} allows at most {limit}",
                   f"shorten it by {len(name) - limit} character(s)")
        elif not kn.DNS1035_LABEL.fullmatch(name):
            yield (field, f"{shown} = {name!r} names a Service, which must be a DNS-1035 label (a-z first)",
                   "begin the name with a letter")


# ----------------------------------------------------------------------------- topology fields without roles

_TOPOLOGY_ONLY = ("disaggregation", "routing", "network")


@rule("topology-fields-need-roles", checked_by="product", family="topology", severity="error", engines=BOTH,
      field="spec.disaggregation",
      title="A topology field in a document without roles",
      why="spec.disaggregation (the P/D KV transfer), spec.routing (the router or InferencePool in front of the "
          "roles) and spec.network (RDMA and UCX between the pods of a topology) describe how roles work together; "
          "a document without spec.roles is one engine, which no channel renders them for, so they would be "
          "silently dropped; so would spec.placement.rack (where a topology's groups go in NVLink domains).",
      fix="Add spec.roles (prefill and decode for P/D), or remove the field.",
      source="gpustack_k3/core/topology.py (document_topology: the P/D facts of a roleless document); "
             "docs/design/002-topologies.md",
      no_cel="a cross-section condition the operator's validate refuses before it renders")
def check_topology_fields_need_roles(t) -> Iterator[Hit]:
    if t.source != "document" or not t.roles or any(r.prefix != "spec" for r in t.roles):
        return
    spec = t.roles[0].resolved.doc.spec
    if spec.placement.rack is not None:
        yield ("spec.placement.rack", "spec.placement.rack is set but the document has no spec.roles: one pod, no "
               "groups to place in NVLink domains", "add spec.roles, or remove spec.placement.rack")
    for name in _TOPOLOGY_ONLY:
        if getattr(spec, name) is not None:
            yield (f"spec.{name}", f"spec.{name} is set but the document has no spec.roles: one engine, nothing to "
                   f"{'hand KV between' if name == 'disaggregation' else 'route between' if name == 'routing' else 'connect'}",
                   f"add spec.roles, or remove spec.{name}")



@rule("hardware-gpucount-with-roles", checked_by="product", family="topology", severity="warning", engines=BOTH,
      field="spec.hardware.gpuCount",
      title="spec.hardware.gpuCount is not used by a document with roles",
      why="With spec.roles every role's gpusPerPod is the GPU count of its pods (core/topology.py "
          "effective_document sets hardware.gpuCount to it); a different shared gpuCount would be dropped without "
          "a word.",
      fix="Remove spec.hardware.gpuCount, or set each role's gpusPerPod to the GPUs its pods get.",
      source="gpustack_k3/core/topology.py (effective_document); docs/design/002-topologies.md")
def check_hardware_gpucount_with_roles(t) -> Iterator[Hit]:
    doc = t.document
    if doc is None or not doc.spec.roles or "gpuCount" not in doc.spec.hardware.model_fields_set:
        return
    n = doc.spec.hardware.gpuCount
    other = [f"{r.name}: {r.gpusPerPod}" for r in doc.spec.roles if r.gpusPerPod != n]
    if other:
        yield ("spec.hardware.gpuCount", f"spec.hardware.gpuCount {n} is not used: with spec.roles each role's "
               f"gpusPerPod decides ({', '.join(other)})")
