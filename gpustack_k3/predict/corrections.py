"""Our corrections to the estimator's decode/prefill op graph. Each is a pure function on planned ops; each names
its assumption (``ASSUMPTIONS``), and the prediction lists the ones applied. No per-point factors: a correction
changes WHAT is priced (rows, counts, shapes, kernel table, collectives), the estimator's tables price it.
Design: docs/design/003-predict.md#corrections-our-code-each-assumption-named.
"""
from __future__ import annotations

import math

from gpustack_k3.predict.estimator import PlannedOp, fields, kind, settings
from gpustack_k3.predict.types import EngineConfig, PredictError

ASSUMPTIONS = {
    "baseline": "the estimator's convention: every decode op priced at batch x (drafts+1) rows, KV length = context",
    "verify-kv-once": "a verify step's drafts+1 query rows of one request share one KV read (MLA decode kernels take "
                      "q_len <= 8 per request in one pass; decode attention is KV-bandwidth bound): target attention "
                      "priced at `batch` requests; projections, MoE and linear attention stay at batch x (drafts+1)",
    "draft-block-forward": "DSpark drafts the whole block in one draft forward: draft attention runs once per draft "
                           "layer per step over each request's draft KV (count = draft layers, rows = requests)",
    "moe-kernel": "MoE priced on the kernel the release runs (vLLM FLASHINFER_TRTLLM_MXFP4_MXFP8, SGLang "
                  "flashinfer_mxfp4): the estimator's sglang_flashinfer_trtllm_moe w4a8_mxfp4_mxfp8 rows "
                  "(8x B300) serve both engines (same trtllm-gen kernel family)",
    "dcp": "DCP d: each rank runs MLA decode attention for all heads over s/d of the KV; per MLA layer the query is "
           "all-gathered and partial outputs (+LSE) reduce-scattered over d ranks (ag_rs), or the q projection is "
           "replicated and partial outputs exchanged all-to-all (a2a); collectives on the estimator's NCCL tables; "
           "the draft's KV is not sharded",
    "allreduce-nccl": "SGLang with custom all-reduce disabled runs NCCL all-reduce: custom-allreduce rows replaced "
                      "by NCCL all_reduce rows",
    "prefill-no-dcp": "prefill chunks are priced without the DCP transform (DCP shards decode KV reads)",
}

TARGET_ATTENTION = {"GenerationMla", "GenerationAttention", "Fallback"}


def _is_target_attention(op: PlannedOp) -> bool:
    return kind(op.spec) in TARGET_ATTENTION and not op.name.startswith("draft_") and op.category == "attention_kv"


def baseline_decode(graph: list[dict], cfg: EngineConfig, batch: int, s: int) -> list[PlannedOp]:
    rows = batch * (cfg.drafts + 1)
    return [PlannedOp(spec, "generation", rows, s, cfg.engine, corrections=[]) for spec in graph]


def baseline_prefill(graph: list[dict], cfg: EngineConfig, chunk: int, prefix: int) -> list[PlannedOp]:
    return [PlannedOp(spec, "context", 1, chunk, cfg.engine, prefix=prefix) for spec in graph]


def verify_kv_once(ops: list[PlannedOp], cfg: EngineConfig, batch: int) -> list[PlannedOp]:
    if cfg.drafts == 0:
        return ops
    out = []
    for op in ops:
        if _is_target_attention(op):
            op = op.clone(batch=batch)
            op.corrections.append("verify-kv-once")
        out.append(op)
    return out


def draft_block_forward(ops: list[PlannedOp], cfg: EngineConfig, batch: int) -> list[PlannedOp]:
    if cfg.drafts == 0:
        return ops
    out = []
    for op in ops:
        if op.name == "draft_attention":
            op = op.clone(batch=batch)
            f = fields(op.spec)
            # estimator: layers x drafts/(drafts+1) at batch x (drafts+1) rows; ours: layers at batch rows
            f["scale_factor"] = f["scale_factor"] * (cfg.drafts + 1) / cfg.drafts
            op.corrections.append("draft-block-forward")
        out.append(op)
    return out


def moe_kernel(ops: list[PlannedOp], cfg: EngineConfig) -> list[PlannedOp]:
    k = settings()["moe_kernel"].get(cfg.engine) if cfg.model in settings()["moe_kernel_models"] else None
    if not k:
        return ops
    out = []
    for op in ops:
        kd = kind(op.spec)
        if kd == "Moe":
            op = op.clone(table=k["table_backend"])
            fields(op.spec)["quant_mode"] = k["quant"]
            op.corrections.append("moe-kernel")
        elif kd == "MoeDispatch":
            op = op.clone()
            fields(op.spec)["moe_quant"] = k["quant"]
            op.corrections.append("moe-kernel")
        out.append(op)
    return out


