"""SGLang refusals beyond what the engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml) can verify (helper
mfixS, issue 31): the release's model hooks and model overrides that refuse a line for one model class (config.json's
``architectures[0]``, ``model_type``, DSA ``index_topk`` / ``index_kpool``, a ModelOpt quantization_config, read through
the one reader, core.model_config: the table's examples need a catalogued model or an oracle shape of that class, and
none exists), checks on the line's GPU (catalog/data/hardware.yaml ``sm``; a document without one: the rule does not
run), and option pairs whose JSON value the release decodes itself (--kv-events-config).

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_mfixS_rules_oracle.py (the refused line raises at the cited source, its twin with one fact
flipped is accepted; unit lines: tests/core/test_mfixS_rules.py). Where the release resolves a value before its check
(an unset backend, page size, chunk, EP size), a rule reads the value only when the line gives it.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.rules.sglang_checks_aimS3 import sm_major

SGL = [ENGINE_SGLANG]


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _arch(v: LineView) -> str | None:
    """config.json's ``architectures[0]``, as the release's model hooks read ``hf_config.architectures[0]``."""
    return getattr(v.arch, "architecture", None) if v.arch is not None else None


def _sources(by_release: dict[str, str]) -> dict[str, str]:
    return {f"sglang {k}": s for k, s in by_release.items()}


def _view(r: Any) -> LineView | None:
    v = line_view(r)
    return None if v is None or v.arch is None else v


# The absorbed-MLA classes the deterministic-inference check names (attention_hook.py handle_deterministic_inference)
DETERMINISTIC_MLA_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                           "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                           "Glm4MoeLiteForCausalLM", "Glm5NextForConditionalGeneration")


def off_sm100_refusal(v: LineView) -> str | None:
    """What the release refuses on a GPU outside the SM100 family (Hopper SM90; the catalog's other GPUs, B200,
    B300 and GB300, are SM100/SM103), None if nothing of the line needs that family. Each is the release's own
    test of the value the line gives: is_blackwell (SM100/SM12x) for trtllm_mla, is_sm100 for the others."""
    attn, dec, pre = (v.value(d) for d in ("attention_backend", "decode_attention_backend",
                                           "prefill_attention_backend"))
    if "trtllm_mla" in (attn, dec):
        return "TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). Please use a different backend."
    if "cutedsl_mla" in (attn, dec) and pre != "cutedsl_mla":
        return "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100). Please use a different backend."
    if v.value("quantization") == "nvfp4_online":
        return "--quantization nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs."
    if (pre or attn) == "trtllm_mha" and (_int(v.value("attn_cp_size")) or 1) > 1:
        return ("Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100 (trtllm-gen context "
                "kernel): the SM90/SM120 fmha_v2 prefill path does not implement CP shard masking.")
    if v.value("enable_deterministic_inference") is True and attn == "fa4" \
            and _arch(v) in DETERMINISTIC_MLA_ARCHS:
        return ("Deterministic inference with absorbed-MLA models on the fa4 attention backend requires SM100/SM110.")
    if v.value("enable_mamba_cache_stochastic_rounding") is True and v.value("mamba_ssm_dtype") == "float16" \
            and v.value("mamba_backend") == "triton":
        return ("Stochastic rounding for the Mamba SSM cache with --mamba-backend triton requires SM100 with CUDA >= "
                "12.8; on SM90 use --mamba-backend flashinfer.")
    if v.value("moe_a2a_backend") == "flashinfer_megamoe":
        return "FlashInfer MegaMOE currently requires an SM100-family CUDA device for all supported quantization formats."
    return None


# layernorm_sp_hook.py handle_layernorm_sp / validate_layernorm_sp (0.5.23; 0.5.22 has the Qwen3 part only): with
# --enable-layernorm-sp on a supported class (layers/layernorm_sp.py SP_SUPPORTED_ARCHITECTURES; another class is the
# table's sglang-layernorm-sp-architecture*), the release refuses TP 1, attention DP, speculative decoding (0.5.23:
# but Muse Spark DFLASH) and pipeline parallelism; for Muse Spark (0.5.23) weights that are not modelopt_fp4 (BF16 only with MegaMoE), an A2A backend but flashinfer (MegaMoE: none or flashinfer), a MoE
# runner but flashinfer_trtllm (the default auto too), with MegaMoE --enable-mixed-chunk and a per-rank prefill budget
# above SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK (default 8192), without it SGLANG_MOE_NVFP4_DISPATCH on.
# The rule reads only what the line gives where the release resolves a value first (--quantization of a quantized
# checkpoint, --chunked-prefill-size); the TP/EP pair (TP4/EP4 or TP8/EP8) is left to the release: it accepted
# --tp-size 4 --ep-size 8 (oracle, 2026-12-04), its ep_size being resolved before the check.
MUSE_ARCH = "MuseSparkForConditionalGeneration"
SP_ARCHS = {"0.5.23": ("Qwen3ForCausalLM", MUSE_ARCH), "0.5.22": ("Qwen3ForCausalLM",)}


def _release_key(r: Any) -> str | None:
    return getattr(getattr(r, "version", None), "key", None)


def layernorm_sp_refusal(v: LineView, release: str | None) -> str | None:
    if not v.value("enable_layernorm_sp") or release not in SP_ARCHS or _arch(v) not in SP_ARCHS[release]:
        return None
    muse = _arch(v) == MUSE_ARCH
    megamoe = release == "0.5.23" and bool(v.value("enable_megamoe_for_layernorm_sp"))
    tp = _int(v.value("tp_size")) or 1
    if tp <= 1:
        return "--enable-layernorm-sp requires tp_size > 1."
    if muse:
        quant = v.value("quantization")
        unquantized = not v.given("quantization") and v.arch.quantization is None and v.arch.hf_quant is None
        if (v.given("quantization") and quant != "modelopt_fp4" and not (quant is None and megamoe)) or (
                unquantized and not megamoe):
            return ("Muse Spark --enable-layernorm-sp requires serialized NVFP4 weights with --quantization "
                    "modelopt_fp4, or BF16 weights with --enable-megamoe-for-layernorm-sp.")
        a2a = v.value("moe_a2a_backend")
        if megamoe and a2a not in ("none", "flashinfer"):
            return "Muse MegaMoE prefill requires --moe-a2a-backend none or flashinfer."
        if not megamoe and a2a != "flashinfer":
            return "Muse Spark --enable-layernorm-sp requires --moe-a2a-backend flashinfer."
        if v.value("moe_runner_backend") != "flashinfer_trtllm":
            return "Muse Spark --enable-layernorm-sp requires --moe-runner-backend flashinfer_trtllm."
    if (_int(v.value("attn_dp_size")) or 1) > 1:
        return "--enable-layernorm-sp is not compatible with attention DP."
    spec = v.value("speculative_algorithm")
    if spec is not None and not (release == "0.5.23" and muse and spec == "DFLASH"):
        return "--enable-layernorm-sp supports speculative decoding only with Muse Spark DFLASH (0.5.22: none)."
    if (_int(v.value("pp_size")) or 1) > 1:
        return "--enable-layernorm-sp is not compatible with pipeline parallelism."
    if not muse or release != "0.5.23":
        return None
    if megamoe:
        if v.value("enable_mixed_chunk") is True:
            return "--enable-megamoe-for-layernorm-sp is incompatible with --enable-mixed-chunk."
        cap = v.env_value("SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK", "sglang_env_int", 8192)
        if isinstance(cap, int) and cap <= 0:
            return "Muse MegaMoE requires positive prefill and per-rank token budgets."
        chunk = _int(v.value("chunked_prefill_size"))
        if v.given("chunked_prefill_size") and chunk is not None and chunk > 0 and isinstance(cap, int) \
                and (chunk + tp - 1) // tp > cap:
            return (f"Muse MegaMoE needs {(chunk + tp - 1) // tp} tokens per rank, exceeding capacity {cap}; increase "
                    "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK or reduce --chunked-prefill-size.")
        return None
    # the MoE hook, before, turns an unset SGLANG_MOE_NVFP4_DISPATCH on for modelopt_fp4 on the FlashInfer A2A
    # without --flashinfer-a2a-dispatch-type (moe_hook.py:498-510@0.5.23), and refuses the variable set together with
    # that option; with the option it also moves flashinfer_trtllm to flashinfer_trtllm_routed (refused above)
    if not v.env_set("SGLANG_MOE_NVFP4_DISPATCH") or v.value("flashinfer_a2a_dispatch_type") is not None or \
            v.env_value("SGLANG_MOE_NVFP4_DISPATCH", "sglang_env_bool", False) is True:
        return "Muse Spark --enable-layernorm-sp requires SGLANG_MOE_NVFP4_DISPATCH=0."
    return None


# model_overrides/minimax_m3.py (0.5.23): a MiniMax-M3 class served as minimax_m3_nvfp4 (--quantization
# minimax_m3_nvfp4, or without --quantization a checkpoint declaring mxfp8 with NVFP4 packed experts: its
# quantization_config's moe_quant_algo NVFP4 and moe_quant_format nvfp4-pack-quantized) refuses speculation but DSPARK /
# DFLASH, a page size but 128, and on Blackwell an A2A backend but none / megamoe and a KV cache dtype but auto /
# fp8_e4m3. (DSPARK / DFLASH's own conditions are left to the release.)
MINIMAX_M3_ARCHS = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")


def minimax_m3_nvfp4(v: LineView) -> bool:
    if v.given("quantization"):
        return v.value("quantization") == "minimax_m3_nvfp4"
    raw = getattr(v.arch, "raw", None)
    q = raw.get("quantization_config") if isinstance(raw, dict) else None
    return isinstance(q, dict) and q.get("quant_method") == "mxfp8" and \
        str(q.get("moe_quant_algo", "")).upper() == "NVFP4" and q.get("moe_quant_format") == "nvfp4-pack-quantized"


def minimax_m3_refusal(v: LineView, release: str | None, major: int | None) -> str | None:
    if release != "0.5.23" or _arch(v) not in MINIMAX_M3_ARCHS or not minimax_m3_nvfp4(v):
        return None
    if v.value("speculative_algorithm") not in (None, "DSPARK", "DFLASH"):
        return "M3.1 NVFP4 only supports DSPARK or DFLASH speculation"
    if v.value("speculative_algorithm") is not None:
        return None   # DSPARK / DFLASH: left to the release
    if v.value("page_size") not in (None, 128):
        return "M3.1 NVFP4 requires --page-size 128"
    if major is None or major < 10:
        return None   # off Blackwell the override picks its own backends; an unknown GPU: not decided here
    if v.value("moe_a2a_backend") not in ("none", "megamoe"):
        return "M3.1 NVFP4 requires --moe-a2a-backend none or megamoe"
    if v.value("kv_cache_dtype") not in ("auto", "fp8_e4m3"):
        return "M3.1 NVFP4 requires --kv-cache-dtype fp8_e4m3"
    return None


# cp_tp_group_sharing_hook.py resolve_cp_tp_group_sharing: prefill CP (--enable-prefill-cp, --attn-cp-size > 1) on a
# class whose CP group is its TP group (0.5.23: Glm5NextForConditionalGeneration, Qwen4ExpForConditionalGeneration;
# 0.5.22: Glm5Next) needs --attn-cp-size == --tp-size and --cp-strategy interleave (Glm5Next) / zigzag, and refuses:
# speculation (0.5.23: but on Glm5Next DFLASH or native MTP with top-k 1; 0.5.22: native MTP with top-k 1 only),
# --enable-dsa-cache-layer-split, --dcp-size > 1, --enable-mixed-chunk, --moe-dp-size > 1 (0.5.22: any
# disaggregation mode); 0.5.23 on Qwen4Exp --enable-waterfill, --pp-size > 1, a decode server and EP / an A2A backend
# the line gives, on a Glm5Next PD server a decode side, a transfer backend but mooncake, speculation but DFLASH, PP,
# DP or EP > 1; on a PD prefill server SGLANG_DISAGG_STAGING_BUFFER. The EP size and A2A backend are read only where
# the line gives them (the release reads resolved values).
CP_TP_ARCHS = {"0.5.23": ("Glm5NextForConditionalGeneration", "Qwen4ExpForConditionalGeneration"),
               "0.5.22": ("Glm5NextForConditionalGeneration",)}
GLM5_NEXT = "Glm5NextForConditionalGeneration"


def _gt1(v: LineView, dest: str) -> bool:
    return (_int(v.value(dest)) or 1) > 1


def _mtp_top1(v: LineView) -> bool:
    """Native MTP with top-k 1: EAGLE / NEXTN, no other draft model, top-k unset or 1."""
    alg = v.value("speculative_algorithm")
    return isinstance(alg, str) and alg.upper() in ("EAGLE", "NEXTN") \
        and v.value("speculative_draft_model_path") in (None, v.value("model_path")) \
        and v.value("speculative_eagle_topk") in (None, 1)


def cp_tp_sharing_refusal(v: LineView, release: str | None) -> str | None:
    arch = _arch(v)
    if release not in CP_TP_ARCHS or arch not in CP_TP_ARCHS[release] or v.value("enable_prefill_cp") is not True \
            or not _gt1(v, "attn_cp_size"):
        return None
    cp, tp = _int(v.value("attn_cp_size")), _int(v.value("tp_size"))
    if cp != tp:
        return f"CP-TP group sharing requires --attn-cp-size == --tp-size, got attn_cp_size={cp}, tp_size={tp}."
    strategy = "interleave" if arch == GLM5_NEXT else "zigzag"
    if v.value("cp_strategy") != strategy:
        return f"CP-TP group sharing requires --cp-strategy {strategy}."
    alg = v.value("speculative_algorithm")
    if alg is not None:
        if release == "0.5.22" and (arch != GLM5_NEXT or not _mtp_top1(v)):
            return "CP/TP group sharing only supports native MTP with top-k 1."
        if release == "0.5.23" and arch != GLM5_NEXT:
            return "--speculative-algorithm is not supported with CP-TP group sharing."
        if release == "0.5.23" and alg != "DFLASH" and not _mtp_top1(v):
            return "CP/TP group sharing only supports DFLASH or native MTP with top-k 1."
    mode = v.value("disaggregation_mode")
    bad = {"enable-dsa-cache-layer-split": v.value("enable_dsa_cache_layer_split") is True,
           "dcp-size > 1": _gt1(v, "dcp_size"), "enable-mixed-chunk": v.value("enable_mixed_chunk") is True,
           "moe-dp-size > 1": _gt1(v, "moe_dp_size")}
    if release == "0.5.22":
        bad["disaggregation-mode"] = mode not in (None, "null")
    elif arch == "Qwen4ExpForConditionalGeneration":
        bad |= {"ep-size > 1": v.given("ep_size") and _gt1(v, "ep_size"),
                "moe-a2a-backend": v.given("moe_a2a_backend") and v.value("moe_a2a_backend") != "none",
                "enable-waterfill": v.value("enable_waterfill") is True, "pp-size > 1": _gt1(v, "pp_size"),
                "disaggregation-mode decode": mode == "decode"}
    elif mode not in (None, "null"):
        bad |= {"disaggregation-mode decode": mode == "decode",
                "disaggregation-transfer-backend != mooncake": v.value("disaggregation_transfer_backend") != "mooncake",
                "speculative-algorithm != DFLASH": alg != "DFLASH", "pp-size > 1": _gt1(v, "pp_size"),
                "dp-size > 1": _gt1(v, "dp_size"), "ep-size > 1": v.given("ep_size") and _gt1(v, "ep_size")}
    flag = next((f for f, on in bad.items() if on), None)
    if flag is not None:
        return f"--{flag} is not supported with CP-TP group sharing."
    if release == "0.5.23" and mode == "prefill" and \
            v.env_value("SGLANG_DISAGG_STAGING_BUFFER", "sglang_env_bool", False) is True:
        return "SGLANG_DISAGG_STAGING_BUFFER is not supported with CP-TP group sharing."
    return None


# model_overrides/deepseek_v2.py _deepseek_family_overrides: on a DSA model (configs/model_config.py
# is_deepseek_dsa: a DeepSeek-family class with index_topk in config.json) --dcp-size > 1 refuses HiSparse / HiCache,
# PD disaggregation and --speculative-eagle-topk > 1 (_dsa_dcp_overrides), and on a CUDA GPU a pooled index key
# (config.json index_kpool > 1, get_dsa_index_kpool; default 1).
DSA_FAMILY_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM",
                    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration",
                    "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM",
                    "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")


def dsa_dcp_refusal(v: LineView, major: int | None) -> str | None:
    raw = getattr(v.arch, "raw", None)
    if _arch(v) not in DSA_FAMILY_ARCHS or not isinstance(raw, dict) or raw.get("index_topk") is None \
            or not _gt1(v, "dcp_size"):
        return None
    if v.value("enable_hisparse") is True or v.value("enable_hierarchical_cache") is True:
        return "DSA DCP does not support HiSparse or HiCache."
    if v.value("disaggregation_mode") not in (None, "null"):
        return "DSA DCP does not support PD disaggregation."
    if v.value("speculative_eagle_topk") not in (None, 1):
        return "DSA DCP requires --speculative-eagle-topk 1."
    kpool = raw.get("index_kpool", 1)
    if major is not None and isinstance(kpool, int) and not isinstance(kpool, bool) and kpool > 1:
        return (f"--dcp-size > 1 is not supported for DSA with index_kpool={kpool}: a pooled index key spans "
                "positions owned by different DCP ranks.")
    return None


# overrides.py _dsa_split_backend_resolution / _check_dsa_backend_constraints: on a DSA model on a CUDA GPU (no
# learnable attention sinks: they force flashmla_sparse first), an FP8 (e4m3) KV cache with both DSA backends tilelang
# refuses --dcp-size > 1 and --enable-hisparse. Read where the line gives all three (an unset dtype or backend is
# resolved by the release first).
def dsa_tilelang_refusal(v: LineView, major: int | None) -> str | None:
    raw = getattr(v.arch, "raw", None)
    if major is None or _arch(v) not in DSA_FAMILY_ARCHS or not isinstance(raw, dict) \
            or raw.get("index_topk") is None or raw.get("learnable_sink"):
        return None
    if v.value("kv_cache_dtype") != "fp8_e4m3" or v.value("dsa_prefill_backend") != "tilelang" \
            or v.value("dsa_decode_backend") != "tilelang":
        return None
    if _gt1(v, "dcp_size"):
        return "CUDA TileLang FP8 KV does not support --dcp-size > 1."
    if v.value("enable_hisparse") is True:
        return "CUDA TileLang FP8 KV does not support HiSparse."
    return None


# model_overrides/nemotron_h.py _nemotron_h_overrides: a Nemotron-H class whose config.json quantization_config is
# ModelOpt MIXED_PRECISION (quant_method modelopt, quant_algo MIXED_PRECISION: modelopt_mixed) with W4A16_NVFP4 expert
# layers (quantized_layers, names with ".experts.") refuses an A2A backend but none and a MoE runner but auto /
# marlin. 0.5.23 also refuses, with EPLB or redundant experts (--enable-eplb, --ep-num-redundant-experts > 0,
# --init-expert-location not trivial), --moe-runner-backend flashinfer_trtllm, flashinfer_cutedsl with EPLB and no
# A2A backend, and on NemotronHPuzzleForCausalLM MoE blocks (block_configs) with different routed expert counts.
# Read only without --quantization (the release derives the scheme from config.json).
NEMOTRON_H_ARCHS = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3")


def _w4a16_nvfp4_experts(raw: dict) -> bool:
    q = raw.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "modelopt" or q.get("quant_algo") != "MIXED_PRECISION":
        return False
    layers = q.get("quantized_layers")
    return isinstance(layers, dict) and any(
        isinstance(info, dict) and info.get("quant_algo") == "W4A16_NVFP4" and ".experts." in str(name)
        for name, info in layers.items())


def nemotron_h_refusal(v: LineView, release: str | None) -> str | None:
    raw = getattr(v.arch, "raw", None)
    if _arch(v) not in NEMOTRON_H_ARCHS or not isinstance(raw, dict) or release not in ("0.5.22", "0.5.23"):
        return None
    runner, a2a = v.value("moe_runner_backend"), v.value("moe_a2a_backend")
    if release == "0.5.23" and (v.value("enable_eplb") is True or (_int(v.value("ep_num_redundant_experts")) or 0) > 0
                                or v.value("init_expert_location") not in (None, "trivial")):
        if runner == "flashinfer_trtllm":
            return ("flashinfer_trtllm routes inside the kernel and does not support EPLB or redundant experts on "
                    "Nemotron-H; use --moe-runner-backend flashinfer_trtllm_routed.")
        if v.value("enable_eplb") is True and runner == "flashinfer_cutedsl" and a2a == "none":
            return "flashinfer_cutedsl without an a2a backend does not migrate its expert scales on EPLB rebalance."
        blocks = raw.get("block_configs")
        if _arch(v) == "NemotronHPuzzleForCausalLM" and isinstance(blocks, list):
            counts = {b.get("n_routed_experts") for b in blocks if isinstance(b, dict) and b.get("block_type") == "moe"}
            if len(counts) > 1 and all(isinstance(n, int) for n in counts):
                return ("EPLB and redundant experts need the same routed expert count on every MoE layer, got "
                        f"{sorted(counts)}.")
    if v.given("quantization") or not _w4a16_nvfp4_experts(raw):
        return None
    if a2a != "none":
        return "W4A16_NVFP4 MoE layers require --moe-a2a-backend=none."
    if runner not in ("auto", "marlin"):
        return "W4A16_NVFP4 MoE layers require --moe-runner-backend=marlin."
    return None


# model_hook.py handle_model_specific_adjustments, DSA branch (a DSA model, as dsa_dcp_refusal reads it, on a CUDA
# GPU): --enable-dsa-cache-layer-split on a PD prefill worker with interleave prefill CP needs the mooncake transfer
# backend. (Off a prefill worker, or without interleave prefill CP, the table's entries and the release refuse it.)
def dsa_layer_split_refusal(v: LineView, major: int | None) -> str | None:
    raw = getattr(v.arch, "raw", None)
    if major is None or _arch(v) not in DSA_FAMILY_ARCHS or not isinstance(raw, dict) \
            or raw.get("index_topk") is None or v.value("enable_dsa_cache_layer_split") is not True:
        return None
    if v.value("disaggregation_mode") != "prefill" or v.value("enable_prefill_cp") is not True \
            or v.value("cp_strategy") != "interleave":
        return None
    backend = v.value("disaggregation_transfer_backend")
    if backend != "mooncake":
        return (f"--enable-dsa-cache-layer-split currently only supports the mooncake transfer backend; got "
                f"--disaggregation-transfer-backend {backend!r}.")
    return None


# ------------------------------------------------------------------ attention backends a model class refuses

# handle_model_specific_adjustments (model_hook.py) asserts on the resolved attention backend for these classes. The
# model's override (model_overrides/{olmo2,lfm2,gemma4}.py) only fills a backend the line leaves unset, so a backend
# the line gives is the one the assertion sees. Gemma4 reads both phases: prefill = --prefill-attention-backend, else
# --attention-backend (an unset one becomes the override's trtllm_mha / triton); decode likewise.
GEMMA4_ARCHS = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration")
GEMMA4_BACKENDS = ("trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter")
LFM2_ARCHS = ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM")
_BACKEND_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_hook.py:636-662,682-692,716-722@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_hook.py:630-656,676-686,710-716@0.5.22",
}


def model_backend_refusal(v: LineView) -> str | None:
    """The release's refusal of the line's attention backend for the model's class, None if it has none."""
    arch = _arch(v)
    attn = v.value("attention_backend")
    if arch == "Olmo2ForCausalLM" and attn == "flashinfer":
        return "FlashInfer backend can significantly degrade the performance of Olmo3 models."
    if arch in LFM2_ARCHS and attn == "triton":
        return f"{arch} does not support triton attention backend, as the first layer might not be an attention layer"
    if arch in GEMMA4_ARCHS:
        prefill = v.value("prefill_attention_backend") or attn
        decode = v.value("decode_attention_backend") or attn
        bad = [b for b in (prefill, decode) if b is not None and b not in GEMMA4_BACKENDS]
        if bad:
            return ("Gemma4 only supports trtllm_mha, triton, fa4, ascend, intel_xpu, intel_amx, or aiter attention "
                    f"backend, got prefill={prefill}, decode={decode}")
    return None


