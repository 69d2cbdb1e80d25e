"""Weights, KV and memory per rank of any model, from its ``config.json`` (:class:`~gpustack_k3.core.model_config.ModelArch`,
the one reader; docs/design/004-rack-scale.md §5).

Pure arithmetic over the architecture and the rank's layout. Each term carries its source; a term whose inputs the
config does not give (or a layer kind this module does not model) is ``None`` and named in ``unknown`` with the
reason — never estimated from another model — and a sum that needs it is not formed.

**Parameters** (:func:`param_parts`), per layer as the config lays them out: the token mixer (GQA/MHA attention,
MLA, Kimi KDA, Qwen3.5 gated delta-net, Nemotron-H Mamba-2; ``layer_types`` / ``linear_attn_config`` /
``hybrid_override_pattern`` say which layer is which), the FFN (dense, or MoE: routed experts, shared experts,
router; ``first_k_dense_replace`` / ``moe_layer_freq`` / ``mlp_only_layers`` / ``interleave_moe_layer_step`` say
where), embeddings and LM head (``tie_word_embeddings``), the MTP layers apart (loaded only as the MTP draft).

**Bytes per parameter** (:func:`part_bytes`) per part from ``quantization_config`` (fp8 with or without blocks,
mxfp4, compressed-tensors groups, ModelOpt's ``hf_quant_config.json`` incl. MIXED_PRECISION, AWQ/GPTQ) and the
modules each leaves unquantized; unquantized parts at the checkpoint dtype.

**Sharding per GPU** as vLLM 0.33.0 builds the layers (:func:`rank_weights`): linear layers ÷ TP; embeddings and
LM head ÷ TP after padding the vocabulary to 64 (``model_executor/layers/vocab_parallel_embedding.py:36,289-306``);
the fused-MoE layers over TP x DP x PCP devices — sliced without ``--enable-expert-parallel``, whole experts with it
(``model_executor/layers/fused_moe/config.py:1106-1245``), ``(experts + redundant) / EP`` per rank, the first
``remainder`` ranks one more (``fused_moe/expert_map_manager.py:67-69``); PP stages take consecutive layers, the
first the embeddings, the last the LM head. SGLang shards the experts over ``--ep-size`` inside its TP group, so
per GPU the routed experts are ÷ TP either way.

**KV bytes per token** (:func:`kv_bytes_per_token`): MLA ``(kv_lora_rank + qk_rope_head_dim) x MLA layers x dtype
bytes`` (the latent is not split over TP), GQA ``2 x max(1, KV heads / TP) x head_dim x full-attention layers x
bytes``; sliding-window layers hold at most the window per request and linear-attention / Mamba layers a state per
request (:func:`per_request_state`), not a per-token figure.

**DeepEP / NVSHMEM buffers**, from vLLM 0.33.0's all2all managers: none for the default ``allgather_reducescatter``
(``config/parallel.py:220``); ``deepep_high_throughput``: ``VLLM_DEEPEP_BUFFER_SIZE_MB`` (1024) MiB NVLink buffer,
plus as much RDMA buffer when the EP group spans nodes (``distributed/device_communicators/all2all.py:261-283``);
``deepep_low_latency``: the same NVLink buffer plus DeepEP's ``get_low_latency_rdma_size_hint(max_num_batched_tokens,
hidden, ep, experts)`` (``all2all.py:327-352``), transcribed from DeepEP ``csrc/config.hpp:120-188@v1.2.1``
(:func:`deepep_ll_rdma_bytes`).
"""
from __future__ import annotations

import fnmatch
import re
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM, GIB, MIB

KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_ds_mla": 1, "fp8_inc": 1, "bfloat16": 2, "bf16": 2,
                  "float16": 2, "half": 2, "float32": 4, "float": 4}
DTYPE_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2, "float32": 4, "float": 4, "fp32": 4}
DEEPEP_BUFFER_MB_DEFAULT = 1024                       # vllm envs.py:291@0.33.0 VLLM_DEEPEP_BUFFER_SIZE_MB
ALL2ALL_DEFAULT = "allgather_reducescatter"           # vllm config/parallel.py:220@0.33.0
SRC_ALL2ALL = "vllm distributed/device_communicators/all2all.py:261-283@0.33.0"
SRC_ALL2ALL_LL = "vllm distributed/device_communicators/all2all.py:327-352@0.33.0"
SRC_MOE = "vllm model_executor/layers/fused_moe/config.py:1106-1245@0.33.0 (MoE over TP x DP x PCP devices)"
SRC_EXPERT_MAP = "vllm model_executor/layers/fused_moe/expert_map_manager.py:67-69@0.33.0"
VOCAB_PAD = 64   # vllm model_executor/layers/vocab_parallel_embedding.py:36,289-306@0.33.0 (vocab padded to 64, / TP)
PARTS = ("embed", "lm_head", "attention", "dense_ffn", "shared_experts", "routed_experts", "other")


# ------------------------------------------------------------------ the layers

def _gated(a: Any) -> int:
    """Matrices of one FFN: 3 (gate, up, down) for gated activations, 2 for Nemotron-H's relu2."""
    act = str(a.get("mlp_hidden_act") or a.get("hidden_act") or "silu")
    return 2 if act in ("relu2", "gelu", "relu") and a.get("mlp_hidden_act") is not None else 3


