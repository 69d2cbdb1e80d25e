"""What a vLLM release's model registry says of the line's architecture, and the refusals that follow from it.

The facts come from one per-release table, gpustack_k3/catalog/data/engines/vllm-model-registry.json, written by
tools/engine_parsers/model_registry.py from the unpacked wheels (``ast``; nothing imported): every architecture of
``_VLLM_MODELS`` and what ``_ModelInfo.from_model_cls`` would say of its class (``generate`` =
is_text_generation_model, ``pooling`` = is_pooling_model, ``pp`` = supports_pp, ``multimodal``, ``video_pruning``),
``unresolved`` where the static reading cannot decide (the rules stay silent there), and the keys of
``_TRANSFORMERS_BACKEND_MODELS``. The architecture is the line's model's (its config.json, else the catalog entry's
block: ``Resolved.model_arch``, read once by core/model_config.py), through ``multimodal.release_architecture`` as the
LoRA and multimodal tables are.

Every rule here is silent where the registry may answer for another class than the table's: ``--model-impl
transformers``/``terratorch`` (the Transformers backend's class), ``--hf-overrides`` (may rename the architecture), a
config.json naming several architectures, and 0.11.0's ``--task`` (it sets runner/convert).

- vllm-runner-unsupported-by-model: an explicit ``--runner`` the class cannot run (ModelConfig.__post_init__:
  pooling-only class with --runner generate/draft, neither generative nor pooling with --runner generate, not pooling
  with --runner pooling --convert none);
- vllm-pp-unsupported-by-model: --pipeline-parallel-size > 1 on a class without SupportsPP
  (ModelConfig.verify_with_parallel_config);
- vllm-video-pruning-method-unsupported-by-model: a video pruning method (rate > 0) the multimodal class does not list;
- vllm-renderer-workers-mm-cache-pooling: --renderer-num-workers > 1 with the multimodal processor cache on, for a
  multimodal model run as a pooling model;
- vllm-model-impl-transformers-unresolvable (error) / -remote-code (warning): --model-impl transformers on a catalog
  model whose architecture no transformers release holds (Kimi-K3, DeepSeek-V4.1 are custom-code checkpoints): without
  --trust-remote-code or an ``AutoModel*`` entry in config.json's ``auto_map`` the release refuses
  (registry.py ``_try_resolve_transformers``); with both, the checkpoint's own remote code decides
  (``try_get_class_from_dynamic_module`` + ``is_backend_compatible()``): a warning;
- vllm-architecture-not-registered-fallback (warning): an architecture the release does not register, on a model the
  catalog does not know, with the Transformers fallback open (``--model-impl auto``): whether the image's transformers
  (or the checkpoint's remote code) holds it decides. Rule model-not-in-release (core/rules/spec.py) refuses the rest.
tests/core/test_reg11_rules.py holds the lines; tests/engine_oracle/test_reg11_rules_oracle.py has each release judge
them.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.rules.args import extra_arg, extra_arg_value
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.multimodal import release_architecture
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

REGISTRY_DATA = "engines/vllm-model-registry.json"
IMPL_NATIVE = ENGINE_VLLM     # --model-impl vllm: the engine's own implementation is named after it (config/model.py)
RUNNER = "vllm-runner-unsupported-by-model"
PP = "vllm-pp-unsupported-by-model"
PRUNING = "vllm-video-pruning-method-unsupported-by-model"
RENDERER = "vllm-renderer-workers-mm-cache-pooling"
TF_ERROR = "vllm-model-impl-transformers-unresolvable"
TF_WARN = "vllm-model-impl-transformers-remote-code"
FALLBACK = "vllm-architecture-not-registered-fallback"

_NOTE = "; the registry's facts: gpustack_k3/catalog/data/engines/vllm-model-registry.json " \
        "(tools/engine_parsers/model_registry.py)"


def _src(sites: dict[str, str]) -> dict[str, str]:
    """The rule's sources per release (vllm-0.32.0-cpu is left out: its oracle runs the installed engine, which
    does not read the tests' model directory copies, so its lines are not verified)."""
    return {f"vllm {k}": f"vllm {v}@{k}{_NOTE}" for k, v in sites.items()}


