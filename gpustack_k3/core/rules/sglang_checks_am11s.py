"""SGLang refusals of the aimed lines (tools/engine_oracle/aimed/*.yaml) in the KV-sharding, HiSparse, Elastic EP and
Qwen3-MoE hooks that the engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml, block h-am11s) cannot express
(helper am11s, issue 31):

- ``handle_kv_cache_sharding``: the page size the release resolves (the line's, or 1, where no attention backend or
  model override of the line changes it), the chunk-size rounding that would eat all of the GPU's memory, a
  chunked/local-attention model (config.json's attention_chunk_size), and 0.5.23's DSA branch (Mooncake, index
  pooling, DSA cache layer split; HiCache I/O);
- ``validate_hisparse``: a draft tree (top-k above 1) with HiSparse;
- ``_handle_elastic_ep``: an Elastic EP scale joiner whose group passes --max-ep-size;
- ``_qwen3_moe_family_overrides``: W4A16_NVFP4 MoE layers of a ModelOpt mixed-precision checkpoint on SM100 with a MoE
  runner other than marlin / auto (or the CuTe DSL W4A16 opt-in);
- ``validate_mega_moe_token_budget``: attention DP splitting the prefill chunk to nothing per rank;
- ``handle_layernorm_sp`` (0.5.23, Muse Spark MegaMoE): breakable prefill graphs that do not cover the prefill chunk.

Each rule reads the values the release's own parser gives the command line (checks.line_view), the model's config.json
through the one reader (r.model_arch, core.model_config), cites each release's source, and is verified against the
release by tests/engine_oracle/test_am11s_rules_oracle.py (the product's side: tests/core/test_am11s_rules.py)."""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.draft11_config import read_draft
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_aimS3 import sm_major
from gpustack_k3.core.rules.sglang_checks_am10s import is_dsa
from gpustack_k3.core.rules.sglang_checks_mfixS import MUSE_ARCH, _int, _sources, layernorm_sp_refusal
from gpustack_k3.core.rules.sglang_checks_smiss7 import MODEL_OVERRIDE_ARCHS

SGL = [ENGINE_SGLANG]


def _sharding(r: Any) -> LineView | None:
    v = line_view(r)
    return v if v is not None and v.value("enable_kv_cache_sharding") else None


# ------------------------------------------------------------------ KV sharding: the page size the release resolves

# The page size handle_kv_cache_sharding reads is the resolved one: _mla_backend_page_constraints / _fa4_page_constraint /
# _intel_xpu_page_constraint raise it for flashmla, trtllm_mla, cutedsl_mla (0.5.22: tokenspeed_mla), trtllm_mha, hpc_ops,
# fa4, intel_xpu (overrides.py:1143-1199,1273-1339@0.5.23, :1084-1149,1236-1302@0.5.22), a model override may set it
# (model_overrides/*: DSA, DeepSeek-V4, MiniMax-M3, Nemotron-H, Qwen3.5, Qwen3-VL ...), and an unset one becomes 1 on a
# CUDA GPU (_page_size_default, overrides.py:1341-1363@0.5.23, :1304-1326@0.5.22). Decided here only where the line
# names fa3 as its attention backend, every other backend it names leaves the page size alone, and the model is no
# class with an override of its own (but the non-DSA DeepSeek-V3 / Kimi-K2.5 classes, whose override only picks an
# attention backend when the line names none: model_overrides/deepseek_v2.py:178-188@0.5.23).
_PAGE_KEEPING = (None, "fa3", "flashinfer", "triton")
_BACKEND_ONLY_OVERRIDES = ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration")


def resolved_page_size(v: LineView) -> int | None:
    """The page size the release resolves for a KV-sharded line (None: not decided here)."""
    if v.value("attention_backend") != "fa3":
        return None
    if any(v.value(d) not in _PAGE_KEEPING for d in ("prefill_attention_backend", "decode_attention_backend",
                                                      "speculative_draft_attention_backend")):
        return None
    device = v.value("device")
    if device is not None and device != "cuda":
        return None
    arch = v.arch
    name = getattr(arch, "architecture", None)
    if name is None or (name in MODEL_OVERRIDE_ARCHS and (name not in _BACKEND_ONLY_OVERRIDES or is_dsa(v))):
        return None
    page = v.value("page_size")
    return 1 if page is None else _int(page)


