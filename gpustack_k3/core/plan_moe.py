"""Memory per GPU of one DP rank of any MoE model, from its ``config.json`` figures (docs/design/004-rack-scale.md §5).

Pure arithmetic over a catalog :class:`~gpustack_k3.catalog.loader.MoeArchitecture` (DeepSeek-V3 field names) and
the rank's layout. Each term carries its source; a term whose inputs are not public is ``None`` and named in
``unknown`` — never estimated — and a sum that needs it is not formed.

Terms, per GPU of a rank of TP GPUs in an EP group of ``ep`` GPUs:

* **dense weights** (embeddings, attention, dense-layer FFNs, router gates, norms, LM head) ÷ TP;
* **shared experts** (replicated on every rank) ÷ TP;
* **routed experts** ÷ EP: ``(n_routed + redundant) / ep`` experts per GPU, each ``3 x hidden x moe_intermediate``
  parameters per MoE layer (gate, up, down);
* the **draft's** own share the same way from its architecture;
* **KV bytes per token**: MLA ``(kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes`` (the latent is not split
  over TP), GQA ``2 x kv_heads / TP x head_dim x layers x bytes``; or the catalog's published figure;
* **CUDA graphs**: 0 with ``enforceEager``; else the model's calibrated figure from an engine log; else unknown;
* **DeepEP / NVSHMEM buffers**, from vLLM 0.33.0's all2all managers: none for the default
  ``allgather_reducescatter`` (``config/parallel.py:220``); ``deepep_high_throughput``: ``VLLM_DEEPEP_BUFFER_SIZE_MB``
  (1024) MiB NVLink buffer, plus as much RDMA buffer when the EP group spans nodes
  (``distributed/device_communicators/all2all.py:261-283``); ``deepep_low_latency``: the same NVLink buffer plus
  DeepEP's ``get_low_latency_rdma_size_hint(max_num_batched_tokens, hidden, ep, experts)`` (``all2all.py:327-352``;
  vLLM passes the scheduler's max_num_batched_tokens, ``fused_moe/layer.py:286,373``), transcribed from DeepEP
  ``csrc/config.hpp:120-188@v1.2.1`` (:func:`deepep_ll_rdma_bytes`).
"""
from __future__ import annotations

from typing import Any
from gpustack_k3.api.v1alpha1.constants import GIB, MIB

KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_ds_mla": 1, "bfloat16": 2, "bf16": 2, "auto": 2,
                  "float16": 2, "half": 2}
DEEPEP_BUFFER_MB_DEFAULT = 1024                       # vllm envs.py:291@0.33.0 VLLM_DEEPEP_BUFFER_SIZE_MB
ALL2ALL_DEFAULT = "allgather_reducescatter"           # vllm config/parallel.py:220@0.33.0
SRC_ALL2ALL = "vllm distributed/device_communicators/all2all.py:261-283@0.33.0"
SRC_ALL2ALL_LL = "vllm distributed/device_communicators/all2all.py:327-352@0.33.0"


def _need(a: Any, *names: str) -> list[str]:
    return [n for n in names if a is None or getattr(a, n, None) is None]


def attention_params(a: Any) -> int | None:
    """Attention parameters of one layer (MLA when kv_lora_rank is set, else GQA), norms included."""
    h = a.hidden_size
    if a.kv_lora_rank is not None:
        if _need(a, "num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            return None
        n, nope, rope, v = a.num_attention_heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * n * (nope + rope)) if a.q_lora_rank \
            else h * n * (nope + rope)
        kv = h * (a.kv_lora_rank + rope) + a.kv_lora_rank + a.kv_lora_rank * n * (nope + v)
        return q + kv + n * v * h + 2 * h
    if _need(a, "num_attention_heads", "num_key_value_heads", "head_dim"):
        return None
    n, kvh, d = a.num_attention_heads, a.num_key_value_heads, a.head_dim
    return h * n * d + 2 * h * kvh * d + n * d * h + 2 * h


def param_split(a: Any, routed: int | None = None) -> tuple[dict[str, int | None], list[str]]:
    """(parameters of the dense parts, the shared experts and the routed experts; the config figures missing).
    ``routed``: the routed experts where the catalog has them outside the architecture block."""
    routed = (a.n_routed_experts if a is not None and a.n_routed_experts is not None else None) or routed
    missing = _need(a, "hidden_size", "num_hidden_layers", "vocab_size", "moe_intermediate_size")
    if routed is None:
        missing.append("n_routed_experts")
    if a is not None and (a.first_k_dense_replace or 0) > 0 and a.intermediate_size is None:
        missing.append("intermediate_size")
    if a is None or missing:
        return {"dense": None, "shared_experts": None, "routed_experts": None}, missing
    attn = attention_params(a)
    if attn is None:
        return {"dense": None, "shared_experts": None, "routed_experts": None}, ["attention geometry"]
    h, layers = a.hidden_size, a.num_hidden_layers
    dense_layers = a.first_k_dense_replace or 0
    moe_layers = layers - dense_layers
    expert = 3 * h * a.moe_intermediate_size
    dense = (a.vocab_size * h * (1 if a.tie_word_embeddings else 2) + layers * attn + h
             + dense_layers * 3 * h * (a.intermediate_size or 0) + moe_layers * routed * h)
    return {"dense": dense, "shared_experts": moe_layers * (a.n_shared_experts or 0) * expert,
            "routed_experts": moe_layers * routed * expert}, []