# ModelConfig.__post_init__ (config/model.py): the runner checks
_RUNNER_SITES = {
    "0.11.0": "config/model.py:526-539",
    "0.28.0": "config/model.py:641-665",
    "0.29.0": "config/model.py:653-677",
    "0.33.0": "config/model.py:713-737",
    "0.34.0": "config/model.py:730-754",
}
_POOLING_CONVERTS = {"0.11.0": ("embed", "classify", "reward")}   # _RUNNER_CONVERTS["pooling"]; else embed|classify
# ModelConfig.verify_with_parallel_config
_PP_SITES = {
    "0.11.0": "config/model.py:1059-1064",
    "0.28.0": "config/model.py:1378-1384",
    "0.29.0": "config/model.py:1424-1430",
    "0.33.0": "config/model.py:1570-1576",
    "0.34.0": "config/model.py:1590-1596",
}
# ModelConfig.__post_init__, inside ``if self._model_info.supports_multimodal`` (MultiModalConfig built)
_PRUNING_SITES = {
    "0.28.0": "config/model.py:804-815",
    "0.29.0": "config/model.py:816-827",
    "0.33.0": "config/model.py:883-894",
    "0.34.0": "config/model.py:903-914",
}
_RENDERER_SITES = {
    "0.28.0": "config/model.py:817-829",
    "0.29.0": "config/model.py:829-841",
    "0.33.0": "config/model.py:896-908",
    "0.34.0": "config/model.py:916-928",
}
# ModelRegistry._try_resolve_transformers: 'Cannot find model module' with --model-impl transformers
_TF_SITES = {
    "0.11.0": "model_executor/models/registry.py:684-689",
    "0.28.0": "model_executor/models/registry.py:1226-1232",
    "0.29.0": "model_executor/models/registry.py:1240-1246",
    "0.33.0": "model_executor/models/registry.py:1317-1323",
    "0.34.0": "model_executor/models/registry.py:1396-1402",
}
# ModelRegistry.inspect_model_cls: the Transformers fallback (_try_resolve_transformers) finds no class, then
# _raise_for_unsupported
_FALLBACK_SITES = {
    "0.11.0": "model_executor/models/registry.py:621-623",
    "0.28.0": "model_executor/models/registry.py:1158-1161",
    "0.29.0": "model_executor/models/registry.py:1172-1175",
    "0.33.0": "model_executor/models/registry.py:1249-1252",
    "0.34.0": "model_executor/models/registry.py:1328-1331",
}


@functools.lru_cache(maxsize=1)
def registry_table() -> dict[str, dict]:
    """Per release key: the table tools/engine_parsers/model_registry.py wrote."""
    return json.loads((DATA / REGISTRY_DATA).read_text(encoding="utf-8"))["releases"]


def registered(r: Any) -> bool | None:
    """Whether the release registers the line's model's architecture (None: no architecture, or no table for the
    release). The one reading of ``_VLLM_MODELS`` model-not-in-release and the corpus use."""
    found = release_architecture(r, registry_table())
    if found is None:
        return None
    arch, rel = found
    return arch in rel["architectures"]


def unregistered_catalog_models(release_key: str, catalog: Any) -> list[str]:
    """The catalog's vLLM models whose architecture (the catalog entry's block) the release does not register: what
    the hand-kept trait ``unregistered_models`` listed (tools/engine_oracle/corpus.py reads it)."""
    rel = registry_table().get(release_key)
    if rel is None:
        return []
    out = []
    for name, m in sorted(catalog.models.items()):
        arch = ((getattr(m, "architecture", None) and m.architecture.config) or {}).get("architectures") or []
        if arch and arch[0] not in rel["architectures"]:
            out.append(name)
    return out


def _single_arch(r: Any) -> bool:
    raw = getattr(r.model_arch, "raw", None)
    archs = (raw or {}).get("architectures") if isinstance(raw, dict) else None
    return archs is None or len(archs) <= 1


def _info(r: Any):
    """(view, architecture, the release's table entry, the class's facts or None) when the line runs the registry's
    own class for a single architecture the table resolved; None otherwise."""
    v = line_view(r)
    if v is None:
        return None
    found = release_architecture(r, registry_table())
    if found is None:
        return None
    arch, rel = found
    if v.value("model_impl") not in ("auto", IMPL_NATIVE, None) or v.given("hf_overrides") or v.given("task") \
            or not _single_arch(r):
        return None
    return v, arch, rel, rel["models"].get(arch)