_PAGE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_shard_hook.py:87-90,272-279@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1143-1199,1341-1363@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_shard_hook.py:48-51,212-219@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:1084-1149,1304-1326@0.5.22",
}


@rule("sglang-kv-cache-sharding-page-size", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-kv-cache-sharding with a page size of 1",
      why="KV sharding transfers and gathers whole physical pages: SGLang refuses a resolved page size of 1 (the "
          "default on a CUDA GPU where neither the attention backend nor the model raises it; fa3 keeps it).",
      fix="Give --page-size 64 (a real page size), or drop --enable-kv-cache-sharding.",
      source=_PAGE_SOURCES["0.5.23"], sources=_sources(_PAGE_SOURCES), no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_page_size(r, c):
    v = _sharding(r)
    if v is None:
        return
    page = resolved_page_size(v)
    if page is not None and page <= 1:
        yield "spec.extraArgs", (f"--enable-kv-cache-sharding requires a real page size: the page size is {page} "
                                 f"(--page-size {'not given, 1 by default' if v.value('page_size') is None else page} "
                                 f"with --attention-backend fa3); give --page-size 64")


# ------------------------------------------------------------------ KV sharding: rounding the chunk eats the GPU

# Chunk boundaries must stay on pages: a --chunked-prefill-size that is no multiple of the page size is rounded up, and
# where the line leaves --mem-fraction-static to SGLang the fraction is lowered by the extra activation memory,
# 1.5 MB per token above max(chunk, 2048), over the GPU's memory (get_device_memory_capacity, MB). A resolved fraction
# is below 1, so an extra at or above the whole GPU is refused whatever the fraction; a smaller one depends on the
# fraction SGLang picks (the GPU, the model): not decided here.
_ROUND_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_shard_hook.py:87-97,287-316@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_shard_hook.py:48-58,227-256@0.5.22",
}


def rounding_overrun(v: LineView, gpu_gib: float | None) -> tuple[int, int, float] | None:
    """(chunk, rounded chunk, extra MB) where rounding the line's chunk to its page size needs at least the GPU's
    whole memory (None: not so, or not decided)."""
    if not gpu_gib or v.given("mem_fraction_static") or not v.given("chunked_prefill_size"):
        return None
    if (_int(v.value("attn_dp_size")) or 1) > 1 or v.value("enable_dp_attention") or v.value("enable_prefill_cp"):
        return None   # the chunk is split per rank first (parallel_hook.py), or refused without prefill CP
    page, chunk = resolved_page_size(v), _int(v.value("chunked_prefill_size"))
    if page is None or page <= 1 or chunk is None or chunk <= 0 or chunk % page == 0:
        return None
    rounded = (chunk + page - 1) // page * page
    extra = 1.5 * (max(rounded, 2048) - max(chunk, 2048))
    return (chunk, rounded, extra) if extra >= gpu_gib * 1024 else None


@rule("sglang-kv-cache-sharding-chunk-rounding-memory", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--enable-kv-cache-sharding rounds --chunked-prefill-size up by more than the GPU's memory",
      why="With KV sharding SGLang rounds --chunked-prefill-size up to a multiple of the page size and, where "
          "--mem-fraction-static is left to it, takes the extra activation memory (1.5 MB per token) off the static "
          "fraction; an extra of the GPU's whole memory or more leaves no fraction, and SGLang refuses to start.",
      fix="Give --chunked-prefill-size as a multiple of --page-size (or a smaller page size).",
      source=_ROUND_SOURCES["0.5.23"], sources=_sources(_ROUND_SOURCES), no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_chunk_rounding_memory(r, c):
    v = _sharding(r)
    if v is None:
        return
    hw = getattr(r, "hardware", None)
    over = rounding_overrun(v, getattr(hw, "visible_gib", None))
    if over is not None:
        chunk, rounded, extra = over
        yield "spec.extraArgs", (f"--chunked-prefill-size {chunk} is rounded up to {rounded} (a multiple of --page-size "
                                 f"{v.value('page_size')}) for KV sharding, which needs {extra:.0f} MB more activation "
                                 f"memory than the {hw.visible_gib} GiB GPU has: pass a multiple of the page size")


# ------------------------------------------------------------------ KV sharding: chunked/local-attention models

# ModelConfig.attention_chunk_size = hf_text_config.attention_chunk_size (configs/model_config.py:797-799@0.5.23); read
# from the language model's config as written (a class default the file does not write is not seen: no finding then)
_CHUNK_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_shard_hook.py:87-90,221-233@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_shard_hook.py:48-51,156-168@0.5.22",
}


