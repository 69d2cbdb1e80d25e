"""Whether a vLLM release builds ``MultiModalConfig`` for a line's model, and the options a line gives the engine.

ModelConfig builds MultiModalConfig only for a model the release registers as multimodal (``ModelConfig.__post_init__``:
``if self._model_info.supports_multimodal: ... MultiModalConfig(**mm_config_kwargs)``, vllm config/model.py:831-881
@0.33.0), so that class's field bounds never see a text model's values (rule vllm-config-field-bounds,
core/rules/config_fields.py); where the model's architecture is unknown, rule model-config-checks-skipped names the
options not judged. The architectures per release: catalog/data/engines/vllm-multimodal-architectures.json (the keys
of the release's ``_MULTIMODAL_MODELS``, model_executor/models/registry.py; written by
tools/engine_parsers/multimodal_archs.py).
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.argv import version_dump
from gpustack_k3.core.flags import read_extra, render_args
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules.args import extra_flags

MULTIMODAL_CLASS = "MultiModalConfig"
_MULTIMODAL_DATA = "engines/vllm-multimodal-architectures.json"
# typed spec fields whose engine bounds other rules judge (one finding per fact): vllm-config-bounds
# (gpu_memory_utilization, max_num_seqs, EPLBConfig window_size/step_interval), the speculative rules of spec.py and
# vllm_034.py (spec.speculative: method, keys of extraConfig)
_OTHER_RULES = {"memory.fraction": "vllm-config-bounds", "scheduling.maxNumSeqs": "vllm-config-bounds",
                "parallel.eplb": "vllm-config-bounds", "speculative": "spec.speculative rules"}


@functools.lru_cache(maxsize=1)
def _multimodal_architectures() -> dict[str, frozenset[str]]:
    d = json.loads((DATA / _MULTIMODAL_DATA).read_text(encoding="utf-8"))
    return {k: frozenset(v["architectures"]) for k, v in d["releases"].items()}


def release_architecture(r: Resolved, per_release: dict[str, Any]) -> tuple[str, Any] | None:
    """(the line's model architecture: its config.json's, else the catalog entry's block; the entry of a per-release
    table read from the wheels for the line's release, by its catalog key or its parser dump's release), None where
    the model names no architecture or the table has no entry for the release. The multimodal and LoRA tables
    (catalog/data/engines/vllm-{multimodal,lora}-architectures.json) are read through it."""
    arch = getattr(r.model_arch, "architecture", None)
    if not arch or r.version is None:
        return None
    dump = version_dump(r.version)
    entry = per_release.get(r.version.key) or (per_release.get(dump.version) if dump is not None else None)
    return None if entry is None else (arch, entry)


def builds_multimodal_config(r: Resolved) -> bool | None:
    """Whether the release builds MultiModalConfig for the line's model: True / False from the model's architecture
    (its config.json, else the catalog entry's block), None where neither names one."""
    found = release_architecture(r, _multimodal_architectures())
    return None if found is None else found[0] in found[1]


def class_of(option: Any) -> str:
    """The config class an option feeds (its parser dump's ``config.class``, unqualified; "" for none)."""
    return str((option.config or {}).get("class", "")).rsplit(".", 1)[-1]


def command_flags(r: Resolved) -> Iterator[tuple[str, Any]]:
    """(spec path, ExtraFlag) for every option the document gives the engine with a value: its typed fields as
    rendered (except those whose bounds another rule judges) and its extraArgs."""
    for arg in render_args(r):
        if arg.field in _OTHER_RULES or arg.platform:
            continue
        if arg.field == "extraArgs":
            for f in extra_flags(r):    # the one memoised reading every args rule shares
                yield f"spec.extraArgs[{f.index}]", f
        else:
            for f in read_extra(arg.tokens, r.version)[0]:
                yield f"spec.{arg.field}", f


def multimodal_flags_unjudged(r: Resolved) -> list[str]:
    """The MultiModalConfig options the line gives whose bounds were not judged because the model's architecture is
    unknown (rule model-config-checks-skipped names them)."""
    if r.engine.engine != ENGINE_VLLM or builds_multimodal_config(r) is not None:
        return []
    return sorted({f.name for _, f in command_flags(r) if f.option is not None and f.value is not None
                   and class_of(f.option) == MULTIMODAL_CLASS})