@rule("sglang-model-class-attention-backend", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="The model's class does not run on the given attention backend (Olmo2/Olmo3, LFM2, Gemma 4)",
      why="SGLang's model hook refuses FlashInfer attention for Olmo2ForCausalLM (Olmo 3), Triton attention for "
          "Lfm2ForCausalLM / Lfm2MoeForCausalLM (the first layer may be no attention layer), and any attention "
          "backend other than trtllm_mha, triton, fa4, ascend, intel_xpu, intel_amx or aiter for Gemma 4, for "
          "prefill and decode alike.",
      fix="Drop --attention-backend (and --prefill-/--decode-attention-backend) so the model's override picks its "
          "backend, or give one the model supports.",
      source=_BACKEND_SOURCES["0.5.23"], sources=_sources(_BACKEND_SOURCES), no_cel=NO_CEL)
def check_sglang_model_class_attention_backend(r, c):
    v = _view(r)
    if v is None:
        return
    msg = model_backend_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ model overrides refusing parallelism

# model_overrides/ernie45_vl.py and iquest_q1.py (their overrides, run for the class) refuse attention DP
# (attn_dp_enabled_of: --attn-dp-size > 1); IQuest Q1 also any attention backend but fa3, context parallelism
# and pipeline parallelism. Only --attn-dp-size itself is read: the deprecated --enable-dp-attention --dp-size N
# becomes --attn-dp-size in a hook whose order to the overrides the rule does not assume (left to the release).
ERNIE45_VL_ARCH = "Ernie4_5_VLMoeForConditionalGeneration"
IQUEST_ARCHS = ("IQuestQ1ForCausalLM", "IQuestQ1MTP")
_PAR_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_overrides/ernie45_vl.py:14-18@0.5.23; "
              "sglang/srt/arg_groups/model_overrides/iquest_q1.py:19-23,29-30,37-40@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_overrides/ernie45_vl.py:14-18@0.5.22; "
              "sglang/srt/arg_groups/model_overrides/iquest_q1.py:19-23,29-30,37-40@0.5.22",
}