@rule("sglang-kv-cache-sharding-chunked-attention-model", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--enable-kv-cache-sharding on a chunked/local-attention model",
      why="SGLang builds local-attention metadata from the page table before KV sharding's scratch translation: it "
          "refuses KV sharding for a model whose config.json gives attention_chunk_size.",
      fix="Drop --enable-kv-cache-sharding for this model.",
      source=_CHUNK_SOURCES["0.5.23"], sources=_sources(_CHUNK_SOURCES), no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_chunked_attention_model(r, c):
    v = _sharding(r)
    if v is None or v.arch is None:
        return
    size = (v.arch.text or {}).get("attention_chunk_size")
    if size is not None:
        yield "spec.extraArgs", (f"--enable-kv-cache-sharding does not support chunked/local-attention models "
                                 f"(config.json attention_chunk_size {size}): drop --enable-kv-cache-sharding")


# ------------------------------------------------------------------ 0.5.23: KV sharding of a DSA model

# validate_kv_shard_attention_backend (run for every sharded line that reaches it, kv_shard_hook.py:235@0.5.23): a DSA
# model is refused unless its prefill backend is dsa (:66-67), and with dsa it needs Mooncake, index_kpool 1
# (get_dsa_index_kpool: config.json's index_kpool, default 1), no index_kpool_compress and no DSA cache layer split
# (:55-64); earlier checks of the same branch refuse too. HiCache on a DSA model needs the cache host-memory mode and
# kernel I/O with a layer_first / page_first layout (:182-193), after handle_hicache's layout/I-O normalisation
# (hicache_hook.py:171-193@0.5.23: page_first_direct switches kernel to direct I/O); a
# --disaggregation-decode-host-receive-threshold below 1 (which resets the layout first) is left to the release.
_DSA_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_shard_hook.py:30-67,87-90,182-193,235@0.5.23; "
              "sglang/srt/configs/model_config.py:530-542@0.5.23; "
              "sglang/srt/arg_groups/hicache_hook.py:171-193@0.5.23",
}


def dsa_shard_refusal(v: LineView) -> str | None:
    raw = (v.arch.raw or {}) if v.arch is not None else {}
    text = v.arch.text or {} if v.arch is not None else {}
    kpool = text.get("index_kpool", raw.get("index_kpool", 1))
    compress = text.get("index_kpool_compress", raw.get("index_kpool_compress", False))
    transfer = v.value("disaggregation_transfer_backend")
    if transfer != "mooncake" or v.value("enable_dsa_cache_layer_split") or kpool != 1 or compress:
        return (f"DSA KV sharding requires Mooncake, uncompressed index_kpool=1 and no DSA cache layer splitting "
                f"(--disaggregation-transfer-backend {transfer}, index_kpool {kpool}, index_kpool_compress "
                f"{bool(compress)}, --enable-dsa-cache-layer-split {bool(v.value('enable_dsa_cache_layer_split'))})")
    if v.value("enable_hierarchical_cache"):
        if v.value("hicache_host_memory_mode") != "cache":
            return (f"CP-sharded DSA HiCache requires host memory mode cache (--hicache-host-memory-mode "
                    f"{v.value('hicache_host_memory_mode')})")
        threshold = v.value("disaggregation_decode_host_receive_threshold")
        if isinstance(threshold, (int, float)) and threshold < 1:
            return None
        io, layout = v.value("hicache_io_backend"), v.value("hicache_mem_layout")
        if layout == "page_first_direct" and io == "kernel":
            io = "direct"
        if io != "kernel" or layout not in ("layer_first", "page_first"):
            return (f"CP-sharded DSA HiCache requires kernel I/O with layer_first or page_first (--hicache-io-backend "
                    f"{v.value('hicache_io_backend')}, --hicache-mem-layout {v.value('hicache_mem_layout')})")
    return None


