"""SGLang refusals of the aimed lines (tools/engine_oracle/aimed/*.yaml) the engine-check table
(gpustack_k3/catalog/data/checks/sglang.yaml) cannot express (helper am10s, issue 31):

- UNO speculative decoding (``_handle_uno``): a chain of checks with derived figures (the tree capacity and the
  parent-list width of F = num_steps + 1 and K = topk against Q = num_draft_tokens), and its FA3 requirement, where
  the backend SGLang picks when the line names none depends on the GPU and the model (a warning then);
- the tokenspeed_mla attention backend on a GPU outside Blackwell (the line's GPU, catalog/data/hardware.yaml);
- 0.5.22's KV cache sharding on a DSA model (config.json's architectures[0] and index_topk, the release's
  is_deepseek_dsa).

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_am10s_rules_oracle.py (the refused line raises at the cited source, its twin is accepted;
the product's side: tests/core/test_am10s_rules.py)."""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.model_limits import model_max_len
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_aimS3 import sm_major
from gpustack_k3.core.rules.sglang_checks_mfixS import _int
from gpustack_k3.core.rules.sglang_checks_mfixS import _release_key as _release
from gpustack_k3.core.rules.sglang_checks_smiss7 import NEMOTRON_H_ARCHS
from gpustack_k3.core.rules.topology import _is_hybrid

SGL = [ENGINE_SGLANG]


# ------------------------------------------------------------------ UNO speculative decoding

# SpeculativeAlgorithm.handle_server_args runs _handle_uno for --speculative-algorithm UNO (upper-cased by
# handle_speculative_decoding); 0.5.23 first resets the algorithm to None under --enable-return-aux-hidden-states
# (validation_hook.py:748-752@0.5.23)
_UNO_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:449-608@0.5.23; "
              "sglang/srt/speculative/spec_info.py:246,258@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:432-591@0.5.22; "
              "sglang/srt/speculative/spec_info.py:245,257@0.5.22",
}


def _is_uno(v: LineView) -> bool:
    algo = v.value("speculative_algorithm")
    return isinstance(algo, str) and algo.upper() == "UNO" and not v.value("enable_return_aux_hidden_states")


def uno_refusal(v: LineView) -> str | None:
    """The first check of ``_handle_uno`` the line fails, as the release words it (None: none that the line decides;
    the FA3 check is :func:`uno_backends`)."""
    device = v.value("device")
    if isinstance(device, str) and not device.startswith("cuda"):
        return "UNO only supports CUDA."
    if v.value("speculative_draft_model_path") is not None:
        return "UNO reuses the target model and does not accept --speculative-draft-model-path."
    if v.value("uno_lora_path") is None:
        return "UNO requires --uno-lora-path."
    if v.value("enable_deterministic_inference"):
        return ("UNO does not support --enable-deterministic-inference because its sampling path does not use "
                "per-request seeds.")
    if v.value("enable_strict_thinking"):
        return "UNO does not support --enable-strict-thinking because it requires grammar decoding."
    q = v.value("speculative_num_draft_tokens")
    if q is None or (_int(q) is not None and q < 1):
        return ("UNO requires --speculative-num-draft-tokens to be a positive integer denoting the linear width or "
                "tree verify width Q.")
    q = _int(q)
    topk = v.value("speculative_eagle_topk")
    k = 1 if topk is None else _int(topk)
    if q is None or k is None:
        return None
    if k < 1:
        return f"UNO requires --speculative-eagle-topk to be at least 1, got {k}."
    if k > 1:
        steps = v.value("speculative_num_steps")
        if steps is None:
            return ("UNO tree mode requires --speculative-num-steps so its draft width F can be derived as "
                    "speculative_num_steps + 1.")
        steps = _int(steps)
        if steps is None:
            return None
        if steps < 1:
            return f"UNO tree mode requires --speculative-num-steps to be positive, got {steps}."
        f = steps + 1
        if q < f:
            return f"UNO tree mode requires Q >= F; got Q={q}, F={f}."
        if q > 128:
            return f"UNO tree mode currently supports at most Q=128 verify nodes, got Q={q}."
        if q * k > 2048:
            return f"UNO tree mode currently supports Q*K <= 2048; got Q*K={q}*{k}={q * k}."
        capacity, at_depth = 1, 1
        for _ in range(steps):
            at_depth *= k
            capacity += at_depth
            if capacity >= q:
                break
        if q > capacity:
            return (f"UNO tree mode cannot build the requested Q from F and K: Q={q} exceeds capacity={capacity} "
                    f"for F={f}, K={k}.")
        parent = k * max(steps - 1, 0) + 1
        if q - 1 > parent:
            return (f"UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: Q-1={q - 1} "
                    f"exceeds K*(F-2)+1={parent} for F={f}, K={k}.")
        if v.value("enable_pdmux"):
            return "UNO tree mode does not yet support PDMux."
        if v.value("enable_two_batch_overlap"):
            return "UNO tree mode does not yet support two-batch overlap."
        if v.value("speculative_accept_threshold_single") != 1.0 or v.value("speculative_accept_threshold_acc") != 1.0:
            return ("UNO tree mode reuses EAGLE target-only sampling and requires both speculative accept thresholds "
                    "to be 1.0.")
    tp, pp = _int(v.value("tp_size")), _int(v.value("pp_size"))
    if (tp is not None and tp != 1) or (pp is not None and pp != 1):
        return "UNO requires TP=PP=1."
    dp, cp = _int(v.value("attn_dp_size")), _int(v.value("attn_cp_size"))
    # an Elastic EP scale joiner also counts as attention DP (ep_scale_joiner_of): left to the release
    if (dp is not None and dp > 1) or (cp is not None and cp != 1):
        return "UNO does not support DP attention or context parallelism."
    if v.value("enable_lora") or v.value("lora_paths"):
        return "UNO does not support public Multi-LoRA serving."
    if v.value("speculative_use_rejection_sampling"):
        return ("UNO manages its own stochastic verification and does not use "
                "--speculative-use-rejection-sampling.")
    return None


