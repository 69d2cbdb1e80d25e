"""The checkpoint's quantization method as a vLLM release resolves it when it builds the model config
(``ModelConfig._verify_quantization``, config/model.py:1389-1469@0.33.0), from its config.json
(``core.model_config.ModelArch``: a local file, ``--model-config``, or the catalog's architecture block, which is the
engine oracle's file for the catalogued models: gpustack_k3/oracle/models.py).

- The method is ``quantization_config.quant_method``, lower case, compressed_tensors -> compressed-tensors
  (transformers_utils/model_arch_config_convertor.py:241-292@0.33.0).
- Kimi-K3 (KimiK3ForConditionalGeneration, KimiK3MTPModel): a compressed-tensors checkpoint of format
  ``mxfp4-pack-quantized`` (the public Kimi-K3 config.json) is rewritten to ``mxfp4`` before the method is resolved
  (``KimiK3ForConditionalGenerationConfig.verify_and_update_model_config``, KIMI_K3_MXFP4 below).
- Overrides probed before the comparison claim a checkpoint whatever ``--quantization`` says (the release then
  takes their method, no mismatch): GPT-OSS mxfp4 -> gpt_oss_mxfp4 (0.28.0 on), an fp8 DeepSeek-V4 / V4.1 checkpoint,
  or any fp8 checkpoint with ``--quantization deepseek_v4_fp8``, -> deepseek_v4_fp8 (DSV4_FP8 below).
"""
from __future__ import annotations

from typing import Any

KIMI_K3_ARCHITECTURES = ("KimiK3ForConditionalGeneration", "KimiK3MTPModel")
KIMI_K3_MXFP4 = {
    "0.28.0": "vllm model_executor/models/config.py:342-372,925-926@0.28.0",
    "0.29.0": "vllm model_executor/models/config.py:352-382,1023-1024@0.29.0",
    "0.33.0": "vllm model_executor/models/config.py:492-522,1240-1241@0.33.0",
    "0.34.0": "vllm model_executor/models/config.py:786-816,1572-1573@0.34.0",
}
# DeepseekV4FP8Config.override_quantization_method: the model types it claims an fp8 checkpoint for. On a CUDA node
# 0.33.0 and 0.34.0 register the V4.1 class (model_executor/layers/quantization/__init__.py:120-132@0.33.0,
# :121-133@0.34.0), which also takes the V4.1 types.
DSV4_FP8 = {
    "0.28.0": (("deepseek_v4",), "vllm models/deepseek_v4/quant_config.py:135-152@0.28.0"),
    "0.29.0": (("deepseek_v4",), "vllm models/deepseek_v4/quant_config.py:135-152@0.29.0"),
    "0.33.0": (("deepseek_v4", "deepseek_v4_text", "deepseek_v41", "deepseek_v41_text"),
               "vllm models/deepseek_v41/quant_config.py:164-192@0.33.0"),
    "0.34.0": (("deepseek_v4", "deepseek_v4_text", "deepseek_v41", "deepseek_v41_text"),
               "vllm models/deepseek_v41/quant_config.py:164-192@0.34.0"),
}


def checkpoint_quant(arch: Any) -> tuple[bool, str | None]:
    """(decidable, the checkpoint's quant_method as the release normalises it: lower case, compressed_tensors ->
    compressed-tensors; None: no quantization_config). Not decidable: no config.json, a compression_config, a
    ModelOpt config (producer / quantization / hf_quant_config.json) or a config without a quant_method string."""
    if arch is None:
        return False, None
    raw = arch.raw if isinstance(arch.raw, dict) else {}
    text = arch.text if isinstance(arch.text, dict) else {}
    if arch.hf_quant is not None or "compression_config" in raw or "compression_config" in text:
        return False, None
    q = arch.quant_config
    if not q:
        return True, None
    if "producer" in q or "quantization" in q or not isinstance(q.get("quant_method"), str):
        return False, None
    return True, q["quant_method"].lower().replace("compressed_tensors", "compressed-tensors")


def _model_types(arch: Any) -> set:
    raw = arch.raw if isinstance(arch.raw, dict) else {}
    return {getattr(arch, "model_type", None), raw.get("model_type")} - {None}


def vllm_quant(arch: Any, version: str, user: str | None = None) -> tuple[bool, str | None, str | None]:
    """(decidable, the checkpoint's method after the release's rewrite (KIMI_K3_MXFP4), the method an override claims
    the checkpoint for whatever ``user`` (--quantization) says, None: none claims it)."""
    decidable, method = checkpoint_quant(arch)
    if not decidable or method is None:
        return decidable, method, None
    q = arch.quant_config or {}
    if (method == "compressed-tensors" and q.get("format") == "mxfp4-pack-quantized" and version in KIMI_K3_MXFP4
            and getattr(arch, "architecture", None) in KIMI_K3_ARCHITECTURES):
        method = "mxfp4"
    claimed = None
    if method == "mxfp4" and "gpt_oss" in _model_types(arch) and version != "0.11.0":
        claimed = "gpt_oss_mxfp4"      # Mxfp4Config / GptOssMxfp4Config override (mxfp4.py:129-146@0.33.0)
    if method == "fp8" and version in DSV4_FP8 and (user == "deepseek_v4_fp8" or _model_types(arch) & set(DSV4_FP8[version][0])):
        claimed = "deepseek_v4_fp8"
    return True, method, claimed
