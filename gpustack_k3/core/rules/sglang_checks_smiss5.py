"""SGLang refusals that depend on a value the release resolves (helper smiss5, issue 31), beyond what the engine-check
table (gpustack_k3/catalog/data/checks/sglang.yaml) can express: a page size a model override forces and a chunked
prefill size the DP-attention hook divides; and one warning for a fact of the serving image, not of the command line.

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_sglang_python_rules_oracle.py (unit lines: tests/core/test_smiss5_rules.py)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, _model_field, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

# ------------------------------------------------------------------ DeepSeek-V4: chunked prefill vs its page size

# check_server_args: a chunked prefill size above 0 (outside a decode server) must be a multiple of the page size.
# DeepSeek-V4's model override forces the page size, whatever --page-size says: 256, 128 on an NPU device
# (model_overrides/deepseek_v4.py); DP attention divides the chunked prefill size by the attention-DP width first
# (parallel_hook.py _handle_data_parallelism; --dp-size N --enable-dp-attention is --attn-dp-size N,
# parallel_hook.py:39-61); --enable-kv-cache-sharding rounds it up to a page multiple after that (kv_shard_hook.py)
_CHUNK_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:243-246@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/deepseek_v4.py:18-24,51-61@0.5.23, "
              "sglang/srt/arg_groups/parallel_hook.py:314,327-332@0.5.23, "
              "sglang/srt/arg_groups/kv_shard_hook.py:280-292@0.5.23, sglang/srt/configs/deepseek_v41.py:38-39@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:242-245@0.5.22, "
              "sglang/srt/arg_groups/model_overrides/deepseek_v4.py:18-24,51-61@0.5.22, "
              "sglang/srt/arg_groups/parallel_hook.py:308,315-320@0.5.22, "
              "sglang/srt/arg_groups/kv_shard_hook.py:220-232@0.5.22, sglang/srt/configs/deepseek_v41.py:38-39@0.5.22",
}
# the architectures the override is registered for, as the release reads config.json (DeepSeek-V4.1's
# DeepseekV41ForCausalLM with model_type deepseek_v41 is read as DeepseekV4ForCausalLM)
DSV4_ARCHS = ("DeepseekV4ForCausalLM",)
DSV41_ARCH, DSV41_MODEL_TYPE = "DeepseekV41ForCausalLM", "deepseek_v41"


def _int(x) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _backend_given(v: LineView) -> bool:
    """Whether the line names an attention backend (any of the three options): the release's page and backend
    resolutions then depend on it, and these rules leave the line to the release."""
    return any(v.value(d) is not None for d in ("attention_backend", "prefill_attention_backend",
                                                "decode_attention_backend"))


def _on_sm100(r) -> bool:
    """Whether the document's GPU is of the SM100 family (B200 SM100, B300/GB300 SM103: catalog/data/hardware.yaml)."""
    hw = getattr(r, "hardware", None)
    return hw is not None and str(getattr(hw, "sm", "")).upper() in SM100_FAMILY


def dsv4_page_size(v: LineView) -> int | None:
    """The page size DeepSeek-V4's override forces for this line (None: not a DeepSeek-V4 model, or a line where
    another backend setting could move the page size after the override: left to the release)."""
    arch = v.arch
    name = getattr(arch, "architecture", None) if arch is not None else None
    if name not in DSV4_ARCHS and not (name == DSV41_ARCH and _model_field(arch, "model_type") == DSV41_MODEL_TYPE):
        return None
    # an explicit attention backend may meet the MLA page constraints pass (overrides.py) after the override
    if _backend_given(v):
        return None
    device = v.value("device")
    if device is not None and not isinstance(device, str):
        return None
    return 128 if (device or "cuda").split(":")[0] == "npu" else 256


def attn_dp_width(v: LineView) -> int:
    """The attention-DP width the DP-attention hook divides by: --attn-dp-size, or --dp-size N with the deprecated
    --enable-dp-attention (parallel_hook.py:39-61@0.5.23)."""
    n = _int(v.value("attn_dp_size")) or 1
    if n == 1 and v.value("enable_dp_attention") is True:
        n = _int(v.value("dp_size")) or 1
    return max(1, n)