def model_override_refusal(v: LineView) -> str | None:
    arch = _arch(v)
    attn_dp = (_int(v.value("attn_dp_size")) or 1) > 1
    if arch == ERNIE45_VL_ARCH and attn_dp:
        return "ERNIE 4.5 VL MoE does not support DP attention: its attention heads are split over the full TP group."
    if arch not in IQUEST_ARCHS:
        return None
    if any(v.value(d) not in (None, "fa3") for d in ("attention_backend", "prefill_attention_backend",
                                                      "decode_attention_backend")):
        return "IQuestQ1 applies its attention sink from the softmax LSE and requires FA3 attention for both " \
               "prefill and decode."
    if (_int(v.value("attn_cp_size")) or 1) > 1 or (_int(v.value("dcp_size")) or 1) > 1 \
            or v.value("enable_prefill_cp") is True:
        return "IQuestQ1 does not support context parallelism."
    if attn_dp:
        return "IQuest Q1 does not support DP attention."
    if (_int(v.value("pp_size")) or 1) > 1:
        return "IQuest Q1 does not support pipeline parallelism."
    return None


@rule("sglang-model-class-parallelism", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="The model's class refuses attention DP / context / pipeline parallelism (ERNIE 4.5 VL MoE, IQuest Q1)",
      why="SGLang's model overrides refuse attention data parallelism for ERNIE 4.5 VL MoE (its attention heads are "
          "split over the full TP group) and for IQuest Q1, which also refuses context parallelism, pipeline "
          "parallelism and any attention backend but fa3.",
      fix="Drop --attn-dp-size (and for IQuest Q1 --attn-cp-size / --dcp-size / --enable-prefill-cp / --pp-size and "
          "a non-fa3 attention backend).",
      source=_PAR_SOURCES["0.5.23"], sources=_sources(_PAR_SOURCES), no_cel=NO_CEL)