@rule("sglang-kv-cache-sharding-dsa-settings", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-kv-cache-sharding of a DSA model without Mooncake, with pooled index keys, or with HiCache "
            "I/O it cannot shard (0.5.23)",
      why="SGLang 0.5.23 shards a DeepSeek-Sparse-Attention model's KV only over the Mooncake transfer backend with "
          "uncompressed index_kpool 1 and no DSA cache layer split, and its HiCache only in the cache host-memory "
          "mode with kernel I/O on a layer_first or page_first layout.",
      fix="Use --disaggregation-transfer-backend mooncake without --enable-dsa-cache-layer-split, the kernel HiCache "
          "I/O backend with a layer_first / page_first layout, or drop --enable-kv-cache-sharding.",
      source=_DSA_SOURCES["0.5.23"], sources=_sources(_DSA_SOURCES), no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_dsa_settings(r, c):
    v = _sharding(r)
    if v is None or not is_dsa(v):
        return
    msg = dsa_shard_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg + ": follow the message or drop --enable-kv-cache-sharding"


RULES["sglang-kv-cache-sharding-dsa-settings"] = ReleaseRule.of(RULES["sglang-kv-cache-sharding-dsa-settings"])


# ------------------------------------------------------------------ HiSparse with a draft tree

_HISPARSE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/hisparse_hook.py:87-92,114-122@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/hisparse_hook.py:87-92,114-122@0.5.22",
}
_TREE_ALGOS = ("EAGLE", "EAGLE3", "NEXTN")


@rule("sglang-hisparse-linear-speculation-only", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-hisparse with a speculative draft tree (--speculative-eagle-topk above 1)",
      why="SGLang's HiSparse speculative integration verifies a linear draft chain only: it refuses "
          "--speculative-eagle-topk other than 1 with --enable-hisparse.",
      fix="Give --speculative-eagle-topk 1, or drop --enable-hisparse.",
      source=_HISPARSE_SOURCES["0.5.23"], sources=_sources(_HISPARSE_SOURCES), no_cel=NO_CEL)
def check_sglang_hisparse_linear_speculation_only(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_hisparse"):
        return
    algo = v.value("speculative_algorithm")
    topk = _int(v.value("speculative_eagle_topk"))
    if isinstance(algo, str) and algo.upper() in _TREE_ALGOS and topk is not None and topk > 1:
        yield "spec.extraArgs", (f"--enable-hisparse supports linear speculation only (--speculative-eagle-topk "
                                 f"{topk}): use --speculative-eagle-topk 1")


# ------------------------------------------------------------------ Elastic EP: the joining group's size

_ELASTIC_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/parallel_hook.py:572-582,639-652@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/parallel_hook.py:549-559,579-592@0.5.22",
}


@rule("sglang-elastic-ep-join-target-above-max-ep-size", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="An Elastic EP scale joiner whose group would pass --max-ep-size",
      why="An Elastic EP scale joiner adds its TP group at --elastic-ep-join-rank-offset: SGLang refuses a joiner "
          "whose offset + --tp-size exceeds --max-ep-size.",
      fix="Lower --elastic-ep-join-rank-offset or --tp-size, or raise --max-ep-size.",
      source=_ELASTIC_SOURCES["0.5.23"], sources=_sources(_ELASTIC_SOURCES), no_cel=NO_CEL)
def check_sglang_elastic_ep_join_target_above_max_ep_size(r, c):
    v = line_view(r)
    if v is None or v.value("elastic_ep_backend") is None or v.value("ep_join_mode") != "scale":
        return
    tp, most, offset = _int(v.value("tp_size")), _int(v.value("max_ep_size")), _int(v.value("ep_join_rank_offset"))
    if tp is None or most is None or offset is None or most <= tp:
        return
    if offset + tp > most:
        yield "spec.extraArgs", (f"Elastic EP joining group exceeds --max-ep-size: --elastic-ep-join-rank-offset "
                                 f"{offset} + --tp-size {tp} = {offset + tp} > --max-ep-size {most}; lower the offset "
                                 f"or raise --max-ep-size")


# ------------------------------------------------------------------ Qwen3-MoE family: W4A16_NVFP4 experts on SM100

# _qwen3_moe_family_overrides (model_overrides/qwen3_moe.py:29-70, the same lines in both releases), on SM100: the
# checkpoint's quantization (get_quantization_config: modelopt_mixed for a ModelOpt MIXED_PRECISION config) where the
# line gives no --quantization, with W4A16_NVFP4 on an experts layer, needs the marlin MoE runner (auto picks it) or
# flashinfer_cutedsl with --moe-a2a-backend none/flashinfer and SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1
QWEN3_MOE_ARCHS = ("Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration", "Qwen3NextForCausalLM",
                   "Qwen3_5MoeForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
                   "Qwen3_5ForConditionalGeneration", "Qwen4ExpForConditionalGeneration")