@rule("sglang-dsv4-chunked-prefill-page-size", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="DeepSeek-V4: the chunked prefill size (per attention-DP rank) must be a multiple of its page size",
      why="SGLang asserts the chunked prefill size is a multiple of the KV page size outside a decode server. For "
          "DeepSeek-V4 (and V4.1) its model override forces the page size to 256 (128 on an NPU) whatever "
          "--page-size says, and DP attention divides --chunked-prefill-size by the attention-DP width first.",
      fix="Give --chunked-prefill-size a multiple of 256 x the attention-DP width (e.g. 256 x --attn-dp-size), or "
          "leave it unset.",
      source=_CHUNK_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _CHUNK_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_dsv4_chunked_prefill_page_size(r, c):
    yield from _chunk_not_multiple_of_page(r, dsv4_page_size, "DeepSeek-V4's page size")


def _chunk_not_multiple_of_page(r, page_of, what: str):
    """validation_hook.py:243-246@0.5.23 for a model whose page size ``page_of(view)`` resolves (None: not judged):
    a given --chunked-prefill-size, per attention-DP rank, outside a decode server and KV sharding."""
    v = line_view(r)
    if v is None or v.arch is None or not v.given("chunked_prefill_size"):
        return
    chunk = _int(v.value("chunked_prefill_size"))
    if chunk is None or chunk <= 0 or v.value("disaggregation_mode") == "decode" or v.value("enable_kv_cache_sharding"):
        return
    page = page_of(v)
    if page is None:
        return
    dp = attn_dp_width(v)
    per_rank = chunk // dp
    if per_rank > 0 and per_rank % page:
        where = f"{chunk} / {dp} attention-DP ranks = {per_rank}" if dp > 1 else str(chunk)
        yield "spec.extraArgs", (f"chunked_prefill_size must be divisible by page_size: --chunked-prefill-size "
                                 f"{where} is not a multiple of {what} {page}.")


# Kimi-K3 on SM100/SM103 with no attention backend on the line: its override picks trtllm_mla (with DCP: cutedsl_mla
# decode, trtllm_mla prefill), and the MLA page constraints pass keeps a --page-size of 32 or 64 and makes any other
# (or none) 64 (model_overrides/kimi_k3.py, overrides.py _mla_backend_page_constraints)
_K3_CHUNK_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:243-246@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/kimi_k3.py:51-54,84-94,122-135@0.5.23, "
              "sglang/srt/arg_groups/overrides.py:1143-1173,1198-1200@0.5.23, "
              "sglang/srt/arg_groups/parallel_hook.py:314,327-332@0.5.23",
    # the same override and page pass at 0.5.22 (helper smiss6; verified by tests/engine_oracle/test_sglang_python_rules_oracle.py)
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:242-245@0.5.22, "
              "sglang/srt/arg_groups/model_overrides/kimi_k3.py:51-54,85-94,137-150@0.5.22, "
              "sglang/srt/arg_groups/overrides.py:1084-1124,1148-1150@0.5.22, "
              "sglang/srt/arg_groups/parallel_hook.py:308,315-320@0.5.22",
}
KIMI_K3_ARCH = "KimiK3ForConditionalGeneration"


def kimi_k3_page_size(r, v: LineView) -> int | None:
    """The page size SGLang resolves for Kimi-K3 on SM100/SM103 when the line names no attention backend (None:
    another model or GPU, or a backend on the line: left to the release)."""
    arch = v.arch
    if getattr(arch, "architecture", None) != KIMI_K3_ARCH:
        return None
    if not _on_sm100(r) or _backend_given(v):
        return None
    page = _int(v.value("page_size"))
    return page if page in (32, 64) else 64


@rule("sglang-kimi-k3-chunked-prefill-page-size", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="Kimi-K3: the chunked prefill size (per attention-DP rank) must be a multiple of its MLA page size",
      why="SGLang asserts the chunked prefill size is a multiple of the KV page size outside a decode server. For "
          "Kimi-K3 on SM100/SM103 with no attention backend given, SGLang runs the TRT-LLM (and CuteDSL) MLA kernels, "
          "which take a page size of 32 or 64 only: any other --page-size, or none, becomes 64.",
      fix="Give --chunked-prefill-size a multiple of the page size (64, or 32 with --page-size 32) times the "
          "attention-DP width, or leave it unset.",
      source=_K3_CHUNK_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _K3_CHUNK_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_kimi_k3_chunked_prefill_page_size(r, c):
    yield from _chunk_not_multiple_of_page(r, lambda v: kimi_k3_page_size(r, v), "Kimi-K3's MLA page size")


# ------------------------------------------------------------------ the attention backend SGLang picks on SM100/SM103

# With no --attention-backend / --prefill-attention-backend, the prefill backend is the model override's (the
# registry, model_overrides/*.py) or get_default_attn_backend's (overrides.py _attention_backend_default). On
# SM100/SM103 (B200, B300, GB300) an MHA model gets trtllm_mha (fa4 with asymmetric K/V widths; flashinfer or triton
# with speculative top-k > 1, or for deterministic inference): never fa3 (Hopper) nor trtllm_mla (MLA models only).
# Only the architectures below are read here, each one's path followed in the release and judged by the oracle
# (tests/engine_oracle/test_sglang_python_rules_oracle.py); any other model is left to the release.
_ATTN_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_override_base.py:277-330@0.5.23, "
              "sglang/srt/arg_groups/overrides.py:1126-1140@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/gpt_oss.py:24-31@0.5.23, "
              "sglang/srt/arg_groups/kv_shard_hook.py:30-31,66-73@0.5.23",
}
# architecture -> how its SM100 prefill backend is chosen (none of them registers an override that picks fa3 or
# trtllm_mla on SM100: gpt_oss.py picks trtllm_mha; Llama registers no attention override). 0.5.22 refuses the same
# lines earlier (its default Rust tree core, kv_shard_hook.py:87@0.5.22): the rule lists 0.5.23 only
SM100_MHA_DEFAULT = {
    "LlamaForCausalLM": "get_default_attn_backend (MHA): trtllm_mha",
    "GptOssForCausalLM": "model_overrides/gpt_oss.py: trtllm_mha",
}
SM100_FAMILY = ("SM100", "SM103")


