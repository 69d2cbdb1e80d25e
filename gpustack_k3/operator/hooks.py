"""The project's validation, rendering and planning as the three callables ``decide`` takes.

The resource *is* a deployment document (``gpustack_k3.api.v1alpha1.spec.DeploymentDocument``), so:
``validate(doc)`` = schema errors as findings of rule ``spec.schema``, else the rule registry (``core.rules.validate``);
``render(doc)`` = ``core.launch.build_launch`` → ``render.kubernetes.render_kubernetes`` in the
resource's namespace (a document with ``spec.roles``: ``render.lws.render_document``, one LeaderWorkerSet per
role, schema-checked); ``plan(doc)`` = the KV/concurrency summary of the same build. Results are cached in one
place, by the reconciler (``reconciler.memoized``: per document, so a generation is validated, rendered and
planned once).

The model's architecture is the one the resource carries (``spec.model.configJSON``, core.model_config
``document_arch``), passed to every build as the CLI passes its own; a ``spec.model.config`` path names a file on
the machine that wrote the resource, which the operator cannot read: it is refused, naming the way out
(docs/design/011-model-config.md).
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.api.v1alpha1.status import PlanSummary
from gpustack_k3.core.findings import Finding
from gpustack_k3.core.launch import build_launch, build_topology_launch
from gpustack_k3.core.model_config import document_arch
from gpustack_k3.core.rules import schema_findings
from gpustack_k3.errors import InputError
from gpustack_k3.core.rules import validate as rules_validate
from gpustack_k3.render.kubernetes import render_kubernetes
from gpustack_k3.render.lws import render_document

# annotation-free choice of the topology form: spec.roles render as one LeaderWorkerSet per role (the portable
# form; a DisaggregatedSet needs LWS >= 0.10 and is a render option of the CLI)
TOPOLOGY_FORM = "leaderworkerset"


MODEL_CONFIG_PATH = Finding(
    "spec.schema", "error", "spec.model.config",
    "a path on the machine that wrote the resource: the operator cannot read it, so the model's config.json would "
    "not decide the rules and the plan",
    "put the file's content in spec.model.configJSON (the config.json object inline) and remove spec.model.config",
    "docs/design/011-model-config.md")


def _build(doc: dict) -> tuple[Any, list[Finding], Any, DeploymentDocument]:
    model = DeploymentDocument.model_validate(doc)
    return (*build_launch(model, arch=document_arch(model.spec.model)), model)


def validate(doc: dict) -> list[Finding]:
    found = schema_findings(doc)
    if found:
        return found
    model = DeploymentDocument.model_validate(doc)
    if model.spec.model.config is not None:
        return [MODEL_CONFIG_PATH]
    try:
        arch = document_arch(model.spec.model)
    except InputError as exc:         # an unusable inline config.json: the document is invalid, naming the field
        return [Finding("spec.schema", "error", exc.where, exc.message, exc.hint, "docs/design/011-model-config.md")]
    return list(rules_validate(model, arch=arch))


def _has_roles(doc: dict) -> bool:
    return bool((doc.get("spec") or {}).get("roles"))


def render(doc: dict) -> list[dict]:
    ns = (doc.get("metadata") or {}).get("namespace")
    if _has_roles(doc):
        model = DeploymentDocument.model_validate(doc)
        topo, _findings, _plans = build_topology_launch(model, arch=document_arch(model.spec.model))
        return render_document(model, namespace=ns, form=TOPOLOGY_FORM, topo=topo)
    launch, _findings, _plan, model = _build(doc)
    return render_kubernetes(launch, model, namespace=ns)


def plan(doc: dict) -> PlanSummary | None:
    if _has_roles(doc):
        return None       # plans are per role (status.roles); the single summary does not apply
    _launch, _findings, p, _model = _build(doc)
    if p is None:
        return None
    kv_gib = p.full_attention_gib if p.engine == ENGINE_SGLANG and p.full_attention_gib is not None else p.kv_cache_allocated_gib
    return PlanSummary(engine=p.engine, maxModelLen=p.max_model_len, kvTokens=p.kv_cache_tokens,
                       maxConcurrency=round(p.max_concurrency, 2), kvCacheDtype=p.kv_cache_dtype,
                       headroomGiB=round(p.headroom_gib, 2), kvCacheGiB=round(kv_gib, 2),
                       maxRunningRequests=p.max_running_requests)
