"""SGLang refusals of the held-out seed 57119 / 46901 misses that need computation (helper m11s, issue 31), beyond
what the engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml, block h-m11s) can express:

- ``--json-model-override-args`` that is not JSON (``json.loads`` in ``ModelConfig.__init__``), or JSON that is a
  truthy scalar (the config override then calls ``.items()`` on it);
- a page size above 1 on a hybrid-mamba model whose mamba radix-cache strategy is or resolves to ``no_buffer``
  (``_mamba_radix_cache_resolution``: ``auto`` takes ``no_buffer`` unless the model class supports the extra buffer
  on the triton linear-attention backend), which ``validate_mamba_no_buffer`` refuses.

Each rule reads the values the release's own parser gives the command line (checks.line_view), cites each release's
source, and is verified against the release by tests/engine_oracle/test_m11s_oracle.py (unit lines:
tests/core/test_m11s_rules.py)."""
from __future__ import annotations

import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_mfixS import _sources
from gpustack_k3.core.rules.sglang_checks_smiss7 import MODEL_OVERRIDE_ARCHS

SGL = [ENGINE_SGLANG]


# ------------------------------------------------------------------ --json-model-override-args: not a JSON object

# ModelConfig.__init__ json.loads the option (configs/model_config.py:612@0.5.23, :534@0.5.22: the JSONDecodeError
# of a value that is not JSON); the config reader then applies a truthy value with .items()
# (utils/hf_transformers/config.py:405-411@0.5.23, :377-383@0.5.22: an AttributeError for a number, string or true;
# a DeepSeek-V4.1 config first turns it into a dict, configs/deepseek_v41.py:23-24, which refuses those too). A falsy
# value (null, 0, false, "", [], {}) applies nothing and is accepted; a list is left alone here (dict() of a list of
# pairs is a dict for DeepSeek-V4.1).
_JSON_SOURCES = {
    "0.5.23": "sglang/srt/configs/model_config.py:612@0.5.23; "
              "sglang/srt/utils/hf_transformers/config.py:405-411@0.5.23; "
              "sglang/srt/configs/deepseek_v41.py:23-24@0.5.23",
    "0.5.22": "sglang/srt/configs/model_config.py:534@0.5.22; "
              "sglang/srt/utils/hf_transformers/config.py:377-383@0.5.22; "
              "sglang/srt/configs/deepseek_v41.py:23-24@0.5.22",
}


def json_override_refusal(v: LineView) -> str | None:
    """The release's refusal of ``--json-model-override-args``, or None."""
    if getattr(v.version, "key", None) not in _JSON_SOURCES or not v.given("json_model_override_args"):
        return None
    raw = v.value("json_model_override_args")
    if not isinstance(raw, str):
        return None
    try:
        val = json.loads(raw)
    except ValueError as exc:
        return (f"--json-model-override-args {raw!r} is not JSON ({exc}); SGLang json.loads it when it builds the "
                f"model config: give a JSON object of config.json fields or drop the option.")
    if val and isinstance(val, (int, float, str)):     # bool is an int: true
        return (f"--json-model-override-args {raw!r} is JSON but not an object: SGLang applies it to the model config "
                f"as a dictionary ('{type(val).__name__}' object has no attribute 'items'): give a JSON object of "
                f"config.json fields or drop the option.")
    return None


@rule("sglang-json-model-override-args-not-object", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--json-model-override-args is not a JSON object (SGLang)",
      why="SGLang reads --json-model-override-args with json.loads when it builds the model config and applies the "
          "result key by key: a value that is not JSON stops it with a JSONDecodeError, a number, string or true "
          "with an AttributeError.",
      fix="Give --json-model-override-args a JSON object of config.json fields, e.g. "
          "'{\"max_position_embeddings\": 131072}', or drop it.",
      source=_JSON_SOURCES["0.5.23"], sources=_sources(_JSON_SOURCES), no_cel=NO_CEL)
