"""vLLM config-time refusals the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express:
--show-hidden-metrics-for-version that is not a version (PEP 440: packaging's own parser decides).

ObservabilityConfig's field validator calls ``packaging.version.parse`` on the value (0.28.0 and later); 0.11.0
has no such validator (it reads the value only when the metrics loggers are built, after start-up: not judged
here). tests/core/test_lateA_rules.py holds the lines; tests/engine_oracle/test_lateA_rules_oracle.py has each
release judge them.
"""
from __future__ import annotations

from packaging.version import InvalidVersion, Version

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

FLAG = "--show-hidden-metrics-for-version"

# ObservabilityConfig._validate_show_hidden_metrics_for_version: parse(value) when the value is not None
# (the parser's optional_type turns "" and "None" into None first)
_SOURCES = {
    "0.28.0": "vllm config/observability.py:9,120-127@0.28.0",
    "0.29.0": "vllm config/observability.py:9,132-139@0.29.0",
    "0.33.0": "vllm config/observability.py:9,145-152@0.33.0",
    "0.34.0": "vllm config/observability.py:9,139-146@0.34.0",
}


def invalid_version(value: object) -> bool:
    """Whether packaging refuses ``value`` as a version (what ``packaging.version.parse`` raises on)."""
    if not isinstance(value, str):
        return False
    try:
        Version(value)
    except InvalidVersion:
        return True
    return False


@rule("vllm-show-hidden-metrics-version-invalid", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--show-hidden-metrics-for-version is not a version",
      why="The value names the earlier release whose hidden (deprecated) metrics to show again, e.g. 0.7; "
          "ObservabilityConfig parses it as a PEP 440 version and refuses a value that is not one (such as 'auto').",
      fix="Give --show-hidden-metrics-for-version a version such as 0.33 (the previous minor release), or drop it.",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SOURCES.items()},
      no_cel="PEP 440 version parsing of an option of spec.extraArgs as the release's parser reads it; left to "
             "validate")
def check_vllm_show_hidden_metrics_version_invalid(r, c):
    v = line_view(r)
    if v is None:
        return
    value = v.value("show_hidden_metrics_for_version")
    if not invalid_version(value):
        return
    found = extra_arg(r, FLAG)
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"{FLAG} {value!r}: Invalid version: {value!r} (ObservabilityConfig parses it as a PEP 440 version; give "
        "a release such as 0.33, or drop the option)")


# applies to the releases its sources name (registry.ReleaseRule)
RULES["vllm-show-hidden-metrics-version-invalid"] = ReleaseRule.of(RULES["vllm-show-hidden-metrics-version-invalid"])