def _all_heads(spec: dict, heads: int, qk_head_dim: int) -> None:
    """Set every head count of an attention op spec (and its fallback parts) to ``heads``."""
    k = kind(spec)
    f = spec[k]
    if k == "Fallback":
        _all_heads(f["primary"], heads, qk_head_dim)
        for part in f.get("fallback", []):
            _all_heads(part, heads, qk_head_dim)
        return
    if "num_heads" in f:
        f["num_heads"] = heads
    if k in ("GenerationAttention", "ContextAttention"):
        f["n"] = heads
        f["n_kv"] = heads
    if k == "Gemm" and f.get("name", "").endswith("q_b_gemm"):
        f["n"] = heads * qk_head_dim


def _count(spec: dict) -> float:
    """How many times per step an op runs (its scale factor; a fallback op's is its primary's)."""
    f = fields(spec)
    return float(f["scale_factor"]) if "scale_factor" in f else _count(f["primary"])


def dcp(ops: list[PlannedOp], cfg: EngineConfig, batch: int) -> list[PlannedOp]:
    d = cfg.dcp
    if d <= 1:
        return ops
    if cfg.mla is None:
        raise PredictError("spec.parallel.dcp", f"DCP {d} is modelled for multi-head latent attention only; "
                           f"{cfg.model} has none in its config.json (no kv_lora_rank)",
                           "predict without DCP (parallel.dcp 1)")
    heads, kv_lora_rank, rope_dim, qk_head_dim = cfg.mla
    rows = batch * (cfg.drafts + 1)
    out: list[PlannedOp] = []
    layers = None
    for op in ops:
        if _is_target_attention(op):
            op = op.clone(s=math.ceil(op.s / d))
            _all_heads(op.spec, heads, qk_head_dim)
            layers = _count(op.spec)
            op.corrections.append("dcp")
        elif cfg.dcp_comm == "a2a" and kind(op.spec) == "Gemm" and op.name.endswith("mla_q_b_gemm"):
            op = op.clone()
            fields(op.spec)["n"] = heads * qk_head_dim                 # replicated q projection
            op.corrections.append("dcp")
        elif cfg.dcp_comm == "a2a" and kind(op.spec) == "MlaBmm" and fields(op.spec).get("is_pre"):
            op = op.clone()
            fields(op.spec)["num_heads"] = heads                       # absorb for every head's q
            op.corrections.append("dcp")
        out.append(op)
    if layers is None:
        return out
    out_elems = heads * (kv_lora_rank + 2)                             # latent partial output + fp32 LSE per head
    q_elems = heads * (kv_lora_rank + rope_dim)
    comm = [("dcp_q_all_gather", "all_gather", q_elems), ("dcp_out_reduce_scatter", "reduce_scatter", out_elems)] \
        if cfg.dcp_comm != "a2a" else [("dcp_out_all_to_all", "alltoall", out_elems)]
    for name, operation, elems in comm:
        spec = {"Nccl": {"name": name, "scale_factor": float(layers), "hidden_size": float(elems), "num_gpus": d,
                         "dtype": "half", "operation": operation, "seq_split": 1}}
        out.append(PlannedOp(spec, "generation", rows, 1, cfg.engine, corrections=["dcp"]))
    return out


def allreduce_nccl(ops: list[PlannedOp], cfg: EngineConfig) -> list[PlannedOp]:
    if cfg.custom_allreduce:
        return ops
    out = []
    for op in ops:
        if kind(op.spec) == "CustomAllReduce":
            f = fields(op.spec)
            spec = {"Nccl": {"name": f["name"], "scale_factor": f["scale_factor"], "hidden_size": float(f["hidden_size"]),
                             "num_gpus": f["tp_size"], "dtype": "half", "operation": "all_reduce", "seq_split": 1}}
            op = op.clone(spec=spec)
            op.corrections.append("allreduce-nccl")
        out.append(op)
    return out


def corrected_decode(graph: list[dict], cfg: EngineConfig, batch: int, s: int) -> tuple[list[PlannedOp], list[str]]:
    """The decode step we price: the estimator's graph with every correction that applies to this role."""
    ops = baseline_decode(graph, cfg, batch, s)
    ops = verify_kv_once(ops, cfg, batch)
    ops = draft_block_forward(ops, cfg, batch)
    ops = moe_kernel(ops, cfg)
    ops = dcp(ops, cfg, batch)
    if cfg.tp > 1:
        ops = allreduce_nccl(ops, cfg)
    return ops, applied(ops)


def corrected_prefill(graph: list[dict], cfg: EngineConfig, chunk: int, prefix: int) -> tuple[list[PlannedOp], list[str]]:
    ops = baseline_prefill(graph, cfg, chunk, prefix)
    ops = moe_kernel(ops, cfg)
    if cfg.tp > 1:
        ops = allreduce_nccl(ops, cfg)
    names = applied(ops)
    if cfg.dcp > 1:
        names.append("prefill-no-dcp")
    return ops, names


def applied(ops: list[PlannedOp]) -> list[str]:
    seen: list[str] = []
    for op in ops:
        for c in op.corrections:
            if c not in seen:
                seen.append(c)
    return seen