def check_sglang_json_model_override_args(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = json_override_refusal(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ no_buffer mamba radix cache with a page size

# handle_mamba_radix_cache (arg_groups/model_hook.py:1048-1076@0.5.23, :1024-1052@0.5.22) runs
# _mamba_radix_cache_resolution (arg_groups/overrides.py:454-487@0.5.23, :430-463@0.5.22): a model class of
# _MAMBA_RADIX_CACHE_ARCHS (:369-399@0.5.23, :347-376@0.5.22) with the radix cache on uses the mamba radix cache; the
# strategy auto becomes extra_buffer when the overlap schedule or a page size above 1 asks for it and
# supports_mamba_cache_extra_buffer (:438-450@0.5.23, :414-426@0.5.22: a class of _MAMBA_EXTRA_BUFFER_ARCHS,
# :403-435@0.5.23, :380-411@0.5.22, on --linear-attn-backend triton, the default) holds, else no_buffer; then
# validate_mamba_no_buffer (arg_groups/mamba_hook.py:156-157, both releases) refuses a page size but 1.
# Read here: a page size the line gives (the release's default and its backend-forced sizes are not read), a model
# class of the release's list (from config.json; a class the linear-attention spec registry adds by config predicate
# is not read), and no option on the line that may switch the radix cache off (the release's other resolution steps:
# --disable-radix-cache, a decode server, deterministic inference, a diffusion LLM, multi-item scoring, embedding).
_RADIX_ARCHS = frozenset({
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "FalconH1ForCausalLM", "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "JetNemotronForCausalLM", "JetVLMForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiLinearForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    "MiniCPMV4_6ForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "ZayaForCausalLM"})
_EXTRA_ARCHS = frozenset({
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "FalconH1ForCausalLM", "Glm5NextForConditionalGeneration", "GraniteMoeHybridForCausalLM",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP", "InternS2PreviewForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiLinearForCausalLM", "MiniCPMV4_6ForConditionalGeneration",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "Qwen3NextForCausalLM",
    "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration"})
RADIX_ARCHS = {"0.5.22": _RADIX_ARCHS, "0.5.23": _RADIX_ARCHS | {"MiniCPMV4_7ForConditionalGeneration"}}
EXTRA_ARCHS = {"0.5.22": _EXTRA_ARCHS, "0.5.23": _EXTRA_ARCHS | {"MiniCPMV4_7ForConditionalGeneration"}}
_NO_BUFFER_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/mamba_hook.py:156-157@0.5.23; sglang/srt/arg_groups/model_hook.py:1048-1076@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:369-399,403-435,438-450,454-487@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/mamba_hook.py:156-157@0.5.22; sglang/srt/arg_groups/model_hook.py:1024-1052@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:347-376,380-411,414-426,430-463@0.5.22",
}


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _radix_may_go_off(v: LineView) -> bool:
    return bool(v.value("disable_radix_cache") or v.value("disaggregation_mode") == "decode"
                or v.value("enable_deterministic_inference") or v.value("rl_on_policy_target") is not None
                or v.value("dllm_algorithm") is not None or v.value("enable_mis") or v.value("is_embedding"))


def mamba_no_buffer_page(v: LineView) -> str | None:
    """The release's refusal of a page size above 1 with the no_buffer mamba radix cache, or None."""
    key = getattr(v.version, "key", None)
    if key not in RADIX_ARCHS or not v.given("page_size"):
        return None
    page = _int(v.value("page_size"))
    arch = getattr(v.arch, "architecture", None) if v.arch is not None else None
    if page is None or page <= 1 or arch not in RADIX_ARCHS[key] or _radix_may_go_off(v):
        return None
    strategy = v.value("mamba_radix_cache_strategy")
    backend = v.value("linear_attn_backend")
    if strategy == "no_buffer":
        why = "--mamba-radix-cache-strategy no_buffer"
    elif strategy == "auto" and not (arch in EXTRA_ARCHS[key] and backend == "triton"):
        why = (f"the strategy auto resolves to no_buffer for {arch} with --linear-attn-backend {backend} (the extra "
               f"buffer needs a model class that supports it on the triton backend)")
    else:
        return None
    return (f"no_buffer only supports page_size=1: {why}, and --page-size is {page}. Give --page-size 1, or "
            f"--linear-attn-backend triton on a model class with extra-buffer support.")


@rule("sglang-mamba-no-buffer-page-size", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--page-size above 1 with the no_buffer mamba radix cache (SGLang)",
      why="On a hybrid-mamba model with the radix cache on SGLang keeps mamba states in the radix cache; the strategy "
          "auto takes extra_buffer only for a model class that supports it on --linear-attn-backend triton, else "
          "no_buffer, and no_buffer supports only page size 1.",
      fix="Give --page-size 1, or keep --linear-attn-backend triton (the default) on a model class with extra-buffer "
          "support, or give --mamba-radix-cache-strategy extra_buffer where the model supports it.",
      source=_NO_BUFFER_SOURCES["0.5.23"], sources=_sources(_NO_BUFFER_SOURCES), no_cel=NO_CEL)
def check_sglang_mamba_no_buffer_page_size(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = mamba_no_buffer_page(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ unified memory, DCP, an MLA backend it did not audit

# handle_unified_memory_pool (arg_groups/kv_cache_hook.py:528-531,687-688@0.5.23, :525-528,680-681@0.5.22) runs
# _validate_unified_memory_dcp with --dcp-size > 1; after the MLA-only assert (entry sglang-unified-memory-dcp-mla-only),
# the hybrid-SWA and PD asserts (refusals too), it refuses a prefill or decode backend outside dcp_allowed
# (:751-754@0.5.23: flashinfer, trtllm_mla, cutedsl_mla; :756-759@0.5.22: also tokenspeed_mla), the split backends
# falling back to --attention-backend (model_override_base.py:138-150). Read here: the backends the line gives (an
# explicit one is kept: the release's default for an unset side is not read), on an MLA model (kv_lora_rank) without
# a model override that may set its own backends (sglang_checks_smiss7.MODEL_OVERRIDE_ARCHS) but DeepSeek-V3's, which
# keeps an explicit backend (tests/engine_oracle/test_m11s_oracle.py).
DCP_ALLOWED = {"0.5.23": ("cutedsl_mla", "flashinfer", "trtllm_mla"),
               "0.5.22": ("cutedsl_mla", "flashinfer", "tokenspeed_mla", "trtllm_mla")}
_DCP_OVERRIDE_READ = ("DeepseekV3ForCausalLM",)
_DCP_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_cache_hook.py:528-531,687-688,719-761@0.5.23; "
              "sglang/srt/arg_groups/model_override_base.py:138-150@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_cache_hook.py:525-528,680-681,724-766@0.5.22; "
              "sglang/srt/arg_groups/model_override_base.py:138-150@0.5.22",
}


def unified_memory_dcp_backend(v: LineView) -> str | None:
    """The release's refusal of an explicit attention backend it has not audited for unified memory with DCP."""
    key = getattr(v.version, "key", None)
    if key not in DCP_ALLOWED or not v.value("enable_unified_memory"):
        return None
    dcp = _int(v.value("dcp_size"))
    arch = v.arch
    if dcp is None or dcp <= 1 or arch is None or not getattr(arch, "kv_lora_rank", None):
        return None
    name = getattr(arch, "architecture", None)
    if name in MODEL_OVERRIDE_ARCHS and name not in _DCP_OVERRIDE_READ:
        return None
    base = v.value("attention_backend") if v.given("attention_backend") else None
    sides = [v.value(d) if v.given(d) else base for d in ("prefill_attention_backend", "decode_attention_backend")]
    bad = sorted({b for b in sides if isinstance(b, str) and b not in DCP_ALLOWED[key]})
    if not bad:
        return None
    return (f"--enable-unified-memory with decode context parallelism (--dcp-size {dcp}) requires "
            f"{list(DCP_ALLOWED[key])} for the full-attention layers; got {bad}. Give --attention-backend flashinfer "
            f"(or trtllm_mla), or drop --dcp-size or --enable-unified-memory.")


@rule("sglang-unified-memory-dcp-attention-backend", checked_by="oracle", family="args", severity="error",
      engines=SGL, field="spec.extraArgs",
      title="--enable-unified-memory with --dcp-size > 1 on an attention backend SGLang has not audited for it",
      why="Under decode context parallelism the unified pool hands out widened virtual page ids; only flashinfer and "
          "the trtllm_mla / cutedsl_mla family (0.5.22: also tokenspeed_mla) translate them through the pool's "
          "virtual-to-physical page table, so SGLang refuses any other prefill or decode backend.",
      fix="Give --attention-backend flashinfer or trtllm_mla (and no other prefill/decode backend), or drop "
          "--dcp-size or --enable-unified-memory.",
      source=_DCP_SOURCES["0.5.23"], sources=_sources(_DCP_SOURCES), no_cel=NO_CEL)
def check_sglang_unified_memory_dcp_attention_backend(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = unified_memory_dcp_backend(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ FP4 KV cache on an MLA model: the attention backend

# handle_kv4_compatibility (arg_groups/kv_cache_hook.py:112-125, both releases) with --kv-cache-dtype nvfp4 or
# fp4_mx_block16: when prefill and decode take the same backend (:266) and it is not fa4, an MLA model
# (use_mla_backend) needs flashinfer or trtllm_mla (:296-305). Read here: --attention-backend given and no split
# prefill/decode backend (the release's default is not read), not fa4 and not trtllm_mha (the SM100 NVFP4 path has
# its own checks), an MLA model (kv_lora_rank) without a model override but DeepSeek-V3's (it keeps an explicit
# backend, tests/engine_oracle/test_m11s_oracle.py).
KV4_MLA_BACKENDS = ("flashinfer", "trtllm_mla")
_KV4_SOURCES = {rel: f"sglang/srt/arg_groups/kv_cache_hook.py:112-125,266,296-305@{rel}" for rel in ("0.5.23", "0.5.22")}


def kv4_mla_backend(v: LineView) -> str | None:
    """The release's refusal of an FP4 KV cache on an MLA model with an attention backend it does not accept."""
    if getattr(v.version, "key", None) not in _KV4_SOURCES:
        return None
    dtype = v.value("kv_cache_dtype")
    if dtype not in ("nvfp4", "fp4_mx_block16") or not v.given("attention_backend"):
        return None
    if v.given("prefill_attention_backend") or v.given("decode_attention_backend"):
        return None
    backend = v.value("attention_backend")
    arch = v.arch
    if not isinstance(backend, str) or backend in (*KV4_MLA_BACKENDS, "fa4", "trtllm_mha"):
        return None
    if arch is None or not getattr(arch, "kv_lora_rank", None):
        return None
    name = getattr(arch, "architecture", None)
    if name in MODEL_OVERRIDE_ARCHS and name not in _DCP_OVERRIDE_READ:
        return None
    return (f"KV4 MLA expects attention_backend to be one of {list(KV4_MLA_BACKENDS)}, but got {backend} "
            f"(--kv-cache-dtype {dtype} on an MLA model): give --attention-backend flashinfer or trtllm_mla, or "
            f"another --kv-cache-dtype.")


@rule("sglang-kv4-mla-attention-backend", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="FP4 KV cache (nvfp4, fp4_mx_block16) on an MLA model with an attention backend but flashinfer / trtllm_mla",
      why="With an FP4 KV cache and one attention backend for prefill and decode (not fa4), SGLang accepts only "
          "flashinfer and trtllm_mla for an MLA model: the other backends do not read the FP4 MLA cache.",
      fix="Give --attention-backend flashinfer or trtllm_mla, or another --kv-cache-dtype.",
      source=_KV4_SOURCES["0.5.23"], sources=_sources(_KV4_SOURCES), no_cel=NO_CEL)
def check_sglang_kv4_mla_attention_backend(r, c):
    v = line_view(r)
    if v is None:
        return
    msg = kv4_mla_backend(v)
    if msg is not None:
        yield "spec.extraArgs", msg


for _id in ("sglang-json-model-override-args-not-object", "sglang-mamba-no-buffer-page-size",
            "sglang-unified-memory-dcp-attention-backend", "sglang-kv4-mla-attention-backend"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