def check_sglang_model_class_parallelism(r, c):
    v = _view(r)
    if v is None:
        return
    msg = model_override_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ prefill context parallelism per model class

# parallel_hook.py: _boundary_parallelism_overrides refuses --attn-cp-size > 1 for Nemotron-H (text model_type
# nemotron_h / nemotron_h_puzzle) and prefill CP with --attn-cp-size > 1 for LongCat-Flash (longcat_flash);
# resolve_prefill_cp refuses MiMo V2 prefill CP off --cp-strategy zigzag, and on a multimodal MiMoV2ForCausalLM
# (the release enables multimodal for it when config.json has both vision_config and audio_config, or with
# --enable-multimodal) without --language-only / --language-model-only.
MIMO_V2_ARCHS = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
_CP_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/parallel_hook.py:76-81,132-148@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/parallel_hook.py:72-77,126-142@0.5.22",
}


def _mimo_multimodal(v: LineView) -> bool | None:
    """Whether the release builds a MiMoV2ForCausalLM as multimodal (None: not known to the rule)."""
    mm = v.value("enable_multimodal")
    if mm is False:
        return False
    raw = getattr(v.arch, "raw", None)
    if not isinstance(raw, dict) or mm is not None:
        return None
    return "vision_config" in raw and "audio_config" in raw