_QWEN3_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_overrides/qwen3_moe.py:17-27,29-70@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_overrides/qwen3_moe.py:17-27,29-70@0.5.22",
}
_TRUE = ("1", "true", "yes", "on")


def mixed_precision_moe_quant_algos(raw: dict) -> set[str]:
    """The quant_algo values a ModelOpt MIXED_PRECISION config.json assigns to ``*.experts`` layers, as
    _mixed_precision_moe_quant_algos reads them (an empty set: no such checkpoint, as get_quantization_config would
    not call it modelopt_mixed). The release's Qwen3-MoE override matches ".experts" (model_overrides/qwen3_moe.py:17-27),
    its Nemotron-H override ".experts." (nemotron_h.py:68, read by sglang_checks_mfixS._w4a16_nvfp4_experts): each
    rule follows its own override."""
    q = raw.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "modelopt" or q.get("quant_algo") != "MIXED_PRECISION":
        return set()
    layers = q.get("quantized_layers")
    if not isinstance(layers, dict):
        return set()
    return {str(info.get("quant_algo", "")).upper() for name, info in layers.items()
            if ".experts" in str(name) and isinstance(info, dict)}


@rule("sglang-qwen3-moe-w4a16-nvfp4-runner", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="A Qwen3-MoE-family checkpoint with W4A16_NVFP4 experts on SM100 with a MoE runner that cannot run them",
      why="On SM100 SGLang runs the W4A16_NVFP4 experts of a ModelOpt mixed-precision Qwen3-MoE-family checkpoint only "
          "with the marlin MoE runner, or flashinfer_cutedsl with --moe-a2a-backend none/flashinfer and "
          "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1 (trtllm-gen has only the W4A4 NVFP4 path).",
      fix="Give --moe-runner-backend marlin (or leave it auto).",
      source=_QWEN3_SOURCES["0.5.23"], sources=_sources(_QWEN3_SOURCES), no_cel=NO_CEL)
def check_sglang_qwen3_moe_w4a16_nvfp4_runner(r, c):
    if sm_major(r) != 10:
        return
    v = line_view(r)
    if v is None or v.arch is None or v.arch.architecture not in QWEN3_MOE_ARCHS or v.given("quantization"):
        return
    if "W4A16_NVFP4" not in mixed_precision_moe_quant_algos(v.arch.raw or {}):
        return
    runner, a2a = v.value("moe_runner_backend"), v.value("moe_a2a_backend")
    cutedsl = (runner == "flashinfer_cutedsl" and a2a in ("none", "flashinfer")
               and str(v.env.get("SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16", "")).strip().lower() in _TRUE)
    if runner not in ("auto", "marlin") and not cutedsl:
        yield "spec.extraArgs", (f"W4A16_NVFP4 MoE layers (this checkpoint's ModelOpt mixed precision) require "
                                 f"--moe-runner-backend marlin on {r.hardware.sm}, got {runner}: give "
                                 f"--moe-runner-backend marlin")



# ------------------------------------------------------------------ MegaMoE: the per-rank prefill chunk

# validate_mega_moe_token_budget_for_model (run for --moe-a2a-backend megamoe; 0.5.23 skips --encoder-only) checks the
# per-rank prefill budget of the classes without a fallback path (MEGA_MOE_NO_FALLBACK_ARCHS, config.json's
# architectures[0]). With attention DP (and no prefill CP) the chunk the check reads is already split over the DP
# ranks (_handle_data_parallelism: chunked_prefill_size // attn_dp_size, parallel_hook.py:331@0.5.23, :319@0.5.22),
# and it splits it again: a chunk below attn_dp_size squared leaves no token per rank. Decided here where the line
# gives --chunked-prefill-size, attention DP (--attn-dp-size, or --enable-dp-attention with --dp-size) and no prefill
# CP, on a CUDA GPU, off decode workers (which skip the prefill check) and without PP dynamic chunking.
MEGA_MOE_NO_FALLBACK_ARCHS = ("DeepseekV4ForCausalLM", "InternS2PreviewForConditionalGeneration", "MellumForCausalLM",
                              "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM",
                              "Qwen3VLMoeForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                              "Qwen3_5MoeForConditionalGeneration")
_MEGA_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/mega_moe_hook.py:52-91,161-232@0.5.23; "
              "sglang/srt/arg_groups/parallel_hook.py:316-332@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/mega_moe_hook.py:52-91,101-172@0.5.22; "
              "sglang/srt/arg_groups/parallel_hook.py:304-320@0.5.22",
}


