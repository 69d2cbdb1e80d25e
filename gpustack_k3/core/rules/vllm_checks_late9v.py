"""vLLM config-time refusal the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express:
--model-class-overrides whose value (a class path) is not of the form ``<module>:<class>`` (a test of each value of
the JSON object; the table's predicates test keys, not values).

ModelConfig's ``registry`` property registers every override when the config is built (its
``_maybe_register_model_class_overrides``), and ``ModelRegistry.register_model`` splits a string class path on ':'
and refuses it unless that gives exactly two parts. tests/core/test_late9v_rules.py holds the lines;
tests/engine_oracle/test_late9v_rules_oracle.py has each release judge them.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

FLAG = "--model-class-overrides"

# ModelConfig.registry -> _maybe_register_model_class_overrides -> ModelRegistry.register_model(arch, target):
# split(":") must give two parts
_SOURCES = {
    "0.28.0": "vllm config/model.py:308,1011,1036@0.28.0, model_executor/models/registry.py:1112-1116@0.28.0",
    "0.29.0": "vllm config/model.py:319,1029,1054@0.29.0, model_executor/models/registry.py:1126-1130@0.29.0",
    "0.33.0": "vllm config/model.py:351,1167,1192@0.33.0, model_executor/models/registry.py:1203-1207@0.33.0",
    "0.34.0": "vllm config/model.py:365,1187,1212@0.34.0, model_executor/models/registry.py:1282-1286@0.34.0",
}


def bad_class_paths(value: object) -> list[tuple[str, str]]:
    """The (architecture, class path) pairs of ``value`` whose string path does not split into module and class."""
    if not isinstance(value, dict):
        return []
    return [(k, t) for k, t in value.items() if isinstance(t, str) and len(t.split(":")) != 2]


@rule("vllm-model-class-overrides-format", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--model-class-overrides values must be <module>:<class>",
      why="Each override maps an architecture name to the class that replaces it; ModelConfig registers them when "
          "it is built and ModelRegistry.register_model refuses a class path that is not '<module>:<class>' "
          "(exactly one ':').",
      fix="Write each value as 'package.module:ClassName', or drop --model-class-overrides.",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SOURCES.items()},
      no_cel="a test of each value of a JSON option of spec.extraArgs as the release's parser reads it; left to "
             "validate")
def check_vllm_model_class_overrides_format(r, c):
    v = line_view(r)
    if v is None:
        return
    bad = bad_class_paths(v.value("model_class_overrides"))
    if not bad:
        return
    arch, target = bad[0]
    found = extra_arg(r, FLAG)
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"{FLAG} {arch!r}: {target!r}: Expected a string in the format `<module>:<class>` (write the class path "
        "as 'package.module:ClassName', or drop the override)")


# applies to the releases its sources name (registry.ReleaseRule)
RULES["vllm-model-class-overrides-format"] = ReleaseRule.of(RULES["vllm-model-class-overrides-format"])
