"""vLLM config-time refusals the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot verify with
its examples: the hybrid KV cache manager (HMA) enabled explicitly (``--no-disable-hybrid-kv-cache-manager``) on a
model with chunked local attention (config.json ``attention_chunk_size``) while
VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is 0 (helper am10v; no catalog model or oracle shape has the
field, so the lines need a config.json copy: tests/core/test_am10v_rules.py holds them,
tests/engine_oracle/test_am10v_rules_oracle.py has each release judge them).

VllmConfig.__post_init__ decides HMA: chunked local attention without the variable's consent needs HMA off
(need_disable_hybrid_kv_cache_manager); an explicit ``disable_hybrid_kv_cache_manager=False`` is then refused
("Hybrid KV cache manager was explicitly enabled but is not supported in this configuration"). The EAGLE branch of
the same test (chunked local attention with an EAGLE drafter) is not judged here (left to the engine).
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.multimodal import builds_multimodal_config
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"

_SOURCES = {
    "0.28.0": "vllm config/vllm.py:1728-1782@0.28.0; config/model.py:623-625@0.28.0, envs.py:1835-1837@0.28.0",
    "0.29.0": "vllm config/vllm.py:1790-1844@0.29.0; config/model.py:635-637@0.29.0, envs.py:1834-1836@0.29.0",
    "0.33.0": "vllm config/vllm.py:2235-2289@0.33.0; config/model.py:695-697@0.33.0, envs.py:1931-1933@0.33.0",
    "0.34.0": "vllm config/vllm.py:2156-2210@0.34.0; config/model.py:712-714@0.34.0, envs.py:2040-2042@0.34.0",
}


def chunked_local_attention_hma_refused(explicit_hma: bool, chunk_size: object, env_value: str | None) -> bool:
    """The release's refusal: HMA enabled explicitly, the text config's attention_chunk_size set and the variable
    read as ``bool(int(value))`` (default "1") false. A value int() cannot read is not judged (the release fails on it
    elsewhere)."""
    if not explicit_hma or chunk_size is None:
        return False
    try:
        allowed = bool(int(env_value if env_value is not None else "1"))
    except ValueError:
        return False
    return not allowed


@rule("vllm-hma-explicit-chunked-local-attention", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="the hybrid KV cache manager enabled explicitly on chunked local attention without its opt-in variable",
      why="With chunked local attention (config.json attention_chunk_size) vLLM turns the hybrid KV cache manager "
          f"off unless {ENV}=1 (its default); with the variable at 0 an explicit "
          "--no-disable-hybrid-kv-cache-manager cannot be honoured and VllmConfig refuses it.",
      fix=f"Drop --no-disable-hybrid-kv-cache-manager (let vLLM decide), or set {ENV}=1.",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SOURCES.items()},
      no_cel="a flag against a config.json figure and an environment variable's integer reading; left to validate")
def check_vllm_hma_explicit_chunked_local_attention(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None or v.given("hf_overrides"):
        return
    text = getattr(arch, "text", None) or {}
    explicit = v.given("disable_hybrid_kv_cache_manager") and v.value("disable_hybrid_kv_cache_manager") is False
    if chunked_local_attention_hma_refused(explicit, text.get("attention_chunk_size"), v.env.get(ENV)):
        yield "spec.extraArgs", (
            "Hybrid KV cache manager was explicitly enabled but is not supported in this configuration "
            f"(attention_chunk_size {text.get('attention_chunk_size')} with {ENV}={v.env.get(ENV)}; drop "
            f"--no-disable-hybrid-kv-cache-manager or set {ENV}=1)")


# ------------------------------------------------------------------ multimodal facts (the release's model registry)

# VllmConfig.__post_init__: a multimodal model (MultiModalConfig built: core/rules/multimodal.py) with --mm-tensor-ipc
# torch_shm and VLLM_WORKER_MULTIPROC_METHOD other than spawn (os.environ.get, compared as written)
_SHM_SPAWN_SOURCES = {
    "0.28.0": "vllm config/vllm.py:1261-1270@0.28.0",
    "0.29.0": "vllm config/vllm.py:1347-1356@0.29.0",
    "0.33.0": "vllm config/vllm.py:1743-1752@0.33.0",
    "0.34.0": "vllm config/vllm.py:1674-1683@0.34.0",
}


@rule("vllm-mm-torch-shm-needs-spawn", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.env.VLLM_WORKER_MULTIPROC_METHOD",
      title="--mm-tensor-ipc torch_shm on a multimodal model without VLLM_WORKER_MULTIPROC_METHOD=spawn",
      why="torch_shm shares multimodal tensors through shared memory that forked workers do not inherit safely; "
          "VllmConfig refuses it for a multimodal model unless the workers are spawned.",
      fix="Set VLLM_WORKER_MULTIPROC_METHOD=spawn in the environment, or drop --mm-tensor-ipc torch_shm.",
      source=_SHM_SPAWN_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SHM_SPAWN_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal, with an option and an "
             "environment variable; left to validate")
def check_vllm_mm_torch_shm_needs_spawn(r, c):
    v = line_view(r)
    if v is None or v.value("mm_tensor_ipc") != "torch_shm" or builds_multimodal_config(r) is not True:
        return
    method = v.env.get("VLLM_WORKER_MULTIPROC_METHOD")
    if method != "spawn":
        yield "spec.env.VLLM_WORKER_MULTIPROC_METHOD", (
            f"torch_shm is known to fail without VLLM_WORKER_MULTIPROC_METHOD set to spawn (it is "
            f"{'unset' if method is None else repr(method)}; --mm-tensor-ipc torch_shm on a multimodal model)")


# VllmConfig._resolve_mm_encoder_only: an encode-only EC instance (ec_connector set, ec_role ec_producer:
# ECTransferConfig.is_encode_only) needs MultiModalConfig, i.e. a multimodal architecture
_EC_PRODUCER_SOURCES = {
    "0.29.0": "vllm config/vllm.py:1081,2458-2469@0.29.0; config/ec_transfer.py:10-12,99-115@0.29.0",
    "0.33.0": "vllm config/vllm.py:1521,2889-2900@0.33.0; config/ec_transfer.py:10-12,101-117@0.33.0",
    "0.34.0": "vllm config/vllm.py:1462,2970-2981@0.34.0; config/ec_transfer.py:9-11,92-108@0.34.0",
}


@rule("vllm-ec-producer-needs-multimodal", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--ec-transfer-config ec_role ec_producer (encoder-only) on a text-only model",
      why="An encoder-cache producer runs only the multimodal encoder and hands its outputs to consumers; VllmConfig "
          "refuses the encode-only role for a model without a multimodal encoder.",
      fix="Drop --ec-transfer-config (or use the ec_producer role on a multimodal model's encoder instance).",
      source=_EC_PRODUCER_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _EC_PRODUCER_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal, with a field of a JSON option; "
             "left to validate")
def check_vllm_ec_producer_needs_multimodal(r, c):
    v = line_view(r)
    if v is None:
        return
    ec = v.value("ec_transfer_config")
    if not isinstance(ec, dict) or ec.get("ec_connector") is None or ec.get("ec_role") != "ec_producer":
        return
    if builds_multimodal_config(r) is False:
        yield "spec.extraArgs", ("An EC producer-only instance requires a multimodal model. (--ec-transfer-config "
                                 "ec_role ec_producer on a text-only architecture)")


# VllmConfig.__post_init__: --language-model-only (MultiModalConfig.language_model_only) with the compilation config's
# cudagraph_mm_encoder (default False) on a multimodal model
_LM_ONLY_SOURCES = {
    "0.29.0": "vllm config/vllm.py:1130-1141@0.29.0; config/compilation.py:543@0.29.0",
    "0.33.0": "vllm config/vllm.py:1556-1567@0.33.0; config/compilation.py:528@0.33.0",
    "0.34.0": "vllm config/vllm.py:1503-1514@0.34.0; config/compilation.py:609@0.34.0",
}


@rule("vllm-language-model-only-mm-encoder-cudagraph", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--language-model-only with cudagraph_mm_encoder on a multimodal model",
      why="--language-model-only disables every multimodal input, so the encoder CUDA graphs cudagraph_mm_encoder "
          "asks for would never run; VllmConfig refuses the two together.",
      fix="Drop cudagraph_mm_encoder from --compilation-config, or drop --language-model-only.",
      source=_LM_ONLY_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _LM_ONLY_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal, with a field of a JSON option; "
             "left to validate")
def check_vllm_language_model_only_mm_encoder_cudagraph(r, c):
    v = line_view(r)
    if v is None or v.value("language_model_only") is not True:
        return
    cc = v.value("compilation_config")
    if not isinstance(cc, dict) or cc.get("cudagraph_mm_encoder") is not True:
        return
    if builds_multimodal_config(r) is True:
        yield "spec.extraArgs", (
            "--language-model-only is incompatible with cudagraph_mm_encoder=True, since it disables all multimodal "
            "inputs and the multimodal encoder is never run. Please disable one of them.")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-hma-explicit-chunked-local-attention", "vllm-mm-torch-shm-needs-spawn",
            "vllm-ec-producer-needs-multimodal", "vllm-language-model-only-mm-encoder-cudagraph"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
