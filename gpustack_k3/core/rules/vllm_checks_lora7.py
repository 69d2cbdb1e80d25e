"""--enable-lora on a model whose class the vLLM release does not let run LoRA.

The release's predicate is ``supports_lora(model_cls)`` (model_executor/models/interfaces.py): the class implements
``SupportsLoRA``. 0.33.0 and 0.34.0 ask it when building the config (``LoRAConfig.verify_with_model_config``:
``model_config.is_lora_supported`` = the registry's ``_ModelInfo.supports_lora``) and refuse; 0.11.0, 0.28.0 and
0.29.0 ask it only when the worker loads the model (``LoRAModelRunnerMixin.load_lora_model``, called from
``GPUModelRunner.load_model``): the config is accepted and the deployment fails at load, so the product warns there.

Which architectures each release's registry holds and which of their classes fail the predicate (on CUDA, where a
hardware-isolated package picks the class by platform): gpustack_k3/catalog/data/engines/vllm-lora-architectures.json,
written by tools/engine_parsers/lora_archs.py from the unpacked wheels. The model's architecture is the one the
multimodal rules read (core/rules/multimodal.py: its config.json, else the catalog entry's block). An architecture
the release's registry does not hold (or whose class the reading could not find) is left alone: rule
model-not-in-release and the engine judge it. tests/core/test_lora7_rules.py holds the lines;
tests/engine_oracle/test_lora7_rules_oracle.py has each release judge them.
"""
from __future__ import annotations

import functools
import json

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.multimodal import release_architecture
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

_LORA_DATA = "engines/vllm-lora-architectures.json"

# config time: LoRAConfig.verify_with_model_config (called from VllmConfig.__post_init__ when lora_config is built,
# i.e. with --enable-lora: engine/arg_utils.py create_engine_config)
_CONFIG_SOURCES = {
    "0.33.0": "vllm config/lora.py:147-156@0.33.0, config/vllm.py:1593@0.33.0, config/model.py:2033-2034@0.33.0, "
              "model_executor/models/registry.py:952@0.33.0, engine/arg_utils.py:2691-2710@0.33.0",
    "0.34.0": "vllm config/lora.py:140-149@0.34.0, config/vllm.py:1540@0.34.0, config/model.py:2057-2058@0.34.0, "
              "model_executor/models/registry.py:1000@0.34.0, engine/arg_utils.py:2728-2747@0.34.0",
}
# load time only: LoRAModelRunnerMixin.load_lora_model raises in the worker, after the config was accepted
_LOAD_SOURCES = {
    "0.11.0": "vllm v1/worker/lora_model_runner_mixin.py:34-39@0.11.0 (from v1/worker/gpu_model_runner.py:2638"
              "@0.11.0; runtime only)",
    "0.28.0": "vllm v1/worker/lora_model_runner_mixin.py:47-54@0.28.0 (from v1/worker/gpu_model_runner.py:5439"
              "@0.28.0; runtime only)",
    "0.29.0": "vllm v1/worker/lora_model_runner_mixin.py:47-54@0.29.0 (from v1/worker/gpu_model_runner.py:5399"
              "@0.29.0; runtime only)",
}
_DATA_NOTE = ("; the architectures: gpustack_k3/catalog/data/engines/vllm-lora-architectures.json "
              "(tools/engine_parsers/lora_archs.py)")


@functools.lru_cache(maxsize=1)
def _lora_data() -> dict[str, dict]:
    return json.loads((DATA / _LORA_DATA).read_text(encoding="utf-8"))["releases"]


def lora_capable(r) -> bool | None:
    """Whether the release lets the line's model run LoRA: True / False from its architecture's class (on CUDA),
    None where the model names no architecture or the release's registry does not hold it (or its class was not
    read)."""
    found = release_architecture(r, _lora_data())
    if found is None:
        return None
    arch, rel = found
    if arch not in rel["architectures"] or arch in rel["unresolved"]:
        return None
    return arch not in rel["not_lora_capable"]


def _unsupported(r):
    """(where, architecture, its class) when the line enables LoRA on a model the release marks as not capable."""
    v = line_view(r)
    if v is None or v.value("enable_lora") is not True or v.value("runner") == "draft":
        return None
    if lora_capable(r) is not False:
        return None
    arch = r.model_arch.architecture
    rel = _lora_data().get(r.version.key) or {}
    found = extra_arg(r, "--enable-lora")
    where = f"spec.extraArgs[{found[0]}]" if found else None
    return where, arch, rel.get("classes", {}).get(arch, arch)


@rule("vllm-lora-architecture-unsupported", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--enable-lora on a model whose class does not implement SupportsLoRA",
      why="vLLM runs LoRA adapters only on model classes that implement the SupportsLoRA interface. With "
          "--enable-lora the release builds LoRAConfig and, checking it against the model, refuses an "
          "architecture whose class does not (Kimi-K3's KimiK3ForConditionalGeneration among them).",
      fix="Drop --enable-lora (serve the base model, or merge the adapter into the weights), or serve a model "
          "whose architecture the release supports LoRA for.",
      source=_CONFIG_SOURCES["0.34.0"] + _DATA_NOTE,
      sources={f"vllm {k}": v + _DATA_NOTE for k, v in _CONFIG_SOURCES.items()},
      no_cel="the release's registry and model classes (a generated per-release table) and options of "
             "spec.extraArgs; left to validate")
def check_vllm_lora_architecture_unsupported(r, c):
    got = _unsupported(r)
    if got is None:
        return
    where, arch, cls = got
    yield where, (f"LoRA is not supported for {arch} (--enable-lora: vLLM {r.version.key}'s class {cls} does not "
                  "implement SupportsLoRA; run the model without --enable-lora)")


@rule("vllm-lora-architecture-unsupported-at-load", checked_by="runtime-only",
      fails_at="model load in each worker (LoRAModelRunnerMixin.load_lora_model), after the config was accepted",
      family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--enable-lora on a model whose class does not implement SupportsLoRA (refused when the model loads)",
      why="This release accepts --enable-lora when it builds the config and checks the model class only when the "
          "worker loads the model: a class that does not implement SupportsLoRA makes the engine fail at start-up, "
          "after the GPUs were allocated.",
      fix="Drop --enable-lora (serve the base model, or merge the adapter into the weights), or serve a model "
          "whose architecture the release supports LoRA for.",
      source=_LOAD_SOURCES["0.29.0"] + _DATA_NOTE,
      sources={f"vllm {k}": v + _DATA_NOTE for k, v in _LOAD_SOURCES.items()})
def check_vllm_lora_architecture_unsupported_at_load(r, c):
    got = _unsupported(r)
    if got is None:
        return
    where, arch, cls = got
    yield where, (f"{cls.rsplit(' ', 1)[-1]} does not support LoRA yet: vLLM {r.version.key} accepts --enable-lora "
                  f"for {arch} at config time and refuses it when the worker loads the model")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-lora-architecture-unsupported", "vllm-lora-architecture-unsupported-at-load"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