def _cls(info: dict) -> str:
    return info["class"].rsplit(" ", 1)[-1]


@rule(RUNNER, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--runner the model's class cannot run",
      why="vLLM decides from the registry's class whether a model generates text (compute_logits) or pools "
          "(is_pooling_model) and refuses an explicit --runner the class does not support: --runner generate on an "
          "embedding-only class, --runner pooling --convert none on a generative one.",
      fix="Use --runner auto (the release picks the class's own runner), or with --runner pooling drop --convert none "
          "(or pass --convert embed/classify to adapt a generative model).",
      source=f"vllm {_RUNNER_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_RUNNER_SITES),
      no_cel="the release's registry (a generated per-release table) and options of spec.extraArgs; left to validate")
def check_runner(r, c):
    got = _info(r)
    if got is None or got[3] is None:
        return
    v, arch, _rel, info = got
    if not v.given("runner"):
        return
    runner, convert = v.value("runner"), v.value("convert")
    gen, pool = info["generate"], info["pooling"]
    key = r.version.key
    if pool and not gen and runner in ("generate", "draft") and key != "0.11.0":
        yield None, (f"Embedding models do not support `--runner {runner}`. Use `--runner pooling` or `--runner auto` "
                     f"for embedding models ({arch}: vLLM {key}'s class {_cls(info)} pools and does not generate)")
    elif runner == "generate" and not gen:
        yield None, (f"This model does not support `--runner generate` ({arch}: vLLM {key}'s class {_cls(info)} has "
                     "no compute_logits; use --runner auto)")
    elif runner == "pooling" and not pool and convert not in ("auto", None) \
            and convert not in _POOLING_CONVERTS.get(key, ("embed", "classify")):
        converts = "|".join(_POOLING_CONVERTS.get(key, ("embed", "classify")))
        yield None, (f"This model does not support `--runner pooling`. You can pass `--convert <{converts}> to adapt "
                     f"it into a pooling model ({arch}: vLLM {key}'s class {_cls(info)} is not a pooling model; "
                     f"--convert {convert})")


@rule(PP, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.parallel.pp", title="Pipeline parallelism on a model class without SupportsPP",
      why="vLLM runs pipeline parallelism only for model classes implementing SupportsPP (whose forward takes "
          "intermediate_tensors) and refuses --pipeline-parallel-size > 1 for any other.",
      fix="Use --pipeline-parallel-size 1 (spread the model with tensor parallelism instead).",
      source=f"vllm {_PP_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_PP_SITES),
      no_cel="the release's registry (a generated per-release table); left to validate")
def check_pp(r, c):
    got = _info(r)
    if got is None or got[3] is None:
        return
    v, arch, _rel, info = got
    pp = v.value("pipeline_parallel_size")
    if isinstance(pp, int) and pp > 1 and not info["pp"]:
        yield None, ("Pipeline parallelism is not supported for this model. Supported models implement the "
                     f"`SupportsPP` interface ({arch}: vLLM {r.version.key}'s class {_cls(info)}; "
                     f"--pipeline-parallel-size {pp})")


@rule(PRUNING, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="A video pruning method the model does not support",
      why="With --video-pruning-rate above 0, vLLM checks the pruning method against the methods the multimodal "
          "model's class lists (supported_video_pruning_methods) and refuses another.",
      fix="Pick --video-pruning-method among the methods the model supports, or drop --video-pruning-rate.",
      source=f"vllm {_PRUNING_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_PRUNING_SITES),
      no_cel="the release's registry (a generated per-release table); left to validate")
def check_pruning(r, c):
    got = _info(r)
    if got is None or got[3] is None:
        return
    v, arch, _rel, info = got
    rate, method = v.value("video_pruning_rate"), v.value("video_pruning_method")
    supported = info.get("video_pruning") or []
    if info["multimodal"] and isinstance(rate, (int, float)) and rate > 0 and supported and method not in supported:
        yield None, (f"Video pruning method '{method}' is not supported by {arch} (supported methods: "
                     f"{supported!r}) (vLLM {r.version.key}'s class {_cls(info)})")