def kv_bytes_per_token(a: Any, kv_dtype: str | None, tp: int) -> tuple[int | None, str]:
    """KV bytes per token on one GPU from the attention geometry (None: not computable, with the reason)."""
    b = KV_DTYPE_BYTES.get((kv_dtype or "auto").lower())
    if b is None:
        return None, f"KV dtype {kv_dtype!r} has no byte size here"
    if a is None or a.num_hidden_layers is None:
        return None, "layers not public"
    if a.kv_lora_rank is not None:
        if a.qk_rope_head_dim is None:
            return None, "qk_rope_head_dim not public"
        return (a.kv_lora_rank + a.qk_rope_head_dim) * a.num_hidden_layers * b, \
            "MLA latent (kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes (not split over TP)"
    if a.num_key_value_heads is None or a.head_dim is None:
        return None, "KV heads / head dim not public"
    heads = max(1, a.num_key_value_heads // max(1, tp))
    return 2 * heads * a.head_dim * a.num_hidden_layers * b, "2 x KV heads per TP rank x head_dim x layers x bytes"


def deepep_ll_rdma_bytes(tokens: int, hidden: int, experts: int) -> int:
    """DeepEP's ``get_low_latency_rdma_size_hint`` (``csrc/config.hpp:120-188@v1.2.1``, ``LowLatencyLayout``): two
    odd/even send, receive and signaling buffers sized for ``tokens`` dispatched per rank over ``experts`` experts,
    rounded up to NUM_BUFFER_ALIGNMENT_BYTES (128, ``csrc/kernels/configs.cuh:7``)."""
    scales = hidden // 128
    dispatch_msg = 16 + max(hidden * 2, hidden + scales * 4)           # int4 + max(bf16 row, fp8 row + scales)
    combine_msg = scales * 4 + hidden * 2                               # bf16x2 min/max per 128 + bf16 row
    send = max(tokens * dispatch_msg, experts * tokens * combine_msg)
    recv = max(experts * tokens * dispatch_msg, experts * tokens * combine_msg)
    signaling = -(-(experts * 4) // 128) * 128
    total = 2 * (send + recv + signaling)
    return ((total + 128) // 128) * 128


def deepep_buffers(backend: str, env: dict[str, str], internode: bool, *, hidden: int | None = None,
                   tokens: int | None = None, experts: int | None = None) -> tuple[float | None, str]:
    """(GiB per GPU, source) of the all2all backend's DeepEP/NVSHMEM buffers."""
    if backend == ALL2ALL_DEFAULT or backend in ("naive", "pplx"):
        return 0.0, f"all2all backend {backend}: no DeepEP buffer (vllm config/parallel.py:220@0.33.0)"
    raw = env.get("VLLM_DEEPEP_BUFFER_SIZE_MB")
    mb = int(raw) if raw and raw.isdigit() else DEEPEP_BUFFER_MB_DEFAULT
    if backend == "deepep_high_throughput":
        n = 2 if internode else 1
        return n * mb * MIB / GIB, (f"{SRC_ALL2ALL}: {mb} MiB NVLink buffer" + (" + as much RDMA (EP spans nodes)"
                                                                                  if internode else ""))
    if backend == "deepep_low_latency":
        if hidden is None or tokens is None or experts is None:
            return None, (f"{SRC_ALL2ALL_LL}: {mb} MiB NVLink + DeepEP get_low_latency_rdma_size_hint, which needs "
                          "the hidden size, max_num_batched_tokens and the experts (one is not known)")
        rdma = deepep_ll_rdma_bytes(tokens, hidden, experts)
        return (mb * MIB + rdma) / GIB, (f"{SRC_ALL2ALL_LL}: {mb} MiB NVLink + {rdma / MIB:.1f} MiB RDMA (DeepEP "
                                         f"csrc/config.hpp:120-188@v1.2.1 at {tokens} tokens, hidden {hidden}, "
                                         f"{experts} experts)")
    return None, f"all2all backend {backend}: buffer size not read for this backend"


def _term(name: str, gib: float | None, source: str) -> dict[str, Any]:
    return {"term": name, "gib": None if gib is None else round(gib, 4), "source": source}


def rank_memory(*, model: Any, figures: Any, tp: int, dp: int, expert_parallel: bool, pods: int,
                kv_dtype: str | None, enforce_eager: bool, redundant_experts: int, include_draft: bool,
                speculative: bool, all2all_backend: str | None, env: dict[str, str], visible_gib: float | None,
                fraction: float | None, max_num_batched_tokens: int | None = None) -> dict[str, Any]:
    """The memory of one GPU of one DP rank, term by term (module docstring). ``model``: catalog ModelEntry;
    ``figures``: its ModelEngineFigures for the engine (calibrated CUDA-graph figure) or None."""
    arch = getattr(model, "architecture", None)
    src = arch.source if arch is not None else "catalog models.yaml (no architecture figures)"
    ep = tp * dp if expert_parallel else tp
    terms: list[dict[str, Any]] = []
    unknown: list[str] = []
    notes: list[str] = []

    def weights(a: Any, what: str, routed_fallback: int | None, redundant: int) -> None:
        split, missing = param_split(a, routed_fallback)
        routed = (a.n_routed_experts if a is not None and a.n_routed_experts else None) or routed_fallback
        experts = None if routed is None else (routed + redundant) / ep
        if experts is not None:
            notes.append(f"{what}: {routed} routed experts{f' + {redundant} redundant' if redundant else ''} / EP "
                         f"{ep} = {experts:g} per GPU")
        dbpp = a.dense_bytes_per_param if a is not None else None
        ebpp = a.expert_bytes_per_param if a is not None else None
        dense = None if split["dense"] is None or dbpp is None else split["dense"] * dbpp / tp / GIB
        shared = None if split["shared_experts"] is None or dbpp is None else split["shared_experts"] * dbpp / tp / GIB
        per_expert = None if split["routed_experts"] is None or ebpp is None or not routed else (
            split["routed_experts"] / routed * ebpp)
        routed_gib = None if per_expert is None or experts is None else per_expert * experts / GIB
        s = a.source if a is not None else src
        for name, v, why in ((f"{what} dense weights (/ TP {tp})", dense, "dense parts x bytes/param"),
                             (f"{what} shared experts (/ TP {tp})", shared, "shared experts, replicated per rank"),
                             (f"{what} routed experts (/ EP {ep})", routed_gib, "experts per GPU x bytes per expert")):
            terms.append(_term(name, v, f"{s}; {why}"))
            if v is None:
                unknown.append(name + (f": config figures not public ({', '.join(missing)})" if missing else
                                       ": bytes per parameter not public"))

    weights(arch, "target", getattr(model, "routed_experts", None), redundant_experts)
    if speculative:
        darch = getattr(model, "draft_architecture", None)
        weights(darch, "draft", getattr(model, "draft_routed_experts", None), redundant_experts if include_draft else 0)

    bpt, why = kv_bytes_per_token(arch, kv_dtype, tp)
    if bpt is None and getattr(model, "kv_bytes_per_token", None) is not None:
        bpt = model.kv_bytes_per_token
        why = f"catalog kv_bytes_per_token ({(model.figure_sources or {}).get('kv_bytes_per_token', 'models.yaml')})"
    if bpt is None:
        unknown.append(f"KV bytes per token ({why})")
    if speculative:
        dbpt, dwhy = kv_bytes_per_token(getattr(model, "draft_architecture", None), kv_dtype, tp)
        if dbpt is None:
            unknown.append(f"draft KV bytes per token ({dwhy})")
        else:
            notes.append(f"draft KV: {dbpt} bytes per token ({dwhy})")

    if enforce_eager:
        terms.append(_term("CUDA graphs", 0.0, "enforceEager: no CUDA graphs are captured"))
    elif figures is not None and getattr(figures, "cudagraph_gib", None) is not None and \
            getattr(figures, "calibration", None) is not None:
        terms.append(_term("CUDA graphs", figures.cudagraph_gib, f"calibrated: {figures.calibration.log}"))
    else:
        terms.append(_term("CUDA graphs", None, "the engine logs 'Graph capturing finished ... took X GiB'"))
        unknown.append("CUDA graphs: no engine log of this model calibrates it")
    backend = all2all_backend or ALL2ALL_DEFAULT
    routed_all = (arch.n_routed_experts if arch is not None and arch.n_routed_experts else None) or \
        getattr(model, "routed_experts", None)
    buf, bsrc = deepep_buffers(
        backend, env, internode=pods > 1, hidden=arch.hidden_size if arch is not None else None,
        tokens=max_num_batched_tokens, experts=None if routed_all is None else routed_all + redundant_experts,
    ) if expert_parallel else (0.0, "no expert parallelism")
    terms.append(_term(f"all2all buffers ({backend})", buf, bsrc))
    if buf is None:
        unknown.append(f"all2all buffers ({backend})")
    act = getattr(figures, "activation_peak_gib", None) if figures is not None else None
    if act is None:
        unknown.append("activation peak and non-torch memory: no engine log of this model")

    known = [t["gib"] for t in terms if t["gib"] is not None]
    complete = all(t["gib"] is not None for t in terms) and act is not None
    budget = visible_gib * fraction if visible_gib and fraction else None
    out = {"tp": tp, "ep": ep, "terms": terms, "known_gib": round(sum(known), 4),
           "kv_bytes_per_token": bpt, "kv_bytes_source": why,
           "budget_gib": None if budget is None else round(budget, 4),
           "kv_pool_gib": None, "kv_tokens": None, "unknown": unknown, "notes": notes}
    if complete and budget is not None:
        pool = budget - sum(known) - act
        out["kv_pool_gib"] = round(pool, 4)
        out["kv_tokens"] = int(pool * GIB // bpt) if bpt and pool > 0 else 0
    return out