def uno_backends(v: LineView) -> tuple[str | None, str | None]:
    """The (prefill, decode) attention backends the line gives (attention_backends_of: a phase's own option, else
    --attention-backend); None for a phase the line leaves to SGLang's pick."""
    attn = v.value("attention_backend")
    return v.value("prefill_attention_backend") or attn, v.value("decode_attention_backend") or attn


@rule("sglang-uno-speculative-config", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="UNO speculative decoding with an option or figure SGLang refuses",
      why="UNO reuses the target model with its own LoRA draft: SGLang refuses it off CUDA, with a draft model, "
          "without --uno-lora-path, with deterministic inference or strict thinking, without a positive "
          "--speculative-num-draft-tokens Q, with a top-k below 1; in tree mode (top-k K > 1) without a positive "
          "--speculative-num-steps (F = steps + 1), Q < F, Q > 128, Q*K > 2048, Q above the tree's capacity or "
          "its parent list K*(F-2)+1 + 1, with PDMux, two-batch overlap or accept thresholds other than 1.0; and "
          "with TP or PP above 1, attention DP or context parallelism, Multi-LoRA, rejection sampling, or an "
          "attention backend other than fa3 for prefill or decode.",
      fix="Follow the message: give --uno-lora-path, a valid Q/F/K, TP=PP=1, fa3 attention; drop the option it "
          "names.",
      source=_UNO_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _UNO_SOURCES.items()}, no_cel=NO_CEL)
def check_sglang_uno_speculative_config(r, c):
    v = line_view(r)
    if v is None or not _is_uno(v):
        return
    msg = uno_refusal(v)
    if msg is None:
        pre, dec = uno_backends(v)
        bad = {p: b for p, b in (("prefill", pre), ("decode", dec)) if b is not None and b != "fa3"}
        if bad:
            msg = (f"UNO requires FA3 for both prefill and decode attention; got prefill={pre!r}, decode={dec!r} "
                   f"(give --attention-backend fa3)")
    if msg is not None:
        yield "spec.extraArgs", msg


@rule("sglang-uno-needs-fa3-attention", checked_by="oracle", family="args", severity="warning", engines=SGL,
      field="spec.extraArgs",
      title="UNO needs fa3 attention: the backend SGLang picks here depends on the GPU and the model",
      why="UNO runs on the fa3 attention backend for prefill and decode only. Where the line leaves a phase's backend "
          "to SGLang, its pick depends on the GPU and the model (e.g. not fa3 for an MHA model on an SM100 GPU, "
          "where SGLang refuses to start); the product does not know every pick: a warning.",
      fix="Give --attention-backend fa3 with --speculative-algorithm UNO.",
      source=_UNO_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _UNO_SOURCES.items()})
