"""Memory / KV planner: the engines' own arithmetic, fed by catalog figures.

vLLM (v1/worker/gpu_worker.py:683-757 @0.33.0): requested = util x total; KV = requested - non-KV
(weights + non-torch + activation peak) - CUDA-graph estimate. Builds that do not subtract the graph
estimate (trait ``kv_subtracts_cudagraph: false``; docs/sources.md#memory-table) allocate requested - non-KV and so
over-commit by the graph memory. Capacity = KV bytes / bytes per token (x DCP: KV is sharded).

SGLang (mem_cache/kv_cache_configurator.py:3229-3409 @0.5.23): rest = fraction x total
- weights; Mamba budget = rest x r/(1+r); with speculative decoding the state pool solves
N x per_req x (1 + D/ratio) = budget; the full-attention and draft pools share the rest.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM, GIB, MIB
from gpustack_k3.errors import GpustackK3Error
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.plan_moe import kv_bytes_per_token, per_request_state, rank_weights
from gpustack_k3.core.topology import flag_values



@dataclass
class Plan:
    engine: str
    engine_version: str
    gpu_type: str
    visible_gib: float
    memory_fraction: float
    requested_gib: float
    weights_gib: float
    max_model_len: int
    kv_cache_dtype: str
    kv_cache_budget_gib: float        # what fits the fraction by the engine's own accounting
    kv_cache_allocated_gib: float     # what this build actually allocates
    overcommit_gib: float
    kv_cache_tokens: int
    max_concurrency: float            # full-length requests that fit (tokens / max_model_len)
    headroom_gib: float               # GPU memory left outside the pool, graphs and activations
    notes: list[str] = field(default_factory=list)
    # vLLM
    activation_gib: float | None = None
    cudagraph_gib: float | None = None
    # SGLang
    full_attention_tokens: int | None = None
    draft_tokens: int | None = None
    full_attention_gib: float | None = None
    draft_kv_gib: float | None = None
    mamba_state_gib: float | None = None
    max_running_requests: int | None = None
    requested_running_requests: int | None = None
    # how the figures were obtained: "calibrated" (catalog figures fitted from an engine log, notes say which) or
    # "config.json" (derived from the model's config: core/plan_moe.py); what could not be derived; the weight terms
    # of the fullest GPU; layout dimensions the plan could not account for (the memory rules then only warn)
    basis: str = "calibrated"
    unknown: list[str] = field(default_factory=list)
    weight_terms: list[dict[str, Any]] = field(default_factory=list)
    unaccounted: list[str] = field(default_factory=list)
    kv_bytes_per_token: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 4)
        if self.basis == "config.json":
            for k in ("full_attention_tokens", "draft_tokens", "full_attention_gib", "draft_kv_gib",
                      "mamba_state_gib", "max_running_requests", "requested_running_requests"):
                d.pop(k)
        elif self.engine == ENGINE_VLLM:
            for k in ("full_attention_tokens", "draft_tokens", "full_attention_gib", "draft_kv_gib",
                      "mamba_state_gib", "max_running_requests", "requested_running_requests"):
                d.pop(k)
        else:
            d.pop("activation_gib")
            d.pop("cudagraph_gib")
        return d


def _dtype_key(dtype: str, table: dict[str, int]) -> str | None:
    if dtype in table:
        return dtype
    if dtype.startswith("fp8"):
        for k in ("fp8", "fp8_e4m3"):
            if k in table:
                return k
    if dtype in ("auto", "bfloat16", "bf16", "float16"):
        for k in ("auto", "bfloat16", "bf16"):
            if k in table:
                return k
    return None


class PlanUnavailable(GpustackK3Error):
    """The catalog has no figures to plan this combination (message says which)."""


def plan(r: Resolved) -> Plan:
    """The single-engine (one DP rank) plan: from the catalog's calibrated figures where they describe the model
    (``r.calibrated``), else derived from its config.json (``r.model_arch``), else PlanUnavailable naming why."""
    if r.version is None or r.hardware is None:
        raise PlanUnavailable("no catalog figures for this engine version or GPU type")
    for name in ("tp", "pp", "dp", "dcp"):
        # a size below 1 reaches here only from a command line its release accepts at config time (a document's
        # schema refuses it; rule argv-value-outside-document-range says what the release makes of it): no layout
        v = r.value(f"parallel.{name}")
        if v is not None and v < 1:
            raise PlanUnavailable(f"spec.parallel.{name} {v} is below 1: no layout to plan")
    for name in ("fraction", "mambaFullMemoryRatio"):
        v = r.value(f"memory.{name}")   # nan: a command line's value some releases accept (flags.py reads it)
        if v is not None and not math.isfinite(v):
            raise PlanUnavailable(f"spec.memory.{name} {v} is not a finite number: no memory to plan")
    if r.calibrated:
        return _plan_vllm(r) if r.engine.engine == ENGINE_VLLM else _plan_sglang(r)
    a = r.model_arch
    if a is not None and a.known:
        return _plan_config(r, a)
    if r.model is None:
        raise PlanUnavailable(f"model {r.spec.model.path or r.spec.model.name!r} is not in the catalog and no "
                              "config.json was read (give --model-config FILE or a local model directory)")
    raise PlanUnavailable(f"the weights of {r.spec.model.name} per GPU are unknown (not public; catalog "
                          "models.yaml): the single-engine memory plan is not computed")


def _layout(r: Resolved) -> dict[str, Any]:
    """TP, PP, DP, expert parallelism and redundant experts of one engine as the plan reads them."""
    eplb = r.spec.parallel.eplb
    sglang = r.engine.engine == ENGINE_SGLANG
    redundant = (eplb.numRedundantExperts or 0) if eplb is not None else 0
    if sglang:   # SGLang: --ep-num-redundant-experts, a pass-through flag (server_args.py ep_num_redundant_experts)
        raw = flag_values(list(r.spec.extraArgs)).get("--ep-num-redundant-experts")
        redundant = int(raw) if isinstance(raw, str) and raw.isdigit() else 0
    return {"tp": r.tp, "pp": int(r.value("parallel.pp") or 1),
            "dp": 1 if sglang else int(r.value("parallel.dp") or 1),
            "expert_parallel": (int(r.value("parallel.ep") or 1) > 1) if sglang else bool(r.spec.parallel.expertParallel),
            "redundant": redundant, "engine": r.engine.engine}


def _speculative_draft(r: Resolved) -> tuple[bool, bool]:
    """(a draft is loaded, it is the target's own MTP layers)."""
    method = r.spec.speculative.method
    return method not in (None, "none", "ngram"), method == "mtp"


def _weights_scale(r: Resolved) -> float:
    pp = int(r.value("parallel.pp") or 1)
    return r.figures.calibration_gpus / max(1, r.tp * pp)


def _calibrated_weights(r: Resolved, notes: list[str]) -> float:
    """The calibrated weights per GPU at this layout. The calibration layout shards everything over its GPUs; vLLM
    shards the fused-MoE layers over TP x DP (x PCP) devices (core/plan_moe.py SRC_MOE), so with DP > 1 the routed
    experts' share (from the model's config.json) is divided by DP as well."""
    fg = r.figures
    weights = fg.weights_per_gpu_gib * _weights_scale(r)
    lay = _layout(r)
    a = r.model_arch
    if lay["engine"] != ENGINE_VLLM or lay["dp"] <= 1 or a is None or not a.moe:
        return weights
    at_cal = rank_weights(a, tp=fg.calibration_gpus)
    if at_cal["unknown"]:
        notes.append("weights per GPU: DP > 1 but the routed experts' share is not derivable "
                     f"({'; '.join(at_cal['unknown'])}): every weight divided by TP only")
        return weights
    st = at_cal["stages"][0]
    routed = sum(t["gib"] for t in st["terms"] if t["term"].startswith("routed_experts"))
    share = routed / st["gib"]
    dp = lay["dp"]
    out = weights * ((1 - share) + share / dp)
    notes.append(f"weights per GPU: the calibrated {fg.weights_per_gpu_gib} GiB at TP {fg.calibration_gpus} scaled to "
                 f"TP {r.tp}; its routed experts ({share:.1%}, from {a.source}) also / DP {dp} (vLLM shards fused MoE "
                 "over TP x DP)")
    return out


def _plan_config(r: Resolved, a: Any) -> Plan:
    """The plan derived from the model's config.json alone: weights per GPU of the fullest rank, KV bytes per token
    and per-request state; what an engine log would calibrate (activations, non-torch memory, CUDA graphs) is
    named unknown, so the KV capacity is an upper bound."""
    hw = r.hardware
    lay = _layout(r)
    spec_on, mtp = _speculative_draft(r)
    w = rank_weights(a, tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], expert_parallel=lay["expert_parallel"],
                     engine=lay["engine"], redundant_experts=lay["redundant"], mtp_draft=spec_on and mtp)
    who = (f"model {r.spec.model.path or r.spec.model.name!r} is not in the catalog and its " if r.model is None
           else "the ")
    if w["unknown"]:
        raise PlanUnavailable(f"{who}weights per GPU are not derivable from {a.source}: {'; '.join(w['unknown'])} "
                              "(never another model's figures)")
    dtype = str(r.value("memory.kvCacheDtype") or "auto")
    if r.model is not None and r.model.kv_bytes_per_token is not None:     # published: wins over a derived figure
        bpt = r.model.kv_bytes_per_token
        why = f"catalog kv_bytes_per_token ({(r.model.figure_sources or {}).get('kv_bytes_per_token', 'models.yaml')})"
    else:
        bpt, why = kv_bytes_per_token(a, dtype, lay["tp"])
    if bpt is None:
        raise PlanUnavailable(f"{who}KV bytes per token are not derivable from {a.source}: {why}")
    state, state_why = per_request_state(a, dtype, lay["tp"])
    frac = r.value("memory.fraction")
    notes = [f"derived from {a.source} (config.json): weights per GPU of the fullest rank and KV bytes per token "
             f"({why}); nothing calibrated from an engine log", *w["notes"]]
    unknown = ["activation peak and non-torch memory: no engine log of this model calibrates them",
               "CUDA graphs: no engine log of this model calibrates them" if not r.spec.vllm.enforceEager else None]
    unknown = [u for u in unknown if u]
    unaccounted: list[str] = []
    if spec_on and not mtp:
        unaccounted.append(f"the speculative draft ({r.spec.speculative.method}): its config.json was not read")
    if frac is None:
        frac = 0.9 if lay["engine"] == ENGINE_VLLM else round((hw.visible_gib - 10.0) / hw.visible_gib, 3)
        notes.append(f"memory fraction {frac}: the engine's default" if lay["engine"] == ENGINE_VLLM else
                     f"memory fraction {frac}: SGLang's reserve floor of 10 GB (memory_hook.py:47-70@0.5.23)")
    frac = float(frac)
    requested = frac * hw.visible_gib
    weights = w["gib"]
    graphs = 0.0 if r.spec.vllm.enforceEager else None
    pool = requested - weights
    if r.spec.memory.kvCacheBytes and lay["engine"] == ENGINE_VLLM:
        pool = r.spec.memory.kvCacheBytes / GIB
        notes.append("kvCacheBytes pins the pool and ignores the memory fraction (config/cache.py:374-381 @0.33.0)")
    tokens = max(0, int(pool * GIB // bpt)) * r.dcp if pool > 0 else 0
    max_len = int(r.value("scheduling.maxModelLen") or 0)
    per_req = max_len * bpt / max(1, r.dcp) + (state or 0)
    conc = max(0.0, pool * GIB / per_req) if max_len and pool > 0 else 0.0
    if state:
        notes.append(f"per-request state {state / MIB:.1f} MiB ({state_why}) counted in the concurrency")
    if state is None:
        unknown.append(f"per-request state ({state_why})")
    notes.append("KV capacity is an upper bound: activations, non-torch memory and CUDA graphs are not subtracted")
    stage = w["stages"][w["worst_stage"]]
    if lay["pp"] > 1:
        notes.append(f"the fullest GPU is on PP stage {stage['stage']} (layers {stage['layers'][0]}-{stage['layers'][-1]}"
                     f"{', the embeddings' if stage['stage'] == 0 else ''}"
                     f"{', the LM head' if stage['stage'] == lay['pp'] - 1 else ''}): "
                     + ", ".join(f"stage {st['stage']} {st['gib']:.2f} GiB" for st in w["stages"]))
    return Plan(
        engine=lay["engine"], engine_version=r.version.key, gpu_type=r.spec.hardware.gpuType,
        visible_gib=hw.visible_gib, memory_fraction=frac, requested_gib=requested, weights_gib=weights,
        max_model_len=max_len, kv_cache_dtype=dtype, kv_cache_budget_gib=pool, kv_cache_allocated_gib=pool,
        overcommit_gib=0.0, kv_cache_tokens=tokens, max_concurrency=conc, headroom_gib=hw.visible_gib - requested,
        notes=notes, activation_gib=None, cudagraph_gib=graphs, basis="config.json", unknown=unknown,
        weight_terms=stage["terms"], unaccounted=unaccounted, kv_bytes_per_token=bpt)


def _calibration_notes(fg) -> list[str]:
    """Where the figures come from (catalog models.yaml ``calibration``): agreement with that log at its own
    settings is calibration, not a measure of accuracy."""
    cal = fg.calibration
    if cal is None:
        return []
    return [f"calibrated inputs: {', '.join(cal.inputs)} were taken or fitted from {cal.log}, so agreeing with "
            f"that log at the settings of preset {cal.preset} is calibration, not accuracy; other settings "
            "extrapolate from them"]


def _plan_vllm(r: Resolved) -> Plan:
    fg, hw = r.figures, r.hardware
    frac = float(r.value("memory.fraction"))
    visible = hw.visible_gib
    requested = frac * visible
    notes: list[str] = []
    weights = _calibrated_weights(r, notes)
    non_torch = fg.non_kv_fixed_gib - fg.weights_per_gpu_gib
    batched = int(r.value("scheduling.maxNumBatchedTokens"))
    activation = fg.activation_peak_gib * batched / fg.activation_calibration_tokens
    eager = bool(r.spec.vllm.enforceEager)
    graphs = 0.0 if eager else fg.cudagraph_gib
    non_kv = weights + non_torch + activation
    budget = requested - non_kv - graphs
    cpu_space = r.spec.env.get("VLLM_CPU_KVCACHE_SPACE") if r.trait("cpu") else None
    if cpu_space:
        allocated = budget = float(cpu_space)
        notes.append("VLLM_CPU_KVCACHE_SPACE sets the KV cache (GiB) and overrides --kv-cache-memory-bytes "
                     "(vllm/platforms/cpu.py:323-327 @0.32.0)")
        used = non_kv + allocated
    elif r.spec.memory.kvCacheBytes:
        allocated = budget = r.spec.memory.kvCacheBytes / GIB
        notes.append("kvCacheBytes pins the pool and ignores the memory fraction (config/cache.py:374-381 @0.33.0)")
        used = non_kv + graphs + allocated
    elif r.trait("kv_subtracts_cudagraph", True):
        allocated = budget
        used = requested
    else:
        allocated = requested - non_kv
        used = requested + graphs
        notes.append("this build sizes the KV pool without subtracting CUDA-graph memory (docs/sources.md#memory-table): "
                      f"the pool exceeds the engine's own budget by {allocated - budget:.2f} GiB")
    dtype = str(r.value("memory.kvCacheDtype") or "auto")
    key = _dtype_key(dtype, fg.kv_bytes_per_token or {})
    if key is None:
        raise PlanUnavailable(f"no KV bytes-per-token figure for kv cache dtype {dtype!r}")
    bpt = fg.kv_bytes_per_token[key]
    tokens = max(0, int(allocated * GIB // bpt)) * r.dcp
    max_len = int(r.value("scheduling.maxModelLen"))
    if r.dcp > 1:
        notes.append(f"DCP {r.dcp} shards the attention KV across ranks: capacity x{r.dcp} (Mamba state is replicated, V9)")
    notes += _calibration_notes(fg)
    return Plan(
        engine=ENGINE_VLLM, engine_version=r.version.key, gpu_type=r.spec.hardware.gpuType, visible_gib=visible,
        memory_fraction=frac, requested_gib=requested, weights_gib=weights, max_model_len=max_len,
        kv_cache_dtype=dtype, kv_cache_budget_gib=budget, kv_cache_allocated_gib=allocated,
        overcommit_gib=max(0.0, allocated - budget), kv_cache_tokens=tokens,
        max_concurrency=tokens / max_len if max_len else 0.0, headroom_gib=visible - used,
        activation_gib=activation, cudagraph_gib=graphs, notes=notes, kv_bytes_per_token=bpt,
    )


def _plan_sglang(r: Resolved) -> Plan:
    fg, hw = r.figures, r.hardware
    visible = hw.visible_gib
    frac = r.value("memory.fraction")
    notes = []
    if frac is None:
        # memory_hook.py:47-70, 281-343 @0.5.23: reserved = 512 MB + 1.5 MB x activation tokens
        # + tp x pp / 8 GB, floored at 10 GB on GPUs above 60 GB (graph/DeepEP reserves not modelled).
        act_tokens = max(int(r.value("scheduling.maxNumBatchedTokens") or 16384), 2048)
        reserved = 0.5 + 1.5 * act_tokens / 1024 + r.tp * int(r.value("parallel.pp") or 1) / 8
        reserved = max(reserved, 10.0)
        frac = round((visible - reserved) / visible, 3)
        notes.append(f"memory fraction derived as the engine would: {frac} (memory_hook.py:47-70 @0.5.23)")
    frac = float(frac)
    requested = frac * visible
    weights = _calibrated_weights(r, notes)
    rest = requested - weights
    ratio = r.value("memory.mambaFullMemoryRatio")   # 0 is a ratio (a command line's), not "unset"
    ratio_r = 0.9 if ratio is None else float(ratio)
    mamba_budget = max(0.0, rest) * ratio_r / (1 + ratio_r) if ratio_r > 0 else 0.0
    spec = r.spec_enabled
    per_req = fg.mamba_state_per_request_gib
    if spec:
        d = (r.spec.speculative.numTokens or 7) + 1   # verify window = block size + 1 (fields/spec.py:31-81)
        slots = int(mamba_budget // (per_req * (1 + d / fg.mamba_spec_ratio)))
    else:
        slots = int(mamba_budget // per_req)
    requested_running = r.value("scheduling.maxNumSeqs")
    if requested_running is None and spec:
        requested_running = fg.eagle_default_max_running_requests
    max_running = min(slots, int(requested_running)) if requested_running else slots
    mamba_state = slots * per_req if requested_running is None else min(slots, int(requested_running)) * per_req
    pools = max(0.0, rest - mamba_state)
    dtype = str(r.value("memory.kvCacheDtype") or "auto")
    key = _dtype_key(dtype, fg.full_kv_bytes_per_token or {})
    if key is None:
        raise PlanUnavailable(f"no KV bytes-per-token figure for kv cache dtype {dtype!r}")
    full_bpt = fg.full_kv_bytes_per_token[key]
    draft_bpt = fg.draft_kv_bytes_per_token if spec else 0
    full_tokens = int(pools * GIB // (full_bpt + draft_bpt))
    draft_tokens = full_tokens * r.dcp if spec else 0
    full_gib = full_tokens * full_bpt / GIB
    draft_gib = full_tokens * draft_bpt / GIB
    allocated = full_gib + draft_gib + mamba_state
    max_len = int(r.value("scheduling.maxModelLen"))
    notes += _calibration_notes(fg)
    if full_tokens < max_len:
        notes.append(f"max_req_len is capped at the pool ({full_tokens:,} tokens < context {max_len:,}; "
                     "managers/tp_worker.py:556-571 @0.5.23): a full-length request is not admitted")
    if spec and r.dcp > 1:
        notes.append(f"draft pool addressed in the DCP virtual token space: {full_tokens:,} x {r.dcp} (docs/sources.md#memory-table)")
    return Plan(
        engine=ENGINE_SGLANG, engine_version=r.version.key, gpu_type=r.spec.hardware.gpuType, visible_gib=visible,
        memory_fraction=frac, requested_gib=requested, weights_gib=weights, max_model_len=max_len,
        kv_cache_dtype=dtype, kv_cache_budget_gib=rest, kv_cache_allocated_gib=allocated,
        overcommit_gib=max(0.0, allocated - rest), kv_cache_tokens=full_tokens,
        max_concurrency=_sglang_concurrency(full_tokens, r.dcp, max_len, max_running),
        headroom_gib=visible - requested, full_attention_tokens=full_tokens, draft_tokens=draft_tokens,
        full_attention_gib=full_gib, draft_kv_gib=draft_gib, mamba_state_gib=mamba_state,
        max_running_requests=max_running,
        requested_running_requests=int(requested_running) if requested_running else None, notes=notes,
    )


def _sglang_concurrency(full_tokens: int, dcp: int, max_len: int, max_running: int) -> float:
    """Full-length requests that run at once. The engine caps one request at the pool size; under DCP the
    scheduler addresses the pool in the DCP token space (x dcp): the seed ran 10 x 200K requests on a
    916,672-token pool with DCP 8 (docs/sources.md#memory-table, #sglang-pool-below-context), which only fits that way."""
    if not max_len or full_tokens < max_len:
        return 0.0
    return min(full_tokens * dcp / max_len, float(max_running))