def _runner_type(v: Any, info: dict) -> str | None:
    """The runner the release resolves, where the line decides it (None: the model directory may, e.g. a
    Sentence-Transformers modules.json)."""
    runner, convert = v.value("runner"), v.value("convert")
    if runner not in ("auto", None):
        return runner
    if convert not in ("auto", "none", None):
        return "pooling"
    return "pooling" if info["pooling"] else None


@rule(RENDERER, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="Renderer workers with the multimodal processor cache on a pooling model",
      why="A multimodal model run as a pooling model preprocesses on the renderer workers, and the multimodal "
          "processor cache is not thread-safe: vLLM refuses --renderer-num-workers > 1 with the cache enabled.",
      fix="Set --renderer-num-workers 1 (the default), or disable the cache with --mm-processor-cache-gb 0.",
      source=f"vllm {_RENDERER_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_RENDERER_SITES),
      no_cel="the release's registry (a generated per-release table); left to validate")
def check_renderer(r, c):
    got = _info(r)
    if got is None or got[3] is None:
        return
    v, arch, _rel, info = got
    workers, cache = v.value("renderer_num_workers"), v.value("mm_processor_cache_gb")
    if info["multimodal"] and isinstance(workers, int) and workers > 1 and isinstance(cache, (int, float)) \
            and cache > 0 and _runner_type(v, info) == "pooling":
        yield None, ("Cannot use --renderer-num-workers > 1 with the multimodal processor cache enabled for pooling "
                     f"models (renderer_num_workers={workers}, mm_processor_cache_gb={cache:g}; {arch} is "
                     "multimodal)")


def _catalog_custom(r: Any) -> bool:
    """The line's model is a catalog model (its config.json names the catalog entry's architecture): Kimi-K3 and
    DeepSeek-V4.1 are custom-code checkpoints no transformers release holds (transformers 5.19, the oracle's, has
    neither model type; their Hugging Face cards load them with trust_remote_code)."""
    m = r.model
    arch = getattr(r.model_arch, "architecture", None)
    cat = ((getattr(m, "architecture", None) and m.architecture.config) or {}).get("architectures") if m else None
    return bool(arch and cat and cat[0] == arch)


def _transformers_case(r: Any):
    v = line_view(r)
    if v is None or v.value("model_impl") != "transformers":
        return None
    found = release_architecture(r, registry_table())
    if found is None or not _single_arch(r) or v.given("hf_overrides"):
        return None
    arch, rel = found
    # an architecture the release does not register: its config is not vLLM's either, the config load decides
    # first (rule model-not-in-release)
    if arch not in rel["architectures"] or arch in rel["transformers_backend"] or not _catalog_custom(r):
        return None
    return v, arch, _remote_code(r, v)


@rule(TF_ERROR, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--model-impl transformers for a model transformers does not hold",
      why="With --model-impl transformers vLLM looks the architecture up in transformers, then in the remote code "
          "config.json's auto_map names (AutoModel*, loaded only with --trust-remote-code). Kimi-K3 and "
          "DeepSeek-V4.1 are in no transformers release: without the remote code the release refuses.",
      fix="Drop --model-impl transformers (vLLM's own implementation serves the model), or pass --trust-remote-code "
          "for a checkpoint whose config.json's auto_map names its AutoModel class.",
      source=f"vllm {_TF_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_TF_SITES),
      no_cel="config.json's auto_map and the release's registry; left to validate")
def check_transformers(r, c):
    got = _transformers_case(r)
    if got is None or got[2]:
        return
    _v, arch, _ = got
    yield None, (f"Cannot find model module. {arch!r} is not a registered model in the Transformers library "
                 f"(--model-impl transformers; no AutoModel class of the checkpoint's remote code is loaded without "
                 "--trust-remote-code and an auto_map AutoModel entry)")


