"""Planner per role (docs/design/002-topologies.md "Planner per role").

For each role of a document: GPUs and pods (per instance, per role, in total and per rack), the DP/EP layout,
routed experts per EP rank, weights per GPU (dense parts replicated, ÷ TP; routed experts sharded, ÷ EP), KV per
DP rank and concurrency per rank, per instance and per role. A figure the catalog does not have (DeepSeek-V4.1-Flash
publishes no weight sizes: docs/sources.md#dsv41-flash-model) is ``None`` and named in ``unknown``, never invented.

The rank's memory plan is the single-engine plan (:mod:`gpustack_k3.core.plan`) of the role's document: a rank is
one engine of TP x PP GPUs whose fused-MoE layers vLLM shards over TP x DP devices (core.plan scales calibrated
weights by the routed share the model's config.json gives, or derives them from the config alone). A MoE model's
memory per GPU is also shown term by term (core.plan_moe ``rank_memory``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.model_config import arch_from_config
from gpustack_k3.core.plan import GIB, Plan, PlanUnavailable, plan
from gpustack_k3.core.plan_moe import rank_memory
from gpustack_k3.core.resolve import Resolved, resolve
from gpustack_k3.core.topology import flag_values, role_views


@dataclass
class RolePlan:
    role: str
    kind: str                          # prefill | decode | serve
    field_prefix: str
    instances: int
    pods_per_instance: int
    gpus_per_pod: int
    gpus_per_instance: int
    pods: int                          # pods of the whole role
    nodes: int | None                  # nodes (trays) the role's pods fill at least, packed by GPUs per node
    gpus: int                          # GPUs of the whole role
    tp: int
    pp: int
    dp: int                            # DP ranks of one instance
    dp_local: int
    ep: int                            # expert-parallel group (TP x DP with expert parallel; 1 otherwise)
    max_model_len: int
    routed_experts_per_rank: float | None      # the model's routed experts / EP (None: not in the catalog)
    draft_routed_experts_per_rank: float | None
    weights_per_gpu_gib: float | None
    kv_tokens_per_rank: int | None             # KV capacity of one DP rank (tokens)
    kv_bytes_per_token: int | None             # the model's KV bytes per token of one rank (catalog, if public)
    kv_gib_per_rank_at_max_seqs: float | None  # KV that max-num-seqs full-length requests of one rank need
    max_num_seqs_per_rank: int | None          # the scheduler's cap: max-num-seqs is per DP rank
    concurrency_per_rank: float | None         # running requests one rank holds: min(cap, full-length KV fit)
    concurrency_per_instance: float | None
    concurrency_per_role: float | None
    memory: dict[str, Any] | None              # the DP rank's memory plan (core.plan.Plan.to_dict())
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # a MoE model: memory per GPU of one DP rank from its config figures, term by term (core.plan_moe)
    rank_memory: dict[str, Any] | None = None


@dataclass
class TopologyPlan:
    name: str
    gpu_type: str
    gpus_per_pod_max: int | None       # the GPU type's GPUs per node (a pod is one node or tray)
    gpus_per_rack: int | None          # the GPU type's scale-up domain (GB300 NVL72: 72); None: no rack unit
    roles: list[RolePlan]
    gpus: int
    pods: int
    nodes: int | None                  # nodes (trays) the pods fill at least
    nodes_per_rack: int | None
    racks: int | None                  # racks the GPUs need at least (None: the GPU type has no rack unit)
    gpus_free_in_racks: int | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for role in d["roles"]:
            for k, v in role.items():
                if isinstance(v, float):
                    role[k] = round(v, 4)
        return d


def _per_rank(count: int | None, ep: int) -> float | None:
    return None if count is None else count / ep


def _rank_plan(r: Resolved) -> tuple[Plan | None, str | None]:
    """The memory plan of one DP rank, or (None, why not)."""
    try:
        return plan(r), None
    except PlanUnavailable as exc:
        return None, str(exc)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        return None, f"cannot plan this role: {exc}"


def _nodes(pods: int, gpus_per_pod: int, gpus_per_node: int | None) -> int | None:
    """Nodes ``pods`` pods of ``gpus_per_pod`` GPUs fill when packed (None: a pod does not fit a node)."""
    if not gpus_per_node or gpus_per_pod > gpus_per_node:
        return None
    return math.ceil(pods / (gpus_per_node // gpus_per_pod))


def plan_role(view, r: Resolved | None = None) -> RolePlan:
    r = r or resolve(view.document)
    role = view.role
    tp, pp, dp = r.tp, int(r.value("parallel.pp") or 1), view.dp
    unknown: list[str] = []
    notes: list[str] = []
    if r.engine.engine == ENGINE_SGLANG:
        # SGLang: the experts are sharded over --ep-size ranks of the TP group (runtime_context.py:159-217@0.5.23);
        # DP attention splits the attention inside the TP group and adds no GPUs (docs/design/007)
        ep = int(r.value("parallel.ep") or 1)
        expert_parallel = ep > 1
        attn_dp = int(r.value("sglang.attnDpSize") or 1)
        if attn_dp > 1:
            notes.append(f"attention DP {attn_dp} inside TP {tp} (--attn-dp-size): {attn_dp} schedulers, "
                         f"attention TP {max(1, tp // attn_dp)}")
    else:
        expert_parallel = bool(r.spec.parallel.expertParallel)
        ep = tp * dp if expert_parallel else 1
    m = r.model
    max_len = int(r.value("scheduling.maxModelLen") or 0)
    seqs = r.value("scheduling.maxNumSeqs")
    seqs = int(seqs) if seqs is not None else None

    # the rank's plan is the single-engine plan of its document: core.plan shards the experts over TP x DP as vLLM
    # does (calibrated figures scaled by the config's routed-expert share, or derived from the config alone)
    p, why = _rank_plan(r)
    weights = p.weights_gib if p is not None else None
    memory = p.to_dict() if p is not None else None
    if p is not None and p.basis == "config.json":
        # derived from the config alone: its figures are the rank's (KV an upper bound); the term-by-term view is
        # rank_memory below, the single-engine table holds calibrated plans only
        memory = None
        notes.append(f"rank plan derived from {r.model_arch.source}: weights {p.weights_gib:.2f} GiB per GPU, KV "
                     f"{p.kv_cache_tokens:,} tokens at most ({'; '.join(p.unknown)})")
    if weights is None:
        unknown.append("weights_per_gpu_gib")
    if why:
        notes.append(f"memory plan per rank not computed: {why}")

    shard = ep if expert_parallel else 1
    a = r.model_arch
    routed = (a.experts if a is not None and a.experts else None) or (m.routed_experts if m else None)
    d = _draft_arch(m) if m is not None and m.draft_architecture is not None else None
    draft_routed = (d.experts if d is not None and d.experts else None) or (m.draft_routed_experts if m else None)
    experts = _per_rank(routed, shard) if expert_parallel else None
    draft_experts = _per_rank(draft_routed, shard) if expert_parallel else None
    if expert_parallel and experts is None:
        unknown.append("routed_experts_per_rank")
    if expert_parallel and experts is not None and not float(experts).is_integer():
        notes.append(f"{routed} routed experts do not divide evenly over EP {ep}")

    kv_tokens = p.kv_cache_tokens if p is not None else None
    if kv_tokens is None:
        unknown.append("kv_tokens_per_rank")
    bpt = m.kv_bytes_per_token if m else None
    kv_at_max = bpt * max_len * seqs / GIB if (bpt is not None and seqs and max_len) else None
    if kv_at_max is not None:
        notes.append(f"max-num-seqs {seqs} full-length requests of {max_len:,} tokens need {kv_at_max:.2f} GiB of "
                     f"target-model KV per rank at {bpt} B/token (catalog kv_bytes_per_token; draft KV not included)")

    fit = p.max_concurrency if p is not None else None
    if seqs is None and fit is None:
        per_rank = None
    elif fit is None:
        per_rank = float(seqs)
        notes.append(f"concurrency per rank is the scheduler's cap (max-num-seqs {seqs}, per DP rank): whether "
                     "the KV pool holds that many full-length requests is unknown")
    else:
        per_rank = min(float(seqs), fit) if seqs is not None else fit
    if per_rank is None:
        unknown.append("concurrency_per_rank")
    per_instance = per_rank * dp if per_rank is not None else None
    per_role = per_instance * role.instances if per_instance is not None else None
    gpi = role.podsPerInstance * role.gpusPerPod
    # rank_memory shards the experts over TP x DP: SGLang's EP as that product (EP >= TP in its layouts)
    moe_dp = max(1, ep // tp) if r.engine.engine == ENGINE_SGLANG else dp
    moe = _rank_memory(r, tp, moe_dp, expert_parallel, role.podsPerInstance) if a is not None and a.moe else None
    return RolePlan(
        role=role.name, kind=role.role, field_prefix=view.field_prefix, instances=role.instances,
        pods_per_instance=role.podsPerInstance, gpus_per_pod=role.gpusPerPod, gpus_per_instance=gpi,
        pods=role.instances * role.podsPerInstance,
        nodes=_nodes(role.instances * role.podsPerInstance, role.gpusPerPod, r.hardware.gpus_per_node if r.hardware
                     else None), gpus=role.instances * gpi, tp=tp, pp=pp, dp=dp,
        dp_local=view.dp_local, ep=ep, max_model_len=max_len, routed_experts_per_rank=experts,
        draft_routed_experts_per_rank=draft_experts, weights_per_gpu_gib=weights, kv_tokens_per_rank=kv_tokens,
        kv_bytes_per_token=bpt, kv_gib_per_rank_at_max_seqs=kv_at_max, max_num_seqs_per_rank=seqs,
        concurrency_per_rank=per_rank, concurrency_per_instance=per_instance, concurrency_per_role=per_role,
        memory=memory, unknown=unknown, notes=notes, rank_memory=moe)


def _rank_memory(r: Resolved, tp: int, dp: int, expert_parallel: bool, pods: int) -> dict[str, Any]:
    """The MoE memory plan of one DP rank (core.plan_moe) with the role's effective settings."""
    spec = r.spec
    eplb = spec.parallel.eplb
    flags = flag_values(list(spec.extraArgs))
    fraction = r.value("memory.fraction")
    tokens = r.value("scheduling.maxNumBatchedTokens")
    m = r.model
    draft = None if m is None or m.draft_architecture is None else _draft_arch(m)
    kv = (m.kv_bytes_per_token, f"catalog kv_bytes_per_token ({(m.figure_sources or {}).get('kv_bytes_per_token', 'models.yaml')})") \
        if m is not None and m.kv_bytes_per_token is not None else None
    return rank_memory(
        arch=r.model_arch, draft_arch=draft, mtp=spec.speculative.method == "mtp", kv_bytes_fallback=kv,
        engine=r.engine.engine, figures=r.figures, tp=tp, dp=dp, expert_parallel=expert_parallel, pods=pods,
        kv_dtype=r.value("memory.kvCacheDtype"), enforce_eager=bool(r.value("vllm.enforceEager")),
        redundant_experts=(eplb.numRedundantExperts or 0) if eplb is not None else 0,
        include_draft=bool(eplb.includeDraft) if eplb is not None else False,
        speculative=spec.speculative.method not in (None, "none", "ngram"),
        all2all_backend=(r.value("sglang.moeA2aBackend") if r.engine.engine == ENGINE_SGLANG else None)
        or flags.get("--all2all-backend") or spec.env.get("VLLM_ALL2ALL_BACKEND"),
        env=dict(spec.env), visible_gib=r.hardware.visible_gib if r.hardware else None,
        fraction=float(fraction) if fraction is not None else None,
        max_num_batched_tokens=int(tokens) if isinstance(tokens, int) and tokens > 0 else None)


