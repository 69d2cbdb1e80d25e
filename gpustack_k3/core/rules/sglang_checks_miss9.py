"""The MLA backend and page size SGLang picks for the DeepSeek family on SM100/SM103 (helper miss9), for rule
sglang-ngram-topk-page-size (core/rules/sglang.py).

SGLang registers one config-time override for the DeepSeek family (``_deepseek_family_overrides``, registered for
the architectures of ``DEEPSEEK_FAMILY``). A model outside DSA (``is_deepseek_dsa``: one of its architectures AND an
``index_topk`` in the config) takes its "DeepSeek V3/R1/V3.1" branch: on an SM100-family GPU (B200, B300, GB300) with
none of --attention-backend / --prefill-attention-backend / --decode-attention-backend given it sets the attention
backend to trtllm_mla, and the MLA page pass (``_mla_backend_page_constraints``) keeps a --page-size of 32 or 64 and
makes any other (or none) 64. The model is read through the one config.json reader the rules use (the line view's
``arch``: core/model_config.py): its first architecture, and ``index_topk`` at the config's top level as written
(``_hf_attr(hf_config, "index_topk")``). tests/core/test_miss9_rules.py and tests/engine_oracle/test_miss9_oracle.py
hold the lines.
"""
from __future__ import annotations

from gpustack_k3.core.rules.checks import line_view

# model_overrides/deepseek_v2.py:37-50 (the registration), 99 (the DSA branch), 178-189 (SM100: trtllm_mla) and
# configs/model_config.py:191-212 (is_deepseek_dsa) @0.5.23; the same at deepseek_v2.py:37-50,99,179-190 and
# model_config.py:190-211 @0.5.22
DEEPSEEK_FAMILY = {
    "0.5.22": ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
               "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
               "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
               "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM"),
    "0.5.23": ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
               "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
               "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
               "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM"),
}
SM100_FAMILY = ("SM100", "SM103")
_BACKENDS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def deepseek_family_trtllm_page(r) -> tuple[str, int] | None:
    """(architecture, page size) where the release's DeepSeek-family override gives this line trtllm_mla on an
    SM100-family GPU: a registered architecture without index_topk in its config.json, no attention backend on the
    line, no decode context parallelism (its MLA path is another resolution: left to the release). None otherwise,
    and where the model's config.json (or the catalog's block for it) is not known."""
    archs = DEEPSEEK_FAMILY.get(getattr(r.version, "key", None))
    hw = getattr(r, "hardware", None)
    if archs is None or hw is None or str(getattr(hw, "sm", "")).upper() not in SM100_FAMILY or r.dcp > 1:
        return None
    v = line_view(r)
    if v is None or any(v.value(d) is not None for d in _BACKENDS):
        return None
    arch = v.arch
    name = getattr(arch, "architecture", None) if arch is not None else None
    if name not in archs:
        return None
    raw = getattr(arch, "raw", None)
    if not isinstance(raw, dict) or raw.get("index_topk") is not None:
        return None        # DSA (another branch), or no config.json object to read index_topk from
    page = v.value("page_size")
    return name, (page if page in (32, 64) else 64)
