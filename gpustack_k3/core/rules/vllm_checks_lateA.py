"""vLLM config-time refusals the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express:
--show-hidden-metrics-for-version that is not a version (PEP 440: packaging's own parser decides), and elastic EP
with hybrid load balancing where create_engine_config infers the local DP size from --nnodes (a computation; the
table's entry vllm-elastic-ep-no-hybrid-lb judges a given --data-parallel-size-local).

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


# ParallelConfig.__post_init__ refuses elastic EP with data_parallel_hybrid_lb as create_engine_config leaves it: with
# --nnodes above 1 and no --data-parallel-size-local (internal LB) the local size is inferred as
# max(world / nnodes // (PP x TP x PCP), 1), then hybrid LB stays on unless that size is 1 or the whole DP size
_HYBRID_SOURCES = {
    "0.33.0": "vllm config/parallel.py:974,982-987@0.33.0, engine/arg_utils.py:2390-2449,2485-2506@0.33.0",
    "0.34.0": "vllm config/parallel.py:1067,1075-1080@0.34.0, engine/arg_utils.py:2424-2483,2519-2540@0.34.0",
}


def _int(x) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def inferred_hybrid_lb(v) -> bool:
    """Whether hybrid LB is in effect when the line gives no --data-parallel-size-local and --nnodes infers it."""
    if v.value("data_parallel_size_local") is not None or v.value("headless") is True:
        return False
    if v.value("data_parallel_external_lb") is not False or v.value("data_parallel_rank") is not None:
        return False
    if v.value("data_parallel_hybrid_lb") is not True and v.value("data_parallel_start_rank") is None:
        return False
    nnodes, node_rank, dp = (_int(v.value(d)) for d in ("nnodes", "node_rank", "data_parallel_size"))
    within = 1
    for d in ("pipeline_parallel_size", "tensor_parallel_size", "prefill_context_parallel_size"):
        n = _int(v.value(d))
        if n is None:
            return False
        within *= n
    if nnodes is None or nnodes <= 1 or node_rank is None or not 0 <= node_rank < nnodes or dp is None:
        return False
    world = dp * within
    if within <= 0 or world % nnodes:
        return False   # refused before (arg_utils), or not a layout this reading follows
    local = max(world // nnodes // within, 1)
    return local not in (1, dp)


@rule("vllm-elastic-ep-no-hybrid-lb-nnodes", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="Elastic EP with hybrid data-parallel load balancing (local DP size inferred from --nnodes)",
      why="Elastic EP scales through a single API server / core client path (or external load balancing); "
          "ParallelConfig refuses it when the launch runs hybrid load balancing, here with the local DP size "
          "create_engine_config infers from --nnodes.",
      fix="Drop --data-parallel-hybrid-lb (and --data-parallel-start-rank), use --data-parallel-external-lb, or drop "
          "--enable-elastic-ep.",
      source=_HYBRID_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _HYBRID_SOURCES.items()},
      no_cel="the local DP size the release infers from --nnodes and the parallel sizes of spec.extraArgs; left to "
             "validate")
def check_vllm_elastic_ep_no_hybrid_lb_nnodes(r, c):
    v = line_view(r)
    if v is None or v.value("enable_elastic_ep") is not True or v.value("enable_eplb") is not True:
        return
    pp = _int(v.value("pipeline_parallel_size"))
    if pp is None or pp > 1 or not inferred_hybrid_lb(v):
        return
    found = extra_arg(r, "--enable-elastic-ep")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        "Elastic EP is not compatible with data_parallel_hybrid_lb (--nnodes infers several local DP ranks per "
        "node; drop --data-parallel-hybrid-lb or --enable-elastic-ep)")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-show-hidden-metrics-version-invalid", "vllm-elastic-ep-no-hybrid-lb-nnodes"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