def attention_dp_size(v: LineView) -> int:
    """The attention-DP width the line gives (--attn-dp-size, else the deprecated --enable-dp-attention --dp-size N:
    _handle_deprecated_dp_attention)."""
    dp = _int(v.value("attn_dp_size")) or 1
    if dp == 1 and v.value("enable_dp_attention"):
        dp = _int(v.value("dp_size")) or 1
    return dp


def mega_moe_rank_chunk(v: LineView) -> tuple[int, int, int] | None:
    """(chunk, attention-DP width, per-rank chunk) where the per-rank chunk is decided here (None: not)."""
    if v.value("moe_a2a_backend") != "megamoe" or v.value("encoder_only") or v.arch is None \
            or v.arch.architecture not in MEGA_MOE_NO_FALLBACK_ARCHS:
        return None
    if v.value("disaggregation_mode") == "decode" or v.value("enable_prefill_cp") or v.value("device") not in (
            None, "cuda"):
        return None
    if (_int(v.value("pp_size")) or 1) > 1 and v.value("enable_dynamic_chunking"):
        return None
    chunk, dp = _int(v.value("chunked_prefill_size")), attention_dp_size(v)
    if not v.given("chunked_prefill_size") or chunk is None or chunk <= 0 or dp <= 1:
        return None
    return chunk, dp, (chunk // dp) // dp


@rule("sglang-megamoe-per-rank-chunk", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="MegaMoE with attention DP and a --chunked-prefill-size that leaves no prefill token per rank",
      why="MegaMoE sizes its per-rank token buffers from the prefill chunk: for the MoE classes without a fallback "
          "path SGLang divides --chunked-prefill-size by the attention-DP width once for DP attention and once more "
          "for the per-rank budget, and refuses a chunk that leaves no token per rank.",
      fix="Give --chunked-prefill-size of at least attn_dp_size squared (e.g. 8192), or drop --moe-a2a-backend megamoe.",
      source=_MEGA_SOURCES["0.5.23"], sources=_sources(_MEGA_SOURCES), no_cel=NO_CEL)
def check_sglang_megamoe_per_rank_chunk(r, c):
    v = line_view(r)
    got = None if v is None else mega_moe_rank_chunk(v)
    if got is not None and got[2] <= 0:
        chunk, dp, _ = got
        yield "spec.extraArgs", (f"{v.arch.architecture} with MegaMoE requires a positive per-rank chunked prefill "
                                 f"size: --chunked-prefill-size {chunk} over attention DP {dp} is {chunk // dp} per DP "
                                 f"rank and 0 per token partition; give --chunked-prefill-size at least {dp * dp}")


# ------------------------------------------------------------------ Muse MegaMoE LayerNorm SP: breakable prefill graphs

# handle_layernorm_sp, Muse Spark with --enable-megamoe-for-layernorm-sp (0.5.23), past the checks
# sglang_checks_mfixS.layernorm_sp_refusal reads: a breakable prefill CUDA graph (decided here where the line gives
# --cuda-graph-backend-prefill breakable) needs a positive --chunked-prefill-size and a largest prefill capture bucket
# (--cuda-graph-bs-prefill's largest, or at most --cuda-graph-max-bs-prefill) at least the chunk
_SP_SOURCES = {"0.5.23": "sglang/srt/arg_groups/layernorm_sp_hook.py:15-28,42-85@0.5.23"}


def muse_breakable_refusal(v: LineView) -> str | None:
    if not v.value("enable_layernorm_sp") or not v.value("enable_megamoe_for_layernorm_sp") or v.arch is None \
            or v.arch.architecture != MUSE_ARCH or layernorm_sp_refusal(v, "0.5.23") is not None:
        return None
    backend = v.value("cuda_graph_backend_prefill")
    if backend is None or str(getattr(backend, "value", backend)).strip().lower() != "breakable" \
            or v.value("cuda_graph_config") is not None:
        return None
    chunk = _int(v.value("chunked_prefill_size"))
    if not v.given("chunked_prefill_size") or chunk is None:
        return None
    if chunk <= 0:
        return (f"Muse MegaMoE breakable prefill requires a positive --chunked-prefill-size (got {chunk}) to bound SP "
                f"workspace growth")
    buckets = v.value("cuda_graph_bs_prefill")
    if isinstance(buckets, list) and buckets and all(isinstance(b, int) for b in buckets):
        largest, how = max(buckets), "--cuda-graph-bs-prefill's largest bucket"
    else:
        largest, how = _int(v.value("cuda_graph_max_bs_prefill")), "--cuda-graph-max-bs-prefill"
        if not v.given("cuda_graph_max_bs_prefill") or largest is None or largest <= 0:
            return None
    if largest < chunk:
        return (f"Muse MegaMoE breakable prefill requires the largest prefill capture bucket to cover "
                f"--chunked-prefill-size {chunk} ({how} is {largest})")
    return None


@rule("sglang-muse-megamoe-breakable-prefill", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="Muse MegaMoE LayerNorm SP with breakable prefill graphs that do not cover the prefill chunk (0.5.23)",
      why="With --enable-megamoe-for-layernorm-sp a breakable prefill CUDA graph captures Muse Spark's SP workspaces: "
          "SGLang 0.5.23 needs a positive --chunked-prefill-size and a largest prefill capture bucket that covers it, "
          "so that no larger eager prefill replaces the captured workspaces.",
      fix="Give --chunked-prefill-size at most the largest prefill capture bucket (--cuda-graph-max-bs-prefill / "
          "--cuda-graph-bs-prefill), or another --cuda-graph-backend-prefill.",
      source=_SP_SOURCES["0.5.23"], sources=_sources(_SP_SOURCES), no_cel=NO_CEL)
def check_sglang_muse_megamoe_breakable_prefill(r, c):
    v = line_view(r)
    msg = None if v is None else muse_breakable_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


RULES["sglang-muse-megamoe-breakable-prefill"] = ReleaseRule.of(RULES["sglang-muse-megamoe-breakable-prefill"])


# ------------------------------------------------------------------ a Gemma4 assistant draft under EAGLE3

# handle_speculative_decoding resolves the algorithm through _resolve_speculative_algorithm_alias, which reads the
# draft's config.json (get_config of --speculative-draft-model-path) and refuses EAGLE3 for a Gemma4 assistant draft
# (any of its architectures). Decided here where no --decrypted-draft-config-file replaces the draft's config: from
# the model's config.json where the draft path is the model path (the same file), else from the draft's own
# config.json where it was read at the CLI edge (Resolved.draft_arch, cli/model_source.py draft_arch_for; helper
# draft11). A draft not read (not a local directory holding config.json) gives no finding.
GEMMA4_ASSISTANT_ARCHS = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")
_GEMMA4_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:81-107,121,145-160@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:80-106,120,144-159@0.5.22",
}


