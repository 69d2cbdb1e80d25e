"""Which layouts of a model fit on N GPUs of one type: ``gpustack-k3 fit`` (pure; the CLI edge reads the files).

For each layout of one engine instance (TP x DP GPUs, expert parallelism on or off for a MoE model, DCP for the KV)
and each prefill/decode split of the GPUs, the weights of the fullest GPU come from the model's config.json
(core/plan_moe.py ``rank_weights``, vLLM's sharding), the KV pool per GPU is ``fraction x visible - weights`` and
its capacity ``pool / KV bytes per token x DCP``; full-length concurrency divides the pool by one max-length request
(its KV / DCP plus the per-request state of sliding-window and linear-attention layers). Activations, non-torch
memory and CUDA graphs are not derived from a config (no engine log), so the KV figures are upper bounds and every
row says so. A layout the release refuses at config time (heads not divisible by TP, DCP above TP / KV heads) is
not listed; a term that cannot be derived is named and nothing is listed.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import GIB
from gpustack_k3.core.plan_moe import kv_bytes_per_token, per_request_state, rank_weights

SRC_HEADS = "vllm config/model.py:1557-1563@0.33.0 (heads divisible by TP)"
SRC_DCP = "vllm config/model.py:1577-1597@0.33.0 (DCP on GQA: TP above the KV heads, DCP <= TP / KV heads)"
UPPER_BOUND = ("KV capacity and concurrency are upper bounds: activations, non-torch memory and CUDA graphs come from "
               "an engine log, not from config.json")


def _pow2_divisors(n: int) -> list[int]:
    return [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= n and n % d == 0]


def _layout_refused(a: Any, tp: int, dcp: int) -> str | None:
    if a.heads and a.heads % tp:
        return f"{a.heads} heads not divisible by TP {tp} ({SRC_HEADS})"
    if dcp > 1 and tp % dcp:
        return f"DCP {dcp} does not divide TP {tp}"
    if dcp > 1 and not a.mla and a.kv_heads and (tp <= a.kv_heads or dcp > tp // a.kv_heads):
        return f"DCP {dcp} with {a.kv_heads} KV heads at TP {tp} ({SRC_DCP})"
    return None


def instance_row(a: Any, *, gpus: int, tp: int, dp: int, ep: bool, dcp: int, visible_gib: float, fraction: float,
                 kv_dtype: str, max_model_len: int) -> dict[str, Any] | None:
    """One layout's figures (None: the layout is refused at config time or its figures are not derivable)."""
    if _layout_refused(a, tp, dcp):
        return None
    w = rank_weights(a, tp=tp, dp=dp, expert_parallel=ep)
    if w["unknown"]:
        return None
    bpt, _ = kv_bytes_per_token(a, kv_dtype, tp)
    state, _ = per_request_state(a, kv_dtype, tp)
    if not bpt:
        return None
    pool = fraction * visible_gib - w["gib"]
    tokens = int(pool * GIB // bpt) * dcp if pool > 0 else 0
    per_req = max_model_len * bpt / dcp + (state or 0)
    conc_rank = pool * GIB / per_req if pool > 0 else 0.0
    big = max(w["stages"][w["worst_stage"]]["terms"], key=lambda t: t["gib"])
    return {"layout": f"TP{tp}" + (f" DP{dp}" if dp > 1 else "") + (" EP" if ep else "") + (f" DCP{dcp}" if dcp > 1
                                                                                              else ""),
            "gpus": gpus, "tp": tp, "dp": dp, "ep": w["ep"] if ep else 1, "dcp": dcp,
            "weights_gib_per_gpu": round(w["gib"], 2), "largest_term": f"{big['term']} {big['gib']:.2f} GiB",
            "kv_pool_gib_per_gpu": round(pool, 2), "kv_tokens_per_rank": tokens,
            "full_length_concurrency": round(conc_rank * dp, 2),
            "fits": pool > 0 and tokens >= max_model_len,
            "why_not": None if pool > 0 and tokens >= max_model_len else (
                f"weights {w['gib']:.2f} GiB > {fraction} x {visible_gib} GiB (largest: {big['term']})" if pool <= 0
                else f"KV {tokens:,} tokens < max model len {max_model_len:,}")}


def fit_table(a: Any, *, gpu_type: str, visible_gib: float, gpus: int, fraction: float = 0.9, kv_dtype: str = "auto",
              max_model_len: int | None = None, all_rows: bool = False) -> dict[str, Any]:
    """The fit matrix of ``a`` (a ModelArch) on ``gpus`` GPUs of ``visible_gib`` each: single-instance layouts and
    P/D splits (prefill instance + decode instance on disjoint GPUs, each side its best fitting layout)."""
    w = rank_weights(a, tp=1)
    bpt, why = kv_bytes_per_token(a, kv_dtype, 1)
    out: dict[str, Any] = {"model": a.source, "architecture": a.architecture, "gpu_type": gpu_type, "gpus": gpus,
                           "visible_gib": visible_gib, "memory_fraction": fraction, "kv_cache_dtype": kv_dtype,
                           "max_model_len": None, "layouts": [], "pd_splits": [], "unknown": [], "notes": [UPPER_BOUND]}
    unknown = list(w["unknown"]) + ([f"KV bytes per token: {why}"] if bpt is None else [])
    if unknown:
        out["unknown"] = unknown
        return out
    max_len = int(max_model_len or a.max_positions or 0)
    if not max_len:
        out["unknown"] = ["max model len: max_position_embeddings not in the config (give --max-model-len)"]
        return out
    out["max_model_len"] = max_len
    rows = []
    for tp in _pow2_divisors(gpus):
        dp = gpus // tp
        for ep in ([False, True] if a.moe and tp * dp > 1 else [False]):
            for dcp in _pow2_divisors(tp):
                row = instance_row(a, gpus=gpus, tp=tp, dp=dp, ep=ep, dcp=dcp, visible_gib=visible_gib,
                                   fraction=fraction, kv_dtype=kv_dtype, max_model_len=max_len)
                if row is not None and (row["fits"] or all_rows):
                    rows.append(row)
    rows.sort(key=lambda r: (not r["fits"], -r["full_length_concurrency"]))
    out["layouts"] = rows
    for p in _pow2_divisors(gpus)[:-1] if gpus > 1 else []:
        d = gpus - p
        sides = []
        for n in (p, d):
            best = None
            for tp in _pow2_divisors(n):
                for dcp in _pow2_divisors(tp):
                    for ep in ([False, True] if a.moe and n > 1 else [False]):
                        row = instance_row(a, gpus=n, tp=tp, dp=n // tp, ep=ep, dcp=dcp, visible_gib=visible_gib,
                                           fraction=fraction, kv_dtype=kv_dtype, max_model_len=max_len)
                        if row and row["fits"] and (best is None or row["full_length_concurrency"] >
                                                    best["full_length_concurrency"]):
                            best = row
            sides.append(best)
        if all(sides):
            out["pd_splits"].append({"split": f"{p}P{d}D", "prefill": sides[0]["layout"], "decode": sides[1]["layout"],
                                     "decode_kv_tokens_per_rank": sides[1]["kv_tokens_per_rank"],
                                     "decode_full_length_concurrency": sides[1]["full_length_concurrency"]})
    if not rows:
        out["notes"].append(f"no layout of {gpus} {gpu_type} GPUs fits {max_len:,} tokens")
    return out