def check_sglang_uno_needs_fa3_attention(r, c):
    v = line_view(r)
    if v is None or not _is_uno(v) or uno_refusal(v) is not None:
        return
    pre, dec = uno_backends(v)
    if any(b is not None and b != "fa3" for b in (pre, dec)) or (pre is not None and dec is not None):
        return
    unset = [p for p, b in (("prefill", pre), ("decode", dec)) if b is None]
    yield "spec.extraArgs", (f"UNO requires fa3 for prefill and decode attention; the line leaves the {' and '.join(unset)} "
                             f"backend to SGLang, whose pick depends on the GPU "
                             f"({getattr(getattr(r, 'hardware', None), 'sm', None) or 'unknown'}) and the model: give "
                             f"--attention-backend fa3")


# ------------------------------------------------------------------ tokenspeed_mla off Blackwell

# 0.5.22 refuses tokenspeed_mla (attention or decode backend) unless platform.is_blackwell (SM100/SM12x); 0.5.23 renames
# it to cutedsl_mla (a deprecated alias) and refuses that unless platform.is_sm100. The catalog's GPUs: H200 (SM90),
# B200 / B300 / GB300 (SM100 / SM103)
_TOKENSPEED_SOURCES = {
    "0.5.22": "sglang/srt/arg_groups/overrides.py:1153-1154,1168-1175@0.5.22",
    "0.5.23": "sglang/srt/arg_groups/serving_hook.py:303-320@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1233-1247@0.5.23",
}


@rule("sglang-tokenspeed-mla-needs-blackwell", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="The tokenspeed_mla attention backend on a GPU outside Blackwell",
      why="SGLang's tokenspeed MLA kernels run on Blackwell GPUs only: 0.5.22 refuses --attention-backend / "
          "--decode-attention-backend tokenspeed_mla outside SM100/SM12x, and 0.5.23 takes it as the deprecated "
          "name of cutedsl_mla, which it refuses outside SM100.",
      fix="Pick another attention backend (e.g. flashinfer, fa3 or flashmla on Hopper), or run on a Blackwell GPU.",
      source=_TOKENSPEED_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _TOKENSPEED_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_tokenspeed_mla_needs_blackwell(r, c):
    major = sm_major(r)
    if major is None or major >= 10:
        return
    v = line_view(r)
    if v is None or "tokenspeed_mla" not in (v.value("attention_backend"), v.value("decode_attention_backend")):
        return
    if _release(r) == "0.5.23":
        said = ("tokenspeed_mla is a deprecated name of cutedsl_mla: CuteDSL MLA backend is only supported on "
                "Blackwell GPUs (SM100)")
    else:
        said = "tokenspeed_mla backend is only supported on Blackwell GPUs (SM100/SM12x)"
    yield "spec.extraArgs", f"{said}; this GPU is {r.hardware.sm}: pick another --attention-backend"


RULES["sglang-tokenspeed-mla-needs-blackwell"] = ReleaseRule.of(RULES["sglang-tokenspeed-mla-needs-blackwell"])


# ------------------------------------------------------------------ 0.5.22: KV cache sharding on a DSA model

# configs/model_config.py is_deepseek_dsa: architectures[0] one of these and index_topk in config.json
DSA_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
             "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
             "GlmMoeDsaForCausalLMNextN", "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration",
             "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
             "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN")
# handle_kv_cache_sharding: every path from its start to the DSA check raises or reaches it (a DSA class is an MLA
# model: use_mla_backend), so sharding a DSA model is refused on 0.5.22 whatever else the line gives
_KV_SHARD_DSA_SOURCES = {"0.5.22": "sglang/srt/arg_groups/kv_shard_hook.py:47-51,186-191@0.5.22; "
                                  "sglang/srt/configs/model_config.py:190-211@0.5.22"}


def is_dsa(v: LineView) -> bool:
    arch = v.arch
    if arch is None or getattr(arch, "architecture", None) not in DSA_ARCHS:
        return False
    return (arch.text or {}).get("index_topk") is not None or (arch.raw or {}).get("index_topk") is not None