@rule("sglang-gemma4-assistant-draft-not-eagle3", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="A Gemma4 assistant draft under --speculative-algorithm EAGLE3",
      why="SGLang promotes a Gemma4 assistant draft (Gemma4AssistantForCausalLM) to its frozen-KV MTP path from NEXTN "
          "or EAGLE only: it refuses EAGLE3 for such a draft.",
      fix="Give --speculative-algorithm EAGLE (or NEXTN) for a Gemma4 assistant draft.",
      source=_GEMMA4_SOURCES["0.5.23"], sources=_sources(_GEMMA4_SOURCES), no_cel=NO_CEL)
def check_sglang_gemma4_assistant_draft_not_eagle3(r, c):
    v = line_view(r)
    if v is None or v.arch is None or not isinstance(v.value("speculative_algorithm"), str) \
            or v.value("speculative_algorithm").upper() != "EAGLE3":
        return
    draft = v.value("speculative_draft_model_path")
    if draft is None or v.value("decrypted_draft_config_file"):
        return
    if draft == v.value("model_path"):
        archs = (v.arch.raw or {}).get("architectures")
    else:   # a draft in another directory: its config.json where read at the CLI edge (Resolved.draft_arch)
        raw = read_draft(r)
        if raw is None:
            return
        archs = raw.get("architectures")
    if isinstance(archs, list) and any(a in GEMMA4_ASSISTANT_ARCHS for a in archs):
        yield "spec.extraArgs", (f"the draft {draft} is a Gemma4 assistant draft ({', '.join(map(str, archs))}), "
                                 f"which needs --speculative-algorithm NEXTN or EAGLE, not EAGLE3")