@rule(TF_WARN, checked_by="runtime-only", family="args", severity="warning", engines=[ENGINE_VLLM],
      fails_at="model config build, where transformers loads the checkpoint's remote code class",
      field="spec.extraArgs",
      title="--model-impl transformers with the checkpoint's remote code: its class decides",
      why="With --model-impl transformers and --trust-remote-code, vLLM loads the AutoModel class config.json's "
          "auto_map names from the checkpoint's own code and refuses it unless it loads and reports "
          "is_backend_compatible(): a fact of the checkpoint's files, not of the command line.",
      fix="Prefer vLLM's own implementation (drop --model-impl transformers) unless the checkpoint's remote code "
          "is known to support the Transformers backend.",
      source=f"vllm {_TF_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_TF_SITES))
def check_transformers_remote(r, c):
    got = _transformers_case(r)
    if got is None or not got[2]:
        return
    yield None, (f"--model-impl transformers for {got[1]}: transformers holds no such class, so vLLM "
                 f"{r.version.key} loads the AutoModel class of the checkpoint's remote code (config.json auto_map) "
                 "and refuses it unless it loads and is compatible with the Transformers backend")


def unregistered_verdict(r: Any) -> str | None:
    """For an architecture the release does not register: "error" where the release refuses whatever the image's
    transformers holds (--model-impl vllm: no fallback; a catalog model no transformers release holds, with no
    remote code the line loads), "warning" where the Transformers fallback decides (--model-impl auto on another
    model, or a catalog model's remote code with --trust-remote-code), None otherwise (registered, unknown, or
    --model-impl terratorch). Without the release's reading of the line (its parser refuses it: rule argv-refused)
    the document's fields and extraArgs tell."""
    if registered(r) is not False or not _single_arch(r):
        return None
    v = line_view(r)
    if v is not None:
        impl, overrides, trust = v.value("model_impl"), v.given("hf_overrides"), bool(v.value("trust_remote_code"))
    else:
        impl, overrides = extra_arg_value(r, "--model-impl"), extra_arg(r, "--hf-overrides") is not None
        trust = bool(r.spec.model.trustRemoteCode)
    if overrides:
        return None
    impl = impl or "auto"
    if impl == IMPL_NATIVE:
        return "error"
    if impl not in ("auto", "transformers"):
        return None
    if _catalog_custom(r):
        return "warning" if trust and _auto_model(r) else "error"
    return "warning"


def _auto_model(r: Any) -> bool:
    """config.json's auto_map names an AutoModel class (the checkpoint's remote code)."""
    raw = getattr(r.model_arch, "raw", None) or {}
    auto_map = raw.get("auto_map") if isinstance(raw, dict) else None
    return any(str(k).startswith("AutoModel") for k in (auto_map or {}))


def _remote_code(r: Any, v: Any) -> bool:
    """--trust-remote-code and config.json's auto_map names an AutoModel class: the checkpoint's code may serve."""
    return bool(v.value("trust_remote_code")) and _auto_model(r)


@rule(FALLBACK, checked_by="runtime-only", family="args", severity="warning", engines=[ENGINE_VLLM],
      fails_at="model config build (ModelRegistry.inspect_model_cls), depending on the image's transformers",
      field="spec.model.name",
      title="An architecture the release does not register: the Transformers fallback decides",
      why="vLLM falls back to the Transformers backend for an architecture its registry lacks (--model-impl auto): "
          "the release refuses unless the image's transformers (or the checkpoint's remote code with "
          "--trust-remote-code) holds the class. --model-impl vllm refuses it outright (rule model-not-in-release).",
      fix="Use an engine version whose registry holds the architecture, or make sure the image's transformers "
          "(or the checkpoint's remote code) does.",
      source=f"vllm {_FALLBACK_SITES['0.34.0']}@0.34.0{_NOTE}", sources=_src(_FALLBACK_SITES))
def check_fallback(r, c):
    if unregistered_verdict(r) != "warning":
        return
    arch = r.model_arch.architecture
    yield None, (f"vLLM {r.version.key} does not register {arch} ({r.model_arch.source}): with --model-impl auto it "
                 "tries the Transformers backend, and refuses the model unless the image's transformers (or, with "
                 "--trust-remote-code, the checkpoint's auto_map AutoModel class) holds it")


for _id in (RUNNER, PP, PRUNING, RENDERER, TF_ERROR, TF_WARN, FALLBACK):
    RULES[_id] = ReleaseRule.of(RULES[_id])