def layer_kinds(a: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """(per layer (mixer, ffn), what cannot be laid out). mixer: attention | sliding | mla | kda | gdn | mamba | none;
    ffn: dense | moe | none."""
    n = a.layers
    pattern = a.hybrid_override_pattern
    if isinstance(pattern, list):        # Nemotron 3.5 layers_block_type: the same kinds, spelled out
        spelled = {"mamba": "M", "attention": "*", "moe": "E", "mlp": "-"}
        pattern = "".join(spelled.get(str(t), "?") for t in pattern)
    if isinstance(pattern, str) and pattern:
        kinds = {"M": ("mamba", "none"), "*": ("attention", "none"), "E": ("none", "moe"), "-": ("none", "dense")}
        bad = sorted(set(pattern) - set(kinds))
        if bad:
            return [], [f"hybrid_override_pattern: layer kinds {bad} are not modelled"]
        return [kinds[c] for c in pattern], []
    if n is None:
        return [], ["num_hidden_layers: not in the config"]
    mixers: list[str] = ["mla" if a.mla else "attention"] * n
    lac = a.linear_attn_config
    ratios = a.get("compress_ratios")
    if isinstance(ratios, list) and len(ratios) >= n:
        # DeepSeek-V4: every layer sliding-window attention, most also a KV compressor at its ratio (0: none)
        mixers = [f"dsv4:{int(r)}" for r in ratios[:n]]
    elif isinstance(lac, dict):
        kda = {int(i) - 1 for i in lac.get("kda_layers") or []}      # 1-based in Kimi-K3's config
        for i in kda:
            if 0 <= i < n:
                mixers[i] = "kda"
    elif isinstance(a.layer_types, list) and len(a.layer_types) >= n:
        names = {"full_attention": mixers[0], "attention": mixers[0], "sliding_attention": "sliding",
                 "sliding_window_attention": "sliding", "linear_attention": "gdn", "chunked_attention": "sliding",
                 "deepseek_sparse_attention": mixers[0]}
        unknown = sorted({str(t) for t in a.layer_types[:n] if t not in names})
        if unknown:
            return [], [f"layer_types {unknown}: not modelled"]
        mixers = [names[t] for t in a.layer_types[:n]]
    elif isinstance(a.get("hybrid_layer_pattern"), list):
        mixers = ["sliding" if v else mixers[0] for v in a.get("hybrid_layer_pattern")[:n]]
    ffn = ["dense"] * n
    if a.moe:
        freq = a.moe_layer_freq
        only = set(a.mlp_only_layers or [])
        step = a.interleave_moe_layer_step
        for i in range(n):
            if i < (a.first_dense_layers or 0) or i in only:
                continue
            if isinstance(freq, list):
                ffn[i] = "moe" if i < len(freq) and freq[i] else "dense"
            elif isinstance(step, int) and step > 1:
                ffn[i] = "moe" if (i + 1) % step == 0 else "dense"
            elif isinstance(freq, int) and freq > 1:
                ffn[i] = "moe" if i % freq == 0 else "dense"
            else:
                ffn[i] = "moe"
    return list(zip(mixers, ffn)), []


def _head_dim(a: Any) -> int | None:
    if a.head_dim:
        return a.head_dim
    return a.hidden_size // a.heads if a.hidden_size and a.heads else None


def mixer_params(a: Any, kind: str) -> tuple[int | None, str | None]:
    """(parameters of one token-mixer layer, why None)."""
    h = a.hidden_size
    if kind == "none":
        return 0, None
    if kind.startswith("dsv4:"):
        return _dsv4_attention(a, int(kind[5:]))
    if a.get("o_lora_rank") is not None:
        return None, f"{a.model_type or a.architecture}: grouped output LoRA attention without compress_ratios is not modelled"
    if kind in ("attention", "sliding"):
        d = _head_dim(a)
        heads, kvh = a.heads, a.kv_heads
        if kind == "sliding":
            heads = a.get("swa_num_attention_heads", heads)
            kvh = a.get("swa_num_key_value_heads", kvh)
            d = a.get("swa_head_dim", d)
        if None in (h, heads, kvh, d):
            return None, "attention: num_attention_heads / num_key_value_heads / head_dim not in the config"
        v = a.get("v_head_dim", d) if kind == "attention" else a.get("swa_v_head_dim", d)
        q = h * heads * d * (2 if a.get("attn_output_gate") else 1)
        return q + h * kvh * (d + v) + heads * v * h + 2 * h, None
    if kind == "mla":
        n, nope, rope, v, q_lora, kv = (a.heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim,
                                        a.q_lora_rank, a.kv_lora_rank)
        if None in (h, n, nope, rope, v):
            return None, "MLA: num_attention_heads / qk_nope_head_dim / qk_rope_head_dim / v_head_dim not in the config"
        q = (h * q_lora + q_lora + q_lora * n * (nope + rope)) if q_lora else h * n * (nope + rope)
        p = q + h * (kv + rope) + kv + kv * n * (nope + v) + n * v * h + 2 * h
        if a.get("mla_use_output_gate"):
            p += h * n * v                                  # Kimi-K3: a gate on the attention output
        ih, idim = a.get("index_n_heads"), a.get("index_head_dim")
        if ih and idim:                                     # DSA indexer (DeepSeek-V3.2, GLM-5)
            p += (q_lora or h) * ih * idim + h * idim + h * ih + idim
        return p, None
    if kind == "kda":
        lac = a.linear_attn_config or {}
        heads, d, k = lac.get("num_heads"), lac.get("head_dim"), lac.get("short_conv_kernel_size", 4)
        if None in (h, heads, d):
            return None, "KDA: linear_attn_config num_heads / head_dim not in the config"
        proj = heads * d
        # vllm models/kimi_k3/nvidia/kda.py:631-700@0.33.0: in_proj (q, k, v, g, f_a, beta), f_b, conv1d; o_proj
        return h * (4 * proj + d + heads) + d * proj + 3 * proj * k + proj * h + 2 * h + heads + proj, None
    if kind == "gdn":
        kh, kd = a.get("linear_num_key_heads"), a.get("linear_key_head_dim")
        vh, vd = a.get("linear_num_value_heads"), a.get("linear_value_head_dim")
        k = a.get("linear_conv_kernel_dim", 4)
        if None in (h, kh, kd, vh, vd):
            return None, "gated delta-net: linear_num_key_heads / linear_*_head_dim not in the config"
        conv = 2 * kh * kd + vh * vd
        return h * (2 * kh * kd + 2 * vh * vd) + h * 2 * vh + conv * k + vh * vd * h + 2 * vh + 2 * h, None
    if kind == "mamba":
        heads, hd, state = a.get("mamba_num_heads"), a.get("mamba_head_dim"), a.get("ssm_state_size")
        groups, k = a.get("n_groups", 1), a.get("conv_kernel", 4)
        if None in (h, heads, hd, state):
            return None, "Mamba-2: mamba_num_heads / mamba_head_dim / ssm_state_size not in the config"
        inner = heads * hd
        conv = inner + 2 * groups * state
        return h * (2 * inner + 2 * groups * state + heads) + conv * k + inner * h + 3 * heads + inner + h, None
    return None, f"token mixer {kind!r} is not modelled"


def _dsv4_attention(a: Any, ratio: int) -> tuple[int | None, str | None]:
    """One DeepSeek-V4 attention layer as vLLM builds it (models/deepseek_v4/attention.py:252-290@0.33.0: fused
    wq_a + wkv, wq_b, grouped wo_a, wo_b; compressor.py:262-285: fused wkv + gate, x2 with overlap at ratio 4;
    attention.py:990-1003: the indexer's wq_b and weights_proj). Assumed: the indexer (and its compressor) sit on the
    ratio-4 layers; the hyper-connection mixing weights (hc_mult) are not counted."""
    h, n, d = a.hidden_size, a.heads, a.head_dim
    ql, ol, g = a.q_lora_rank, a.get("o_lora_rank"), a.get("o_groups", 1)
    if None in (h, n, d, ql, ol):
        return None, "DeepSeek-V4 attention: hidden_size / heads / head_dim / q_lora_rank / o_lora_rank not in the config"
    p = h * (ql + d) + ql + d + ql * n * d + (n * d // g) * (g * ol) + g * ol * h + n + 2 * h
    if ratio > 1:
        coff = 2 if ratio == 4 else 1
        p += h * 2 * coff * d + ratio * coff * d + d
    ih, idim = a.get("index_n_heads"), a.get("index_head_dim")
    if ratio == 4 and ih and idim:
        p += ql * ih * idim + h * ih + h * 2 * 2 * idim + 4 * 2 * idim + idim
    return p, None


def _expert_params(a: Any) -> tuple[int | None, str | None]:
    """Parameters of one routed expert in one MoE layer."""
    inter = a.moe_intermediate_size or (a.intermediate_size if a.moe else None)
    he = a.routed_expert_hidden_size or a.hidden_size
    if inter is None or he is None:
        return None, "moe_intermediate_size: not in the config"
    return _gated(a) * he * inter, None


def param_parts(a: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """(parameters per part and per layer, what is unknown, notes). Keys: the :data:`PARTS` totals, ``layers``: per
    layer {part: params}, ``per_expert``: one routed expert's parameters per MoE layer, ``mtp``: the MTP layers'
    parameters (not in the served target), ``experts``."""
    unknown: list[str] = []
    notes: list[str] = []
    h, vocab = a.hidden_size, a.vocab_size
    if h is None:
        unknown.append("hidden_size: not in the config")
    if vocab is None:
        unknown.append("vocab_size: not in the config")
    kinds, why = layer_kinds(a)
    unknown += why
    if a.get("block_configs") is not None:
        unknown.append(f"{a.model_type}: per-layer block_configs (attention / FFN variants per layer) are not modelled")
    if unknown:
        return {}, unknown, notes
    if any(ffn == "moe" for _, ffn in kinds) and not a.experts:
        return {}, ["n_routed_experts: not in the config (the layer layout has MoE layers)"], notes
    g = _gated(a)
    per_expert, ewhy = _expert_params(a) if a.moe else (0, None)
    if ewhy:
        unknown.append(ewhy)
    shared_inter = a.shared_expert_intermediate_size or a.moe_intermediate_size or a.intermediate_size
    shared_n = a.shared_experts if a.shared_experts is not None else (1 if a.shared_expert_intermediate_size else 0)
    if a.shared_experts is None and str(a.model_type or "").startswith("llama4"):
        shared_n = 1        # Llama 4: one shared expert of intermediate_size in every MoE layer (no config key)
    dense_inter = (a.dense_intermediate_size or a.intermediate_size) if a.moe else a.intermediate_size
    layers: list[dict[str, int]] = []
    mixer_cache: dict[str, int | None] = {}
    for mixer, ffn in kinds:
        if mixer not in mixer_cache:
            p, mwhy = mixer_params(a, mixer)
            mixer_cache[mixer] = p
            if mwhy and mwhy not in unknown:
                unknown.append(mwhy)
        row = {"attention": mixer_cache[mixer] or 0, "dense_ffn": 0, "shared_experts": 0, "routed_experts": 0,
               "other": 2 * h}
        if ffn == "dense" or (ffn == "moe" and a.get("enable_moe_block")):
            if dense_inter is None:
                if "intermediate_size: not in the config" not in unknown:
                    unknown.append("intermediate_size: not in the config")
            else:
                row["dense_ffn"] = g * h * dense_inter
        if ffn == "moe":
            row["routed_experts"] = (per_expert or 0) * a.experts
            row["shared_experts"] = shared_n * g * h * (shared_inter or 0)
            row["other"] += h * a.experts                                     # the router
            if a.routed_expert_hidden_size and a.routed_expert_hidden_size != h:
                row["other"] += 2 * h * a.routed_expert_hidden_size          # latent down / up projections
        layers.append(row)
    if unknown:
        return {}, unknown, notes
    tied = a.tie_embeddings is True
    if a.tie_embeddings is None:
        notes.append("tie_word_embeddings not in the config: the LM head is counted apart from the embeddings")
    out: dict[str, Any] = {p: sum(r.get(p, 0) for r in layers) for p in PARTS}
    out["embed"] = vocab * h
    out["lm_head"] = 0 if tied else vocab * h
    out["other"] += h                                                          # the final norm
    out["layers"] = layers
    out["per_expert"] = per_expert or 0
    out["experts"] = a.experts or 0
    moe_row = next((r for r in layers if r["routed_experts"]), None)
    mtp_layer = (moe_row or layers[-1]) if layers else {}
    out["mtp"] = (a.mtp_layers or 0) * (sum(mtp_layer.values()) + 2 * h * h + 2 * h)
    if a.architecture and a.architecture.endswith("ForConditionalGeneration"):
        notes.append(f"{a.architecture}: the vision / audio encoder is not counted (language model only)")
    return out, unknown, notes


def total_params(a: Any) -> int | None:
    """The served language model's parameters (MTP layers excluded), or None where a part is unknown."""
    parts, unknown, _ = param_parts(a)
    return None if unknown else sum(parts[p] for p in PARTS)


# ------------------------------------------------------------------ bytes per parameter

_PREFIXES = ("model.", "model.language_model.", "language_model.model.", "")


def _names(part: str, layer: int) -> list[str]:
    base = {
        "attention": ["self_attn.q_proj", "self_attn.o_proj", "self_attn.kv_a_proj_with_mqa", "linear_attn.out_proj",
                      "mixer.in_proj", "attn.wq_a"],
        "dense_ffn": ["mlp.gate_proj", "mlp.down_proj", "ffn.w1"],
        "shared_experts": ["mlp.shared_experts.gate_proj", "mlp.shared_expert.gate_proj", "ffn.shared_experts.w1",
                           "mixer.shared_experts.up_proj"],
        "routed_experts": ["mlp.experts.0.gate_proj", "mlp.experts", "block_sparse_moe.experts.0.w1", "ffn.experts",
                           "mlp.experts.0.down_proj", "mixer.experts.0.up_proj", "feed_forward.experts"],
    }
    if part == "embed":
        return [p + "embed_tokens" for p in _PREFIXES] + ["embed"]
    if part == "lm_head":
        return ["lm_head", "head"]
    return [f"{p}layers.{layer}.{n}" for p in _PREFIXES for n in base[part]]


def _matches(name: str, pattern: str) -> bool:
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    return (name == pattern or fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
            or name.startswith(pattern + ".") or name.endswith("." + pattern))


def _excluded(names: list[str], patterns: Any) -> bool:
    return isinstance(patterns, list) and any(_matches(n, str(p)) for n in names for p in patterns)


def _algo_bytes(algo: str, group: int | None, block: Any = None) -> float | None:
    a = algo.upper()
    if a in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "W8A8_FP8", "FP8_PB_WO") or a.startswith("FP8"):
        if isinstance(block, list) and len(block) == 2 and all(isinstance(x, int) and x > 0 for x in block):
            return 1 + 4 / (block[0] * block[1])                     # fp32 scale per block
        return 1.0 if a != "FP8_PB_WO" else 1 + 4 / (128 * 128)
    if "NVFP4" in a:
        return 0.5 + 1 / (group or 16)                               # E2M1 + one E4M3 scale per 16
    if "MXFP4" in a:
        return 0.5 + 1 / 32                                          # E2M1 + one E8M0 scale per 32
    if "MXFP8" in a:
        return 1 + 1 / 32                                            # E4M3 + one E8M0 scale per 32
    if a in ("W4A16_AWQ", "W4A8_AWQ", "INT4_AWQ", "W4A16"):
        return 0.5 + 2 / (group or 128)
    return None


def _layer_index(a: Any, part: str) -> int:
    kinds, _ = layer_kinds(a)
    want = {"routed_experts": "moe", "shared_experts": "moe", "dense_ffn": "dense"}.get(part)
    if want:
        idx = [i for i, (_, f) in enumerate(kinds) if f == want]
        return idx[len(idx) // 2] if idx else 0
    idx = [i for i, (m, _) in enumerate(kinds) if m not in ("none",)]
    return idx[len(idx) // 2] if idx else 0


def part_bytes(a: Any) -> tuple[dict[str, tuple[float | None, str]], list[str]]:
    """Per part (bytes per parameter incl. scales, how it was read); the parts whose bytes are unknown."""
    base = DTYPE_BYTES.get(str(a.dtype or "bfloat16").lower())
    dsrc = f"unquantized {a.dtype or 'bfloat16 (dtype not in the config: assumed)'}"
    if base is None:
        return {p: (None, f"dtype {a.dtype!r}") for p in PARTS}, [f"bytes per parameter: dtype {a.dtype!r} not read"]
    out: dict[str, tuple[float | None, str]] = {p: (float(base), dsrc) for p in PARTS}
    q, hq = a.quant_config or {}, a.hf_quant
    method = a.quantization
    linear = ("attention", "dense_ffn", "shared_experts", "routed_experts")
    unknown: list[str] = []

    def names(part: str) -> list[str]:
        return _names(part, _layer_index(a, part))

    if method is None and hq is None:
        return out, unknown
    if isinstance(q.get("config_groups"), dict):                     # compressed-tensors (and ModelOpt written so)
        groups = [g for g in q["config_groups"].values() if isinstance(g, dict)]
        w = (groups[0].get("weights") or {}) if groups else {}
        bits, gs, typ = w.get("num_bits"), w.get("group_size"), w.get("type")
        fmt = str(w.get("format") or q.get("format") or "")
        if not isinstance(bits, int):
            return out, ["bytes per parameter: quantization_config.config_groups weights.num_bits not read"]
        if bits == 4 and typ == "float":
            bpp = 0.5 + (1 / 32 if "mxfp4" in fmt or gs == 32 else 1 / (gs or 16))
        elif bits == 8 and typ == "float":
            blk = w.get("block_structure")
            bpp = 1 + (4 / (blk[0] * blk[1]) if isinstance(blk, list) and len(blk) == 2 else 0)
        else:
            bpp = bits / 8 + (2 / gs if isinstance(gs, int) and gs > 0 else 0)
        src = (f"quantization_config {q.get('quant_method')}: {bits}-bit {typ} weights, group {gs}"
               f"{' (' + fmt + ')' if fmt else ''}")
        for p in linear:
            if not _excluded(names(p), q.get("ignore")):
                out[p] = (bpp, src)
        if not _excluded(names("lm_head"), q.get("ignore")) and "Linear" in str(groups[0].get("targets")):
            out["lm_head"] = (bpp, src)
        return out, unknown
    if method == "fp8":
        blk = q.get("weight_block_size")
        bpp = _algo_bytes("FP8", None, blk)
        src = f"quantization_config fp8{f' block {blk}' if blk else ''}: 1 byte + fp32 scales"
        skip = (q.get("modules_to_not_convert") or []) + (q.get("ignored_layers") or [])
        for p in linear:
            if not _excluded(names(p), skip):
                out[p] = (bpp, src)
        if a.get("expert_dtype") == "fp4" and a.get("compress_ratios") is not None:
            # DeepSeek-V4: expert_dtype fp4 makes the fp8 checkpoint's experts MXFP4
            # (vllm models/deepseek_v4/quant_config.py:60-109@0.33.0, Mxfp4MoEMethod)
            out["routed_experts"] = (0.5 + 1 / 32, "expert_dtype fp4: MXFP4 experts (E2M1 + one E8M0 scale per 32)")
        return out, unknown
    if method == "mxfp4":
        # vLLM's Mxfp4Config quantizes the fused-MoE experts only (model_executor/layers/quantization/mxfp4.py)
        if not _excluded(names("routed_experts"), q.get("modules_to_not_convert")):
            out["routed_experts"] = (0.5 + 1 / 32, "quantization_config mxfp4: E2M1 + one E8M0 scale per 32 (experts)")
        return out, unknown
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        bits, gs = q.get("bits") or q.get("w_bit"), q.get("group_size") or q.get("q_group_size")
        if not isinstance(bits, int):
            return out, [f"bytes per parameter: {method} bits not in quantization_config"]
        bpp = bits / 8 + (2 + bits / 8) / (gs if isinstance(gs, int) and gs > 0 else 128)
        for p in linear:
            if not _excluded(names(p), q.get("modules_to_not_convert")):
                out[p] = (bpp, f"quantization_config {method}: {bits}-bit, group {gs}, fp16 scales and zeros")
        return out, unknown
    if method == "modelopt" or hq is not None:
        hq = hq or q
        algo = str(hq.get("quant_algo") or "")
        gs = hq.get("group_size")
        src = "hf_quant_config.json" if a.hf_quant is not None else "quantization_config (modelopt)"
        if algo.upper() == "MIXED_PRECISION":
            layers = hq.get("quantized_layers") if isinstance(hq.get("quantized_layers"), dict) else {}
            for p in linear + ("lm_head",):
                nm = names(p)
                hit = next((v for k, v in layers.items() for n in nm
                            if isinstance(v, dict) and (n == k or n.startswith(k + ".") or n.endswith("." + k)
                                                        or k.endswith(n.split("layers.", 1)[-1]))), None)
                if hit is not None and not _excluded(nm, hq.get("exclude_modules")):
                    bpp = _algo_bytes(str(hit.get("quant_algo", "")), hit.get("group_size"))
                    if bpp is None:
                        unknown.append(f"bytes per parameter of {p}: quant_algo {hit.get('quant_algo')!r} not read")
                        out[p] = (None, src)
                    else:
                        out[p] = (bpp, f"{src} MIXED_PRECISION: {hit.get('quant_algo')}")
            return out, unknown
        bpp = _algo_bytes(algo, gs)
        if bpp is None:
            return {p: (None, src) for p in PARTS}, [f"bytes per parameter: quant_algo {algo!r} ({src}) not read"]
        for p in linear:
            if not _excluded(names(p), hq.get("exclude_modules")):
                out[p] = (bpp, f"{src} {algo}")
        return out, unknown
    return {p: (None, f"quant_method {method}") for p in PARTS}, [
        f"bytes per parameter: quant_method {method!r} is not read here"]


# ------------------------------------------------------------------ per rank

def _stage_layers(n: int, pp: int) -> list[range]:
    """Consecutive layers per PP stage, the remainder on the last stages (vllm distributed/utils.py get_pp_indices)."""
    base, rem = divmod(n, pp)
    sizes = [base + (1 if i >= pp - rem else 0) for i in range(pp)]
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def _vocab_rows(vocab: int, tp: int) -> int:
    padded = -(-vocab // VOCAB_PAD) * VOCAB_PAD
    return -(-padded // tp)


def rank_weights(a: Any, *, tp: int, pp: int = 1, dp: int = 1, pcp: int = 1, expert_parallel: bool = False,
                 engine: str = ENGINE_VLLM, redundant_experts: int = 0, mtp_draft: bool = False) -> dict[str, Any]:
    """Weights of the fullest GPU of each PP stage, term by term, from the config alone. ``unknown`` names a term that
    cannot be derived (then ``gib`` is None). ``params_per_gpu`` (per stage, the fullest rank) and ``params_all_gpus``
    (summed over every GPU of the instance: TP x PP x DP x PCP) let a caller check the sharding."""
    parts, unknown, notes = param_parts(a)
    bpp, bunknown = part_bytes(a) if not unknown else ({}, [])
    unknown = unknown + bunknown
    out: dict[str, Any] = {"tp": tp, "pp": pp, "dp": dp, "expert_parallel": expert_parallel, "stages": [],
                           "unknown": unknown, "notes": notes, "gib": None, "worst_stage": None,
                           "params_all_gpus": None, "ep": 1}
    if unknown:
        return out
    moe_devices = tp * dp * pcp if engine == ENGINE_VLLM else tp
    use_ep = expert_parallel and moe_devices > 1 if engine == ENGINE_VLLM else expert_parallel
    ep = moe_devices if use_ep else 1
    out["ep"] = ep
    experts = parts["experts"]
    physical = experts + (redundant_experts if use_ep else 0)
    if a.moe:
        if use_ep:
            local = -(-physical // ep)
            notes.append(f"{experts} routed experts{f' + {redundant_experts} redundant' if redundant_experts and use_ep else ''}"
                         f" / EP {ep}: {local} on the fullest rank ({SRC_EXPERT_MAP})")
        else:
            notes.append(f"routed experts sliced over {moe_devices} devices (TP {tp} x DP {dp} x PCP {pcp}: {SRC_MOE})"
                         if engine == ENGINE_VLLM else f"routed experts / TP {tp} (SGLang EP inside the TP group)")
    vocab_rows = _vocab_rows(a.vocab_size, tp)
    all_params = 0.0
    worst = None
    for s, rng in enumerate(_stage_layers(len(parts["layers"]), pp)):
        rows = [parts["layers"][i] for i in rng]
        p: dict[str, float] = {k: sum(r[k] for r in rows) / tp for k in ("attention", "dense_ffn", "shared_experts",
                                                                        "other")}
        routed = sum(r["routed_experts"] for r in rows)
        moe_layers = sum(1 for r in rows if r["routed_experts"])
        p["routed_experts"] = (moe_layers * parts["per_expert"] * -(-physical // ep)) if use_ep else routed / moe_devices
        p["embed"] = vocab_rows * a.hidden_size if s == 0 else 0
        p["lm_head"] = vocab_rows * a.hidden_size if s == pp - 1 and parts["lm_head"] else 0
        if s == pp - 1:
            p["other"] += a.hidden_size / tp                                   # the final norm
        if mtp_draft and s == pp - 1 and parts["mtp"]:
            mtp = parts["mtp"]
            p["mtp draft"] = mtp / tp
        # every GPU of the stage: the dense parts once per TP shard of every DP / PCP replica; the routed experts
        # once per physical expert (EP) or once in slices over the MoE devices
        replicas = dp * pcp if engine == ENGINE_VLLM else 1
        all_params += (sum(v for k, v in p.items() if k != "routed_experts") * tp * replicas
                       + (moe_layers * parts["per_expert"] * physical if use_ep else routed))
        terms = []
        for k, v in p.items():
            b = bpp.get(k, bpp["other"])[0] if k != "mtp draft" else bpp["routed_experts"][0]
            why = bpp.get(k, bpp["other"])[1] if k != "mtp draft" else "MTP layers at the routed experts' bytes"
            shard = {"routed_experts": f"/ EP {ep}" if use_ep else f"/ {moe_devices} devices",
                     "embed": f"/ TP {tp}, vocab padded to {VOCAB_PAD}", "lm_head": f"/ TP {tp}, vocab padded"}.get(
                         k, f"/ TP {tp}")
            terms.append({"term": f"{k} ({shard})", "params": int(v), "gib": round(v * b / GIB, 4),
                          "source": f"{a.source}; {why}"})
        gib = sum(t["gib"] for t in terms)
        st = {"stage": s, "layers": [rng.start, rng.stop - 1] if len(rng) else [], "terms": terms,
              "gib": round(gib, 4), "params_per_gpu": int(sum(p.values()))}
        out["stages"].append(st)
        if worst is None or gib > out["stages"][worst]["gib"]:
            worst = s
    out["worst_stage"] = worst
    out["gib"] = out["stages"][worst]["gib"] if worst is not None else None
    out["params_all_gpus"] = int(all_params)
    out["params_total"] = sum(parts[k] for k in PARTS)
    return out


def kv_bytes_per_token(a: Any, kv_dtype: str | None, tp: int) -> tuple[int | None, str]:
    """KV bytes per token on one GPU from the attention geometry of the full-attention layers (None: not computable,
    with the reason). ``auto``: the checkpoint dtype."""
    d = (kv_dtype or "auto").lower()
    b = DTYPE_BYTES.get(str(a.dtype or "bfloat16").lower()) if d == "auto" else KV_DTYPE_BYTES.get(d)
    if b is None:
        return None, f"KV dtype {kv_dtype!r} has no byte size here"
    if a is None:
        return None, "no config.json"
    kinds, why = layer_kinds(a)
    if why:
        return None, "; ".join(why)
    if kinds and kinds[0][0].startswith("dsv4:"):
        ratios = [int(m[5:]) for m, _ in kinds]
        d, idim = a.head_dim or 0, a.get("index_head_dim") or 0
        per = sum(d * b / r for r in ratios if r > 1) + sum(idim / 4 for r in ratios if r == 4)
        return int(round(per)), (f"DeepSeek-V4 compressed KV: head_dim {d} x {b} B / ratio per compressed layer "
                                 f"({sum(1 for r in ratios if r > 1)} layers) + the indexer's {idim} fp8 keys / 4 on the "
                                 "ratio-4 layers (assumed; the sliding window is per request)")
    if a.mla:
        if a.qk_rope_head_dim is None:
            return None, "qk_rope_head_dim not in the config"
        n = sum(1 for m, _ in kinds if m == "mla")
        return (a.kv_lora_rank + a.qk_rope_head_dim) * n * b, \
            f"MLA latent (kv_lora_rank + qk_rope_head_dim) x {n} MLA layers x {b} B (not split over TP)"
    dh = a.get("global_head_dim", _head_dim(a))                       # Gemma 4: the full-attention layers' own
    kvh = a.get("num_global_key_value_heads", a.kv_heads)
    if kvh is None or dh is None:
        return None, "num_key_value_heads / head_dim not in the config"
    n = sum(1 for m, _ in kinds if m == "attention")
    heads = max(1, kvh // max(1, tp))
    v = a.get("v_head_dim", dh)
    return heads * (dh + v) * n * b, (f"(K + V) x max(1, {kvh} KV heads / TP {tp}) x head_dim x {n} "
                                     f"full-attention layers x {b} B")


def per_request_state(a: Any, kv_dtype: str | None, tp: int) -> tuple[float | None, str]:
    """Bytes one request holds whatever its length: sliding-window layers (the window) and linear-attention / Mamba
    layers (their recurrent and convolution state), per GPU."""
    kinds, why = layer_kinds(a)
    if why:
        return None, "; ".join(why)
    d = (kv_dtype or "auto").lower()
    b = DTYPE_BYTES.get(str(a.dtype or "bfloat16").lower(), 2) if d == "auto" else KV_DTYPE_BYTES.get(d, 2)
    total, parts = 0.0, []
    n_v4 = sum(1 for m, _ in kinds if m.startswith("dsv4:"))
    if n_v4:
        w = a.sliding_window or 128
        total += n_v4 * w * (a.head_dim or 0) * b
        parts.append(f"{n_v4} DeepSeek-V4 layers x {w}-token window")
    n_sw = sum(1 for m, _ in kinds if m == "sliding")
    if n_sw:
        w = a.sliding_window or a.get("attention_chunk_size")
        dh = a.get("swa_head_dim", _head_dim(a))
        kvh = a.get("swa_num_key_value_heads", a.kv_heads)
        if not w or not dh or not kvh:
            return None, "sliding-window layers: sliding_window / heads not in the config"
        total += 2 * max(1, kvh // tp) * dh * w * n_sw * b
        parts.append(f"{n_sw} sliding-window layers x {w} tokens")
    n_kda = sum(1 for m, _ in kinds if m == "kda")
    if n_kda:
        lac = a.linear_attn_config or {}
        heads, dd, k = lac.get("num_heads", 0), lac.get("head_dim", 0), lac.get("short_conv_kernel_size", 4)
        total += n_kda * (max(1, heads // tp) * dd * dd * 4 + 3 * heads * dd // tp * (k - 1) * 2)
        parts.append(f"{n_kda} KDA layers (fp32 recurrent state + conv state)")
    n_gdn = sum(1 for m, _ in kinds if m == "gdn")
    if n_gdn:
        kh, kd = a.get("linear_num_key_heads", 0), a.get("linear_key_head_dim", 0)
        vh, vd = a.get("linear_num_value_heads", 0), a.get("linear_value_head_dim", 0)
        k = a.get("linear_conv_kernel_dim", 4)
        total += n_gdn * (max(1, vh // tp) * kd * vd * 4 + (2 * kh * kd + vh * vd) // tp * (k - 1) * 2)
        parts.append(f"{n_gdn} gated delta-net layers")
    n_m = sum(1 for m, _ in kinds if m == "mamba")
    if n_m:
        heads, hd, st = a.get("mamba_num_heads", 0), a.get("mamba_head_dim", 0), a.get("ssm_state_size", 0)
        g, k = a.get("n_groups", 1), a.get("conv_kernel", 4)
        total += n_m * (max(1, heads // tp) * hd * st * 4 + (heads * hd + 2 * g * st) // tp * (k - 1) * 2)
        parts.append(f"{n_m} Mamba-2 layers")
    return total, ", ".join(parts) or "none"


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


def rank_memory(*, arch: Any, figures: Any, tp: int, dp: int, expert_parallel: bool, pods: int,
                kv_dtype: str | None, enforce_eager: bool, redundant_experts: int, include_draft: bool,
                speculative: bool, all2all_backend: str | None, env: dict[str, str], visible_gib: float | None,
                fraction: float | None, max_num_batched_tokens: int | None = None, draft_arch: Any = None,
                mtp: bool = False, engine: str = ENGINE_VLLM, pp: int = 1, kv_bytes_fallback: tuple[int, str] | None = None,
                ) -> dict[str, Any]:
    """The memory of one GPU of one DP rank, term by term (module docstring). ``arch``: the target's ModelArch;
    ``draft_arch``: a separate draft's (DSpark/EAGLE), ``mtp``: the draft is the target's own MTP layers;
    ``figures``: the catalog's calibrated ModelEngineFigures for the engine (CUDA graphs, activations) or None;
    ``kv_bytes_fallback``: (bytes, source) of a published KV-per-token figure: it wins over the config's geometry."""
    terms: list[dict[str, Any]] = []
    unknown: list[str] = []
    notes: list[str] = []
    moe_devices = tp * dp if engine == ENGINE_VLLM else tp
    ep = moe_devices if expert_parallel else tp

    def weights(a: Any, what: str, redundant: int, with_mtp: bool) -> None:
        if a is None:
            terms.append(_term(f"{what} weights", None, "no config.json"))
            unknown.append(f"{what} weights: no config.json for it")
            return
        if a.experts and expert_parallel:
            per = (a.experts + (redundant if expert_parallel else 0)) / ep
            notes.append(f"{what}: {a.experts} routed experts{f' + {redundant} redundant' if redundant else ''} / EP "
                         f"{ep} = {per:g} per GPU")
        w = rank_weights(a, tp=tp, pp=pp, dp=dp if engine == ENGINE_VLLM else 1, expert_parallel=expert_parallel,
                         engine=engine, redundant_experts=redundant, mtp_draft=with_mtp)
        if w["unknown"]:
            terms.append(_term(f"{what} weights", None, a.source))
            unknown.extend(f"{what} weights: {u}" for u in w["unknown"])
            return
        notes.extend(f"{what}: {n}" for n in w["notes"])
        for t in w["stages"][w["worst_stage"]]["terms"]:
            terms.append(_term(f"{what} {t['term']}", t["gib"], t["source"]))

    weights(arch, "target", redundant_experts, speculative and mtp)
    if speculative and not mtp:
        weights(draft_arch, "draft", redundant_experts if include_draft else 0, False)

    # a published figure (catalog kv_bytes_per_token) over one derived from an assumed config
    bpt, why = kv_bytes_fallback if kv_bytes_fallback is not None else (
        kv_bytes_per_token(arch, kv_dtype, tp) if arch is not None else (None, "no config.json"))
    if bpt is None:
        unknown.append(f"KV bytes per token ({why})")
    if speculative and not mtp:
        dbpt, dwhy = kv_bytes_per_token(draft_arch, kv_dtype, tp) if draft_arch is not None else (None, "no config.json")
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
    experts_all = arch.experts if arch is not None else None
    buf, bsrc = deepep_buffers(
        backend, env, internode=pods > 1, hidden=arch.hidden_size if arch is not None else None,
        tokens=max_num_batched_tokens, experts=None if experts_all is None else experts_all + redundant_experts,
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
