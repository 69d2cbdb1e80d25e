"""The model's maximum context as each engine release derives it from config.json (``core.model_config.ModelArch``),
with rope scaling as the release treats it; the catalog's figure where no config.json was given.

- vLLM (``_get_and_verify_max_len``, config/model.py:2545-2684@0.33.0): the smallest of the length keys
  (model_arch_config_convertor.py:374-407@0.33.0), times the rope ``factor`` of every rope-parameter set whose
  ``rope_type`` is not one that leaves ``max_position_embeddings`` already scaled (su, longrope, llama3, yarn,
  deepseek_yarn, deepseek_llama_scaling); not for a gemma3 model type; a ``null`` factor counts as 1.0.
- SGLang (``get_context_length``, utils/hf_transformers/common.py:668-694@0.5.23): the first length key present
  times ``rope_scaling["factor"]``, unless ``original_max_position_embeddings`` is in it or its ``rope_type`` is
  llama3. The release pins transformers 5.19.0, which puts ``original_max_position_embeddings`` into the rope
  parameters of every yarn, llama3 and longrope config it standardises (modeling_rope_utils.py:812-820@5.19.0): for
  those the factor is not applied either. A rope dict nested per layer type has no top-level factor (1).
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG

_VLLM_PRESCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
_SGLANG_PRESCALED = ("llama3", "yarn", "longrope")


def _rope_sets(rope: Any) -> list[dict]:
    """vLLM's iter_rope_parameters (transformers_utils/config.py:690-699@0.33.0): one dict, or one per layer type."""
    if not isinstance(rope, dict) or not rope:
        return []
    if rope and all(isinstance(v, dict) for v in rope.values()):
        return [v for v in rope.values() if v]
    return [rope]


def _rope_type(rp: dict) -> Any:
    return rp.get("rope_type", rp.get("type", "default"))   # transformers' standardize_rope_params


def vllm_rope_factor(arch: Any) -> float:
    sets = _rope_sets(arch.rope_scaling)
    if not sets or "gemma3" in str(arch.model_type or ""):
        return 1.0
    factor: Any = 1.0
    for rp in sets:
        if _rope_type(rp) not in _VLLM_PRESCALED:
            factor = rp.get("factor", factor)
    return 1.0 if factor is None else float(factor)


def sglang_rope_factor(arch: Any) -> float:
    rope = arch.rope_scaling
    if not isinstance(rope, dict) or not rope or _rope_sets(rope) != [rope]:
        return 1.0
    if "original_max_position_embeddings" in rope or _rope_type(rope) in _SGLANG_PRESCALED:
        return 1.0
    return float(rope.get("factor", 1) or 1)


def model_max_len(r: Any) -> tuple[int, str] | None:
    """(the model's maximum context as the release derives it, how it was obtained); None when nothing says."""
    a = getattr(r, "arch", None)
    if a is not None and a.max_positions:
        sglang = r.engine.engine == ENGINE_SGLANG
        factor = sglang_rope_factor(a) if sglang else vllm_rope_factor(a)
        how = f"{a.max_positions:,} positions in {a.source}"
        if factor != 1.0:
            how += f" x rope factor {factor:g}"
        return int(a.max_positions * factor), how
    if r.model is not None:
        return r.model.max_context, "the catalog's max_context"
    return None