def _draft_arch(m) -> Any:
    return arch_from_config(m.draft_architecture.config, f"catalog models.yaml draft: {m.draft_architecture.source}")


def plan_topology(doc: DeploymentDocument, arch: Any = None) -> TopologyPlan:
    """Every role's plan and the totals (a roleless document: its one serve role). ``arch``: the model's config.json
    figures (core.model_config.ModelArch) where the caller read one: it decides over a catalog entry of the same name,
    as in core/launch.py build_topology_launch."""
    views = role_views(doc)
    resolved = [resolve(v.document, arch=arch) for v in views]
    roles = [plan_role(v, r) for v, r in zip(views, resolved)]
    hw = resolved[0].hardware
    gpus = sum(rp.gpus for rp in roles)
    pods = sum(rp.pods for rp in roles)
    rack = hw.gpus_per_rack if hw else None
    per_node = hw.gpus_per_node if hw else None
    nodes = None if any(rp.nodes is None for rp in roles) else sum(rp.nodes for rp in roles)
    racks = math.ceil(gpus / rack) if rack else None
    notes = []
    if nodes is None and hw:
        notes.append(f"a role's pod asks for more GPUs than a {doc.spec.hardware.gpuType} node has ({per_node})")
    return TopologyPlan(
        name=doc.metadata.name, gpu_type=doc.spec.hardware.gpuType, gpus_per_pod_max=per_node,
        gpus_per_rack=rack, roles=roles, gpus=gpus, pods=pods, nodes=nodes,
        nodes_per_rack=rack // per_node if rack and per_node else None, racks=racks,
        gpus_free_in_racks=racks * rack - gpus if rack else None, notes=notes)