@rule("sglang-kv-cache-sharding-dsa-model", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-kv-cache-sharding on a DSA model (0.5.22)",
      why="SGLang 0.5.22 does not stripe the DSA indexer buffers across ranks: it refuses KV cache sharding for a "
          "DeepSeek-Sparse-Attention model (a DSA class with index_topk in config.json).",
      fix="Drop --enable-kv-cache-sharding for this model (or use SGLang 0.5.23).",
      source=_KV_SHARD_DSA_SOURCES["0.5.22"], sources={f"sglang {k}": s for k, s in _KV_SHARD_DSA_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_dsa_model(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_kv_cache_sharding") or not is_dsa(v):
        return
    yield "spec.extraArgs", ("--enable-kv-cache-sharding does not support DSA models yet (indexer buffers are not "
                             "striped): drop --enable-kv-cache-sharding for this model")


RULES["sglang-kv-cache-sharding-dsa-model"] = ReleaseRule.of(RULES["sglang-kv-cache-sharding-dsa-model"])


# ------------------------------------------------------------------ --cuda-graph-prefill-max-context above the context

# finalize_cuda_graph_prefill_max_context (run for every line, pipeline.py:342@0.5.22 / 366@0.5.23): the requested
# size, page-aligned up, must not exceed ModelConfig.context_len (the context length the line gives, else the length SGLang
# derives from config.json: core/rules/model_limits.py). A size above the context is refused whatever the page size;
# one within it that page alignment pushes over is left to the release. An explicit --cuda-graph-config (which takes
# precedence over the flag) is left to the release too.
_PREFILL_CTX_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/cuda_graph_hook.py:82-87,423-438,450-464@0.5.23; "
              "sglang/srt/arg_groups/pipeline.py:366@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/cuda_graph_hook.py:82-87,385-400,412-426@0.5.22; "
              "sglang/srt/arg_groups/pipeline.py:342@0.5.22",
}


@rule("sglang-cuda-graph-prefill-max-context-above-context", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--cuda-graph-prefill-max-context above the model's context length",
      why="SGLang page-aligns --cuda-graph-prefill-max-context into the largest prefill context its CUDA graphs "
          "capture and refuses a size above the model's context length (the one the line gives, else the length it "
          "derives from config.json).",
      fix="Give --cuda-graph-prefill-max-context at most the context length, or drop it.",
      source=_PREFILL_CTX_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _PREFILL_CTX_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_cuda_graph_prefill_max_context_above_context(r, c):
    v = line_view(r)
    if v is None or v.value("cuda_graph_config") is not None:
        return
    size = _int(v.value("cuda_graph_prefill_max_context"))
    if size is None or size <= 0:
        return
    given = _int(v.value("context_length"))
    if given is not None and given > 0:
        ctx, how = given, "the context length the line gives, spec.scheduling.maxModelLen"
    else:
        limit = model_max_len(r)
        if limit is None:
            return
        ctx, how = limit
    if size > ctx:
        yield "spec.extraArgs", (f"--cuda-graph-prefill-max-context exceeds the model context length: {size:,} > "
                                 f"{ctx:,} ({how}); give at most {ctx:,}")


# ------------------------------------------------------------------ HiSparse on a DSA model: KV dtype and DSA backends

# validate_hisparse (the _hisparse_validation post-process, every line with --enable-hisparse): on a DSA model (not
# DeepSeek-V4, not MiniMax M3, whose own paths return before) the resolved KV cache dtype must be bfloat16, auto or
# fp8_e4m3, and a DSA prefill / decode backend must be one of the CUDA backends of that dtype (bfloat16:
# flashmla_sparse; fp8_e4m3: flashmla_kv, flashinfer_sparse_mla). Every earlier check of the function refuses too.
# Only a KV dtype the line gives is read ('auto' resolves per GPU: left to the release). For a DeepSeek-family DSA
# class the DSA backend resolution refuses a KV dtype other than bf16 / fp8_e4m3 first (overrides.py:541@0.5.22).
HISPARSE_KV_DTYPES = ("bfloat16", "auto", "fp8_e4m3")
HISPARSE_DSA_BACKENDS = {"bfloat16": ("flashmla_sparse",), "fp8_e4m3": ("flashinfer_sparse_mla", "flashmla_kv")}
_HISPARSE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/hisparse_hook.py:18-21,44-78,87-165@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1221-1229@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/hisparse_hook.py:18-21,44-78,87-165@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:1184-1192@0.5.22",
}


def hisparse_dsa_refusal(v: LineView) -> str | None:
    if not v.value("enable_hisparse") or not is_dsa(v) or not v.given("kv_cache_dtype"):
        return None
    kv = v.value("kv_cache_dtype")
    if kv not in HISPARSE_KV_DTYPES:
        return (f"HiSparse requires one of ('bfloat16', 'fp8_e4m3') KV cache dtypes, but got --kv-cache-dtype={kv}: "
                "use --kv-cache-dtype bfloat16 or fp8_e4m3")
    allowed = HISPARSE_DSA_BACKENDS.get(kv)
    if allowed is None:
        return None
    for dest, label in (("dsa_prefill_backend", "prefill"), ("dsa_decode_backend", "decode")):
        backend = v.value(dest)
        if backend is not None and backend not in allowed:
            return (f"HiSparse supports DSA {label} backend(s) {list(allowed)} with --kv-cache-dtype={kv}, but got "
                    f"--dsa-{label}-backend={backend}: use one of them, or omit the option")
    return None


@rule("sglang-hisparse-dsa-kv-dtype-and-backends", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-hisparse on a DSA model with a KV dtype or DSA backend HiSparse does not support",
      why="HiSparse on a DeepSeek-Sparse-Attention model keeps a bfloat16 or fp8_e4m3 KV cache and runs the DSA "
          "kernels of that dtype on CUDA: flashmla_sparse for bfloat16; flashmla_kv or flashinfer_sparse_mla for "
          "fp8_e4m3. SGLang refuses another --kv-cache-dtype or --dsa-prefill-backend / --dsa-decode-backend.",
      fix="Give --kv-cache-dtype bfloat16 or fp8_e4m3 and a DSA backend of that dtype (or omit the backends), or drop "
          "--enable-hisparse.",
      source=_HISPARSE_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _HISPARSE_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_hisparse_dsa_kv_dtype_and_backends(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = hisparse_dsa_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ unified memory: decode KV offload of MLA / Mamba

# handle_unified_memory_pool, under PD disaggregation with --disaggregation-decode-enable-offload-kvcache: after the
# checks before it (each refuses too) the release refuses an MLA model (use_mla_backend: configs/model_config.py sets
# AttentionArch.MLA for these classes unconditionally) and a hybrid-Mamba one (mambaish_config). Other MLA or Mamba
# classes, and hybrid-SWA models, are left to the release.
MLA_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN",
             "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "LongcatFlashForCausalLM", "KimiK25ForConditionalGeneration")
_UM_OFFLOAD_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_cache_hook.py:531-535,564-578@0.5.23; "
              "sglang/srt/configs/model_config.py:1258-1290@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_cache_hook.py:528-532,561-575@0.5.22; "
              "sglang/srt/configs/model_config.py:1258-1290@0.5.22",
}


def _hybrid_mamba(r: Any, v: LineView) -> bool:
    return getattr(v.arch, "architecture", None) in NEMOTRON_H_ARCHS or _is_hybrid(r)


@rule("sglang-unified-memory-decode-offload-model", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--enable-unified-memory decode KV offload of an MLA or hybrid-Mamba model",
      why="With --enable-unified-memory under PD disaggregation, SGLang's decode KV offload "
          "(--disaggregation-decode-enable-offload-kvcache) moves whole MHA page envelopes only: it refuses MLA models "
          "and models with Mamba-style state.",
      fix="Drop --disaggregation-decode-enable-offload-kvcache (or --enable-unified-memory) for this model.",
      source=_UM_OFFLOAD_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _UM_OFFLOAD_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_unified_memory_decode_offload_model(r, c):
    v = line_view(r)
    if v is None or v.arch is None or not v.value("enable_unified_memory") \
            or v.value("disaggregation_mode") in (None, "null") \
            or not v.value("disaggregation_decode_enable_offload_kvcache"):
        return
    if v.arch.architecture in MLA_ARCHS and v.arch.mla:
        what = "MLA models yet"
    elif _hybrid_mamba(r, v):
        what = "hybrid-Mamba models"
    else:
        return
    yield "spec.extraArgs", (f"--enable-unified-memory decode KV offload does not support {what}: drop "
                             "--disaggregation-decode-enable-offload-kvcache or --enable-unified-memory")