def model_cp_refusal(v: LineView) -> str | None:
    arch = _arch(v)
    mtype = getattr(v.arch, "model_type", None)
    cp = (_int(v.value("attn_cp_size")) or 1) > 1
    prefill_cp = v.value("enable_prefill_cp") is True
    if mtype in ("nemotron_h", "nemotron_h_puzzle") and cp:
        return "Nemotron-H does not support --attn-cp-size > 1"
    if mtype == "longcat_flash" and prefill_cp and cp:
        return "LongCat-Flash does not support --enable-prefill-cp with --attn-cp-size > 1"
    if arch in MIMO_V2_ARCHS and prefill_cp:
        if v.value("cp_strategy") != "zigzag":
            return "MiMo V2 prefill CP only supports --cp-strategy zigzag."
        if arch == "MiMoV2ForCausalLM" and _mimo_multimodal(v) and not v.value("language_only") \
                and not v.value("language_model_only"):
            return "MiMo V2 prefill CP only supports text inference; add --language-only."
    return None


@rule("sglang-model-class-prefill-cp", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="The model's class refuses this context parallelism (Nemotron-H, LongCat-Flash, MiMo V2)",
      why="SGLang refuses --attn-cp-size > 1 for Nemotron-H, prefill CP with --attn-cp-size > 1 for LongCat-Flash, "
          "and MiMo V2 prefill CP off --cp-strategy zigzag or, on a multimodal MiMo V2 checkpoint, without "
          "--language-only.",
      fix="Drop the context parallelism, or for MiMo V2 use --cp-strategy zigzag and --language-only.",
      source=_CP_SOURCES["0.5.23"], sources=_sources(_CP_SOURCES), no_cel=NO_CEL)
def check_sglang_model_class_prefill_cp(r, c):
    v = _view(r)
    if v is None:
        return
    msg = model_cp_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ MiMo V2 fused qkv_proj

# model_hook.py: a MiMoV2ForCausalLM (not --encoder-only) whose config.json says attention_projection_layout
# fused_qkv has its qkv_proj weights interleaved for TP = num_key_value_heads
# (configs/model_config.py get_mimo_v2_fused_qkv_expected_tp_size); the effective attention TP
# (tp / (attn_dp x attn_cp), derive_attn_tp_size) must divide it.
_MIMO_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_hook.py:574-596@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_hook.py:568-590@0.5.22",
}


def mimo_fused_qkv_refusal(v: LineView) -> str | None:
    if _arch(v) != "MiMoV2ForCausalLM" or v.value("encoder_only"):
        return None
    if v.arch.get("attention_projection_layout") != "fused_qkv":
        return None
    expected = _int(v.arch.kv_heads) if v.arch.get("num_key_value_heads") is not None else None
    tp, dp, cp = (_int(v.value(d)) for d in ("tp_size", "attn_dp_size", "attn_cp_size"))
    if not expected or not tp or (dp or 1) < 1 or (cp or 1) < 1 or tp % ((dp or 1) * (cp or 1)):
        return None
    eff = tp // ((dp or 1) * (cp or 1))
    if eff and expected % eff:
        return (f"MiMoV2ForCausalLM requires effective attention TP size {expected} because its fused qkv_proj "
                f"weights are TP={expected}-interleaved; got {eff} (tp_size={tp}, attn_dp_size={dp or 1}, "
                f"attn_cp_size={cp or 1}).")
    return None


@rule("sglang-mimo-v2-fused-qkv-attn-tp", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="MiMo V2 with fused qkv_proj weights needs an attention TP size dividing its KV heads",
      why="A MiMoV2ForCausalLM checkpoint with attention_projection_layout fused_qkv has its qkv_proj weights "
          "interleaved for a TP size of num_key_value_heads; SGLang refuses an effective attention TP size "
          "(--tp-size / (--attn-dp-size x --attn-cp-size)) that does not divide it.",
      fix="Set --tp-size, --attn-dp-size and --attn-cp-size so the effective attention TP size divides the model's "
          "num_key_value_heads.",
      source=_MIMO_SOURCES["0.5.23"], sources=_sources(_MIMO_SOURCES), no_cel=NO_CEL)
def check_sglang_mimo_v2_fused_qkv_attn_tp(r, c):
    v = _view(r)
    if v is None:
        return
    msg = mimo_fused_qkv_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ --load-publish-endpoint and its --kv-events-config

# validation_hook.py: with --load-publish-endpoint given (not blank, not "off") and a --kv-events-config (its absence
# is the table's entry sglang-load-publish-endpoint-needs-kv-events), the release parses the option with pydantic
# (KVEventsConfig.model_validate_json: a JSON object; publisher and endpoint strings, defaults "null" and
# "tcp://*:5557"), refuses it unparseable, with publisher "null" or an empty endpoint, and for "auto" an endpoint
# that is no bindable tcp:// address on a wildcard host (kv_events.py parse_bindable_tcp: *, 0.0.0.0, ::).
# Fields beyond publisher and endpoint, and an explicit load address, are left to the release.
WILDCARD_HOSTS = ("*", "0.0.0.0", "::")
_KV_EVENTS_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:443-445,457-474@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:442-444,456-473@0.5.22",
}