def sm100_default_prefill_backend(r, v: LineView) -> str | None:
    """The prefill attention backend SGLang resolves for this line on an SM100/SM103 GPU when the line names none,
    for the architectures of SM100_MHA_DEFAULT (None: another GPU, a backend given, or a model not read here)."""
    if not _on_sm100(r):
        return None
    if v.value("attention_backend") is not None or v.value("prefill_attention_backend") is not None:
        return None
    arch = v.arch
    name = getattr(arch, "architecture", None) if arch is not None else None
    if name not in SM100_MHA_DEFAULT or getattr(arch, "kv_lora_rank", None) is not None:
        return None
    return SM100_MHA_DEFAULT[name]


@rule("sglang-kv-cache-sharding-default-prefill-backend", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--enable-kv-cache-sharding needs the fa3 (or, for MLA, trtllm_mla) prefill backend: not the SM100 default",
      why="SGLang's KV cache sharding runs on the fa3 prefill attention backend, or trtllm_mla for plain-TP MLA. "
          "With no backend on the line, SGLang picks trtllm_mha for this MHA model on an SM100/SM103 GPU "
          "(get_default_attn_backend, or the model's own override), and the sharding check refuses it.",
      fix="Give --prefill-attention-backend fa3 (or --attention-backend fa3) with --enable-kv-cache-sharding, or "
          "drop --enable-kv-cache-sharding.",
      source=_ATTN_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _ATTN_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_kv_cache_sharding_default_prefill_backend(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_kv_cache_sharding"):
        return
    how = sm100_default_prefill_backend(r, v)
    if how is None:
        return
    yield "spec.extraArgs", ("--enable-kv-cache-sharding currently requires the fa3 prefill attention backend, or "
                             f"trtllm_mla for plain-TP MLA; with no backend on the line SGLang picks {how.split(': ')[1]} "
                             f"for this model on {r.hardware.sm} ({how.split(': ')[0]}).")


# ------------------------------------------------------------------ --enable-nvidia-megakernel: a fact of the image

_MEGA_SOURCES = {
    "0.5.23": "sglang/srt/kernel_plugins/nvidia/binding.py:288-298,363-382@0.5.23",
}


@rule("sglang-nvidia-megakernel-plugin", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--enable-nvidia-megakernel needs the sgl-nvidia-mega plugin in the serving image",
      why="SGLang refuses --enable-nvidia-megakernel at start-up unless the 'nvidia_megakernel' plugin "
          "(package sgl-nvidia-mega) is installed and allowed by SGLANG_PLUGINS; then the plugin's own specs decide "
          "which models and settings it serves. The sglang wheel does not depend on that package (not even through "
          "an extra): whether the image has it is a fact of the image, which a command line does not tell.",
      fix="Serve with an image that installs sgl-nvidia-mega (and, if SGLANG_PLUGINS is set, lists "
          "nvidia_megakernel in it), or drop --enable-nvidia-megakernel.",
      source=_MEGA_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _MEGA_SOURCES.items()})
def check_sglang_nvidia_megakernel_plugin(r, c):
    v = line_view(r)
    if v is None or v.value("enable_nvidia_megakernel") is not True:
        return
    yield "spec.extraArgs", ("--enable-nvidia-megakernel needs the 'nvidia_megakernel' plugin (package "
                             "sgl-nvidia-mega), which the sglang wheel does not install: unless the serving image "
                             "adds it, SGLang refuses the line at start-up.")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("sglang-dsv4-chunked-prefill-page-size", "sglang-kimi-k3-chunked-prefill-page-size",
            "sglang-kv-cache-sharding-default-prefill-backend",
            "sglang-nvidia-megakernel-plugin"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
