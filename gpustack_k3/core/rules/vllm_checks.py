"""vLLM config-time refusals that the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml, read by
gpustack_k3/core/rules/checks.py) cannot express: a test of a JSON option's keys. Each rule lists the releases whose
code refuses, with each release's own source; tests/core/test_vllm_checks.py and
tests/engine_oracle/test_checks_vllm.py hold its lines and have the release judge them."""
from __future__ import annotations

import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.registry import RULES, Rule, rule

_JSON_KEYS = ("reads the keys of a JSON option given in spec.extraArgs (argv tokenising and JSON parsing): beyond "
              "CEL; left to validate")

# --rope-scaling (0.11.0): ModelConfig makes it an hf_overrides entry (config/model.py:398-400@0.11.0), get_config
# writes it over the checkpoint's rope_scaling and then patches it (transformers_utils/config.py:628-638@0.11.0)
_ROPE_SOURCES = {
    "0.11.0": "vllm config/model.py:398-400@0.11.0, transformers_utils/config.py:376-391,628-638@0.11.0",
}


class ReleaseRule(Rule):
    """A rule of this module: it applies to the releases its ``sources`` name (``vllm <key>``), not to every release
    whose traits match (the check itself returns nothing for another release)."""

    __slots__ = ()

    def versions(self, catalog: Any) -> list[tuple[str, str]]:
        listed = {key.split(" ", 1)[1] for key in self.sources if " " in key}
        return [(eng, key) for eng in self.engines for key in catalog.engines[eng].versions if key in listed]


def _per_release(rule_id: str) -> None:
    """Make the registered rule ``rule_id`` a :class:`ReleaseRule` (same definition)."""
    new = object.__new__(ReleaseRule)
    for name in Rule.__slots__:
        object.__setattr__(new, name, getattr(RULES[rule_id], name))
    RULES[rule_id] = new


def _json_option(r: Resolved, flag: str) -> Any:
    """The value of a JSON option in extraArgs as the release's parser reads it (json.loads); None when absent or
    not JSON (the parser refuses that: rule argv-refused)."""
    found = extra_arg(r, flag)
    if found is None or found[1] is None:
        return None
    try:
        return json.loads(found[1])
    except ValueError:
        return None


def _rope_scaling(r: Resolved) -> tuple[str, dict] | None:
    if r.version is None or r.version.key not in _ROPE_SOURCES:
        return None
    v = _json_option(r, "--rope-scaling")
    if not isinstance(v, dict) or not v:      # an empty dict is no override (`if self.rope_scaling:`)
        return None
    found = extra_arg(r, "--rope-scaling")
    return f"spec.extraArgs[{found[0]}]", v


@rule("vllm-rope-scaling-needs-type", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--rope-scaling needs a rope_type (or type) key",
      why="vLLM 0.11.0 writes --rope-scaling over the checkpoint's rope_scaling and then requires the dict to name "
          "its RoPE variant: rope_type, or the legacy type it copies into rope_type; without either ModelConfig "
          "refuses the line.",
      fix="Add \"rope_type\" (e.g. \"yarn\", \"linear\", \"dynamic\") to the --rope-scaling JSON.",
      source=_ROPE_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _ROPE_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_rope_scaling_needs_type(r, c):
    found = _rope_scaling(r)
    if found is not None and "rope_type" not in found[1] and "type" not in found[1]:
        yield found[0], "rope_scaling should have a 'rope_type' key"


@rule("vllm-rope-scaling-type-conflict", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--rope-scaling gives rope_type and type with different values",
      why="vLLM 0.11.0 accepts the legacy type key beside rope_type only when both name the same RoPE variant; "
          "ModelConfig refuses two different ones.",
      fix="Keep one of rope_type and type in the --rope-scaling JSON (rope_type is the current key).",
      source="vllm transformers_utils/config.py:376-382@0.11.0",
      sources={"vllm 0.11.0": "vllm transformers_utils/config.py:376-382@0.11.0"},
      no_cel=_JSON_KEYS)
def check_vllm_rope_scaling_type_conflict(r, c):
    found = _rope_scaling(r)
    if found is None:
        return
    v = found[1]
    if "rope_type" in v and "type" in v and v["rope_type"] != v["type"]:
        yield found[0], (f"Found conflicts between 'rope_type={v['rope_type']}' (modern field) and "
                         f"'type={v['type']}' (legacy field). You should only specify one of them.")


for _id in ("vllm-rope-scaling-needs-type", "vllm-rope-scaling-type-conflict"):
    _per_release(_id)