def _tcp_host(endpoint: str) -> str | None:
    """The host of a ``tcp://host:port`` endpoint as written (brackets of an IPv6 host dropped), None when the rule
    does not read it the way the release's NetworkAddress.parse does (no port digits, an unbracketed IPv6 host)."""
    rest = endpoint[len("tcp://"):]
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, sep, port = rest.rpartition(":")
        if ":" in host:
            return None
    return host if sep and port.isdigit() and 0 < int(port) <= 65535 else None


def load_publish_refusal(v: LineView) -> str | None:
    import json

    mode = v.value("load_publish_endpoint")
    mode = mode.strip() if isinstance(mode, str) else ""
    raw = v.value("kv_events_config")
    if not mode or mode.lower() == "off" or not raw or not isinstance(raw, str):
        return None
    try:
        cfg = json.loads(raw)
    except ValueError:
        return f"--kv-events-config is not parseable: {raw!r} is not JSON"
    if not isinstance(cfg, dict):
        return f"--kv-events-config is not parseable: {raw!r} is not a JSON object"
    publisher, endpoint = cfg.get("publisher", "null"), cfg.get("endpoint", "tcp://*:5557")
    if not isinstance(publisher, str) or not isinstance(endpoint, str):
        return None   # pydantic refuses a non-string; the rule does not model its messages
    if publisher == "null" or not endpoint:
        return ("--load-publish-endpoint needs an active --kv-events-config publisher; got publisher='null' or an "
                "empty endpoint.")
    if mode.lower() == "auto":
        if not endpoint.startswith("tcp://"):
            host = ""
        else:
            host = _tcp_host(endpoint)
            if host is None:
                return None
        if host not in WILDCARD_HOSTS:
            return (f"--load-publish-endpoint=auto needs a bindable wildcard-host tcp:// --kv-events-config endpoint "
                    f"to pack after; {endpoint!r} is not one")
    return None


@rule("sglang-load-publish-kv-events-endpoint", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--load-publish-endpoint with a --kv-events-config that publishes nothing it can pack after",
      why="The scheduler's load publisher is advertised through the KV-event publisher: SGLang parses "
          "--kv-events-config as a JSON object and refuses --load-publish-endpoint when it cannot, when its "
          "publisher is 'null' (the default) or its endpoint empty, and for --load-publish-endpoint auto when the "
          "endpoint is not a tcp:// address on a wildcard host (*, 0.0.0.0, ::) the load range can bind after.",
      fix="Give --kv-events-config '{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\"}' (or drop "
          "--load-publish-endpoint).",
      source=_KV_EVENTS_SOURCES["0.5.23"], sources=_sources(_KV_EVENTS_SOURCES), no_cel=NO_CEL)
def check_sglang_load_publish_kv_events_endpoint(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = load_publish_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ watermark and diffusion LLMs

# validation_hook.py: --enable-watermark with --dllm-algorithm is refused (and the dllm hook refuses a model that is
# no diffusion LLM before: sglang/srt/dllm/config.py "Unknown diffusion LLM"); either way the line does not start.
_WATERMARK_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:86-87@0.5.23; sglang/srt/dllm/config.py:72@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:85-86@0.5.22; sglang/srt/dllm/config.py:72@0.5.22",
}


@rule("sglang-watermark-not-with-dllm", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-watermark with a diffusion LLM (--dllm-algorithm)",
      why="SGLang's watermark processor works on autoregressive sampling; it refuses --enable-watermark together "
          "with --dllm-algorithm (diffusion LLM inference).",
      fix="Drop --enable-watermark or --dllm-algorithm.",
      source=_WATERMARK_SOURCES["0.5.23"], sources=_sources(_WATERMARK_SOURCES), no_cel=NO_CEL)
def check_sglang_watermark_not_with_dllm(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_watermark") or v.value("dllm_algorithm") is None:
        return
    yield "spec.extraArgs", "--enable-watermark is not supported with diffusion LLM"


# ------------------------------------------------------------------ features of the SM100 family on another GPU

_SM100_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/overrides.py:1206-1213,1235-1248,1452-1461@0.5.23; "
              "sglang/srt/arg_groups/attention_hook.py:228-237,621-654@0.5.23; "
              "sglang/srt/arg_groups/mamba_hook.py:30,45-52@0.5.23; sglang/srt/arg_groups/moe_hook.py:315-340@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/overrides.py:1156-1163,1198-1211,1415-1420@0.5.22; "
              "sglang/srt/arg_groups/attention_hook.py:227-236,620-653@0.5.22; "
              "sglang/srt/arg_groups/mamba_hook.py:30,45-52@0.5.22; sglang/srt/arg_groups/moe_hook.py:274-292@0.5.22",
}


@rule("sglang-feature-needs-sm100-gpu", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="A backend or feature of the SM100 (Blackwell) family on a Hopper GPU",
      why="SGLang refuses, outside the SM100 family: the trtllm_mla and cutedsl_mla attention backends, "
          "--quantization nvfp4_online, prefill context parallelism on the trtllm_mha prefill backend, "
          "deterministic inference of an absorbed-MLA model on fa4, Mamba SSM stochastic rounding on the triton "
          "Mamba backend, and the flashinfer_megamoe MoE all-to-all backend.",
      fix="Pick a backend the GPU supports (e.g. flashinfer or fa3 attention, --mamba-backend flashinfer), or run "
          "on an SM100-family GPU (B200, B300, GB300).",
      source=_SM100_SOURCES["0.5.23"], sources=_sources(_SM100_SOURCES), no_cel=NO_CEL)
def check_sglang_feature_needs_sm100_gpu(r, c):
    major = sm_major(r)
    if major is None or major >= 10:
        return
    v = line_view(r)
    if v is None:
        return
    msg = off_sm100_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", f"{msg} ({r.hardware.sm})"


# ------------------------------------------------------------------ LayerNorm sequence parallelism

_SP_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/layernorm_sp_hook.py:21-106,128-208@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/layernorm_sp_hook.py:21-31,50-72@0.5.22",
}


@rule("sglang-layernorm-sp-config", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-layernorm-sp with parallelism, speculation or (Muse Spark) MoE settings SGLang refuses",
      why="LayerNorm sequence parallelism shards the sequence over the whole TP group: SGLang refuses it with TP 1, "
          "attention DP, pipeline parallelism and speculative decoding (0.5.23: but Muse Spark DFLASH); for Muse "
          "Spark it also needs modelopt_fp4 weights (BF16 with MegaMoE), the flashinfer A2A "
          "backend (MegaMoE: none or flashinfer), the flashinfer_trtllm MoE runner, and a per-rank MegaMoE prefill "
          "budget within SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK.",
      fix="Drop --enable-layernorm-sp, or the conflicting option (the message names it).",
      source=_SP_SOURCES["0.5.23"], sources=_sources(_SP_SOURCES), no_cel=NO_CEL)
def check_sglang_layernorm_sp_config(r, c):
    v = _view(r)
    if v is None:
        return
    msg = layernorm_sp_refusal(v, _release_key(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ MiniMax-M3 NVFP4

_MINIMAX_SOURCES = {"0.5.23": "sglang/srt/arg_groups/model_overrides/minimax_m3.py:18-58,92-94,103-119@0.5.23"}


@rule("sglang-minimax-m3-nvfp4-options", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="MiniMax-M3 NVFP4 with a page size, A2A backend, KV cache dtype or speculation SGLang refuses",
      why="SGLang serves a MiniMax-M3 checkpoint declaring mxfp8 with NVFP4 packed experts as minimax_m3_nvfp4; it "
          "then refuses speculation other than DSPARK / DFLASH and a page size other than 128, and on Blackwell an "
          "MoE A2A backend other than none / megamoe and a KV cache dtype other than fp8_e4m3.",
      fix="Use --page-size 128, --moe-a2a-backend megamoe (or none), --kv-cache-dtype fp8_e4m3, DSPARK or DFLASH "
          "speculation, or drop the option so the model's override picks it.",
      source=_MINIMAX_SOURCES["0.5.23"], sources=_sources(_MINIMAX_SOURCES), no_cel=NO_CEL)
def check_sglang_minimax_m3_nvfp4_options(r, c):
    v = _view(r)
    if v is None:
        return
    msg = minimax_m3_refusal(v, _release_key(r), sm_major(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ CP-TP group sharing

_CP_TP_SOURCES = {"0.5.23": "sglang/srt/arg_groups/cp_tp_group_sharing_hook.py:29-105@0.5.23",
                  "0.5.22": "sglang/srt/arg_groups/cp_tp_group_sharing_hook.py:25-67@0.5.22"}


@rule("sglang-cp-tp-group-sharing", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="Prefill CP on a CP-TP group sharing model (GLM-5.3 Next, Qwen4 Exp) with a setting it refuses",
      why="On the classes whose prefill CP group is their TP group SGLang needs --attn-cp-size equal to --tp-size and "
          "the class's --cp-strategy, and refuses speculation other than native MTP with top-k 1 (0.5.23 on GLM-5.3 "
          "Next: or DFLASH), DSA cache layer split, decode CP, mixed chunks, MoE DP and, per class, EP, A2A, "
          "Waterfill, PP and PD settings.",
      fix="Set --attn-cp-size to --tp-size and the --cp-strategy the message names, and drop the option it names.",
      source=_CP_TP_SOURCES["0.5.23"], sources=_sources(_CP_TP_SOURCES), no_cel=NO_CEL)
def check_sglang_cp_tp_group_sharing(r, c):
    v = _view(r)
    if v is None:
        return
    msg = cp_tp_sharing_refusal(v, _release_key(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ DSA decode context parallelism

_DSA_DCP_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:18-26,99-100,105,162-168@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:18-26,99-100,105,163-169@0.5.22",
}


@rule("sglang-dsa-dcp-unsupported", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="Decode context parallelism on a DSA model with HiSparse/HiCache, PD, a tree draft or pooled index keys",
      why="On a DeepSeek-family DSA model (index_topk in config.json) SGLang refuses --dcp-size > 1 together with "
          "--enable-hisparse / --enable-hierarchical-cache, a PD disaggregation mode, --speculative-eagle-topk > 1, "
          "and (on a CUDA GPU) with pooled index keys (config.json index_kpool > 1): a pooled key spans positions "
          "owned by different DCP ranks.",
      fix="Drop --dcp-size (or the option the message names).",
      source=_DSA_DCP_SOURCES["0.5.23"], sources=_sources(_DSA_DCP_SOURCES), no_cel=NO_CEL)
def check_sglang_dsa_dcp_unsupported(r, c):
    v = _view(r)
    if v is None:
        return
    msg = dsa_dcp_refusal(v, sm_major(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ DSA TileLang FP8 KV

_TILELANG_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/overrides.py:569-577,601-612,677-692@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/overrides.py:545-553,577-588,653-668@0.5.22",
}


@rule("sglang-dsa-tilelang-fp8-kv", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="TileLang DSA backends with an FP8 KV cache and decode context parallelism or HiSparse",
      why="On a DSA model on a CUDA GPU SGLang's TileLang DSA kernels with an FP8 (e4m3) KV cache support neither "
          "--dcp-size > 1 nor --enable-hisparse.",
      fix="Use other DSA backends (e.g. trtllm on Blackwell, flashmla_kv on Hopper), a bfloat16 KV cache, or drop "
          "--dcp-size / --enable-hisparse.",
      source=_TILELANG_SOURCES["0.5.23"], sources=_sources(_TILELANG_SOURCES), no_cel=NO_CEL)
def check_sglang_dsa_tilelang_fp8_kv(r, c):
    v = _view(r)
    if v is None:
        return
    msg = dsa_tilelang_refusal(v, sm_major(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ Nemotron-H MoE settings

_NEMOTRON_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_overrides/nemotron_h.py:31-80,152-180@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_overrides/nemotron_h.py:31-72@0.5.22",
}


@rule("sglang-nemotron-h-moe-settings", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="Nemotron-H MoE settings SGLang refuses (W4A16_NVFP4 experts, EPLB / redundant experts)",
      why="For a Nemotron-H checkpoint whose ModelOpt mixed-precision config holds W4A16_NVFP4 expert layers SGLang "
          "needs --moe-a2a-backend none and the marlin MoE runner; with EPLB or redundant experts (0.5.23) it refuses "
          "the flashinfer_trtllm runner, flashinfer_cutedsl under EPLB without an A2A backend, and a Puzzle model "
          "whose MoE blocks have different routed expert counts.",
      fix="Use --moe-a2a-backend none and --moe-runner-backend marlin (or auto) for W4A16_NVFP4 experts; "
          "flashinfer_trtllm_routed with EPLB; or drop EPLB / redundant experts.",
      source=_NEMOTRON_SOURCES["0.5.23"], sources=_sources(_NEMOTRON_SOURCES), no_cel=NO_CEL)
def check_sglang_nemotron_h_moe_settings(r, c):
    v = _view(r)
    if v is None:
        return
    msg = nemotron_h_refusal(v, _release_key(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ DSA cache layer split

_LAYER_SPLIT_SOURCES = {"0.5.23": "sglang/srt/arg_groups/model_hook.py:381-396@0.5.23",
                        "0.5.22": "sglang/srt/arg_groups/model_hook.py:375-390@0.5.22"}


@rule("sglang-dsa-cache-layer-split-mooncake", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-dsa-cache-layer-split with a PD transfer backend other than mooncake",
      why="The DSA cache layer split relies on Mooncake's all-CP-rank KV / indexer transfer; SGLang refuses it on a "
          "prefill worker whose --disaggregation-transfer-backend is not mooncake.",
      fix="Use --disaggregation-transfer-backend mooncake, or drop --enable-dsa-cache-layer-split.",
      source=_LAYER_SPLIT_SOURCES["0.5.23"], sources=_sources(_LAYER_SPLIT_SOURCES), no_cel=NO_CEL)
def check_sglang_dsa_cache_layer_split_mooncake(r, c):
    v = _view(r)
    if v is None:
        return
    msg = dsa_layer_split_refusal(v, sm_major(r))
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ EAGLE tree drafts on paged KV

# speculative_hook.py _handle_eagle_family (EAGLE / EAGLE3 / NEXTN / STANDALONE): --speculative-eagle-topk > 1 with
# --page-size > 1 needs the two-pass cascade draft decode only flashinfer, fa3 and triton implement. Read where the line
# gives all three (the release resolves an unset page size or backend first).
_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
_TREE_SOURCES = {"0.5.23": "sglang/srt/arg_groups/speculative_hook.py:1271-1283@0.5.23",
                 "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:1181-1193@0.5.22"}


@rule("sglang-eagle-tree-paged-backend", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="An EAGLE tree draft (top-k > 1) on a paged KV cache with an attention backend that cannot draft it",
      why="With --speculative-eagle-topk > 1 and --page-size > 1 the draft decode runs a shared-prefix pass and a "
          "per-branch pass; only the flashinfer, fa3 and triton attention backends implement it, and SGLang refuses "
          "another --attention-backend (flashmla, trtllm_mla, ...).",
      fix="Use --page-size 1, --speculative-eagle-topk 1, or --attention-backend flashinfer / fa3 / triton.",
      source=_TREE_SOURCES["0.5.23"], sources=_sources(_TREE_SOURCES), no_cel=NO_CEL)
def check_sglang_eagle_tree_paged_backend(r, c):
    v = line_view(r)
    if v is None:
        return
    alg = v.value("speculative_algorithm")
    topk, page, attn = _int(v.value("speculative_eagle_topk")), _int(v.value("page_size")), v.value("attention_backend")
    if not isinstance(alg, str) or alg.upper() not in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"):
        return
    if topk is None or topk <= 1 or page is None or page <= 1 or attn is None or attn in _TREE_BACKENDS:
        return
    yield "spec.extraArgs", (f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {_TREE_BACKENDS}; "
                             f"got attention_backend={attn!r}. Use page_size == 1 or one of those backends.")


# ------------------------------------------------------------------ DeepSeek-V4 flashmla_mega

# deepseek_v4_hook.py apply_deepseek_v4_defaults (model_hook.py runs it for DeepseekV4ForCausalLM, the class the
# release reads DeepSeek-V4.1's config.json as): --dsv4-attn-backend flashmla_mega needs config.json model_type
# deepseek_v41, --device cuda and an SM100-family GPU (0.5.23; 0.5.22 has no such backend).
_MEGA_SOURCES = {"0.5.23": "sglang/srt/arg_groups/deepseek_v4_hook.py:92-99@0.5.23; "
                           "sglang/srt/arg_groups/model_hook.py:258-265@0.5.23"}


@rule("sglang-dsv4-flashmla-mega-needs-v41-sm100", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--dsv4-attn-backend flashmla_mega off DeepSeek-V4.1 or off an SM100-family GPU",
      why="SGLang's flashmla_mega DeepSeek-V4 attention backend is built for DeepSeek-V4.1 (model_type deepseek_v41) "
          "on CUDA SM100/SM103; it refuses it for DeepSeek-V4 and on other devices.",
      fix="Drop --dsv4-attn-backend (auto picks the model's backend) or use another DeepSeek-V4 attention backend.",
      source=_MEGA_SOURCES["0.5.23"], sources=_sources(_MEGA_SOURCES), no_cel=NO_CEL)
def check_sglang_dsv4_flashmla_mega_needs_v41_sm100(r, c):
    v = _view(r)
    if v is None or _release_key(r) != "0.5.23" or v.value("dsv4_attn_backend") != "flashmla_mega":
        return
    raw = getattr(v.arch, "raw", None)
    mtype = raw.get("model_type") if isinstance(raw, dict) else None
    if _arch(v) not in ("DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM") or (
            _arch(v) == "DeepseekV41ForCausalLM" and mtype != "deepseek_v41"):
        return
    device = v.value("device")
    major = sm_major(r)
    if mtype != "deepseek_v41" or (isinstance(device, str) and device != "cuda") or (
            major is not None and major != 10):
        yield "spec.extraArgs", "--dsv4-attn-backend flashmla_mega requires DeepSeek-V4.1 on SM100/SM103."


# ------------------------------------------------------------------ HiSparse on a DSA model

# hisparse_hook.py validate_hisparse (on a DSA model, as dsa_dcp_refusal reads it): a KV cache dtype other than
# bfloat16 / fp8_e4m3 is refused (the DSA KV dtype pass, overrides.py _dsa_kv_cache_dtype_default, reads bf16 as
# bfloat16 and refuses other dtypes first). Its linear-speculation check (hisparse_hook.py:117-122) is left out: on a
# DSA model the page size resolves to 64 on the dsa backend, and the EAGLE tree check (speculative_hook.py:1278@0.5.23)
# refuses a top-k > 1 draft first (oracle, 2026-12-05).
_HISPARSE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/hisparse_hook.py:64-77,153-159@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:538-544@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/hisparse_hook.py:64-77,153-159@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:514-520@0.5.22",
}


@rule("sglang-hisparse-dsa-settings", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="HiSparse on a DSA model with a KV cache dtype other than bfloat16 / fp8_e4m3",
      why="SGLang's HiSparse integration on a DSA model reads a bfloat16 or fp8_e4m3 KV cache only; it refuses "
          "another --kv-cache-dtype.",
      fix="Use --kv-cache-dtype bfloat16 / fp8_e4m3 (or auto), or drop --enable-hisparse.",
      source=_HISPARSE_SOURCES["0.5.23"], sources=_sources(_HISPARSE_SOURCES), no_cel=NO_CEL)
def check_sglang_hisparse_dsa_settings(r, c):
    v = _view(r)
    if v is None or v.value("enable_hisparse") is not True or sm_major(r) is None:
        return
    raw = getattr(v.arch, "raw", None)
    if _arch(v) not in DSA_FAMILY_ARCHS or not isinstance(raw, dict) or raw.get("index_topk") is None:
        return
    if v.value("kv_cache_dtype") not in ("auto", "bf16", "bfloat16", "fp8_e4m3"):
        yield "spec.extraArgs", (f"HiSparse requires one of ('bfloat16', 'fp8_e4m3') KV cache dtypes, but got "
                                 f"--kv-cache-dtype={v.value('kv_cache_dtype')}.")
