"""vLLM: the features Model Runner V2 does not yet support, as each release lists them, refused with
VLLM_USE_V2_MODEL_RUNNER=1 (one rule for the whole list; helper v2r10).

With the variable set to 1 (envs.maybe_convert_bool: bool(int(value))), ``VllmConfig.use_v2_model_runner`` is True
and ``__post_init__`` calls ``_validate_v2_model_runner``, which raises
``ValueError("Model Runner V2 does not yet support: " + ", ".join(unsupported))`` when
``_get_v2_model_runner_unsupported_features`` lists anything. Unset (or 0) the release falls back to the V1 runner
with a warning, so nothing is refused here. 0.34.0 has no V1 runner and no such list (``VLLM_USE_V2_MODEL_RUNNER`` is
judged by platforms/interface.py:1481-1490@0.34.0; its ``_get_model_runner_unsupported_features`` is another check):
the rule is not on 0.34.0. 0.11.0 has no Model Runner V2.

``ITEMS`` holds each release's list in the release's order: the feature name as the release writes it and the
condition, read from the line (``line_view``: the release's parser, the environment). The finding names every
modelled feature the line has, joined as the release joins them.

Items of the releases' lists this rule leaves out, and why:
- ``ngram/ngram_gpu speculative decoding`` (0.28.0, 0.29.0): rule vllm-v2-runner-spec-method
  (gpustack_k3/core/rules/spec.py) refuses it already; this rule skips it, so no line is refused twice for it.
- ``prefill context parallelism`` (0.28.0; pcp > 1 on a model without MLA): ``model_config.use_mla`` depends on the
  checkpoint's attention and VLLM_MLA_DISABLE and on the platform; not modelled here.
- ``sequence parallelism`` (0.28.0, 0.29.0; ``pass_config.enable_sp`` and TP > 1): the value is settled after
  parsing (optimization-level defaults, platform); not traced through the release in this round, so not refused.
- ``speculative method '<m>'``, ``parallel drafting for EAGLE speculative decoding``, ``EAGLE3 with pipeline
  parallelism``, ``adaptive verification with ...`` (0.28.0), ``heterogeneous-vocabulary draft models`` (0.33.0): the
  method and the draft's vocabulary are settled by SpeculativeConfig from the draft checkpoint (method inference,
  renames), not by the line.
- ``elastic expert parallelism`` (0.28.0, 0.29.0): --enable-elastic-ep is refused before this check unless EPLB and
  expert parallelism are on, which the CPU oracle cannot build; not verified, so not refused.
- ``custom logits processors`` through installed plugins (entry point group ``vllm.logits_processors``): what the
  image has installed is not on the line; only --logits-processors is modelled.
- ``_get_dbo_unsupported_features`` (0.33.0, with micro-batching): refused earlier on this box (the all2all backend
  assertion, config/vllm.py:2198@0.33.0); not modelled.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

RID = "vllm-v2-runner-unsupported-features"
ENV = "VLLM_USE_V2_MODEL_RUNNER"

# CompilationMode.STOCK_TORCH_COMPILE (config/compilation.py): the integer or the enum's name
STOCK_TORCH_COMPILE = (1, "1", "STOCK_TORCH_COMPILE", "stock_torch_compile")


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


# architectures for which the release switches VLLM_USE_BREAKABLE_CUDAGRAPH on when it is unset, which sets the
# compilation mode to NONE (config/vllm.py:1314-1345@0.28.0; :75-93,702-728,1397@0.29.0 on CUDA)
_BREAKABLE_BASE = frozenset({
    "DeepseekV4ForCausalLM", "DeepSeekV4MTPModel", "InklingForCausalLM", "InklingForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK3MTPModel", "KimiLinearForCausalLM", "MiniMaxM3SparseForCausalLM",
    "MiniMaxM3SparseForConditionalGeneration"})
BREAKABLE_ARCHITECTURES = {
    "0.28.0": _BREAKABLE_BASE,
    "0.29.0": _BREAKABLE_BASE | {"DeepseekV32MTPModel", "DeepseekV32ForCausalLM", "Dots3NoteForCausalLM",
                                 "Dots3NoteMTPModel", "GlmMoeDsaForCausalLM", "HYV4ForCausalLM", "HYV4MTPModel"},
}


def stock_torch_compile(v: Any) -> bool:
    """-cc mode 1 (STOCK_TORCH_COMPILE) that is still 1 when the list is taken: --enforce-eager, TORCH_COMPILE_DISABLE=1
    and breakable CUDA graphs (VLLM_USE_BREAKABLE_CUDAGRAPH=1, or unset on an architecture of the release's default
    list) set it to NONE first (config/vllm.py:1284-1309,1314-1345@0.28.0; :1370-1397@0.29.0). An unknown
    architecture with the variable unset: not decided, not refused."""
    if v.json_object("compilation_config").get("mode") not in STOCK_TORCH_COMPILE or v.value("enforce_eager"):
        return False
    if v.env.get("TORCH_COMPILE_DISABLE") == "1":
        return False
    breakable = v.env.get("VLLM_USE_BREAKABLE_CUDAGRAPH")
    if breakable is not None:
        return breakable != "1"          # envs.py: os.environ.get(..., "0") == "1"
    arch = getattr(v.arch, "architecture", None)
    if not arch:
        return False
    return arch not in BREAKABLE_ARCHITECTURES.get(v.version.key, _BREAKABLE_BASE)


def external_launcher_pp(v: Any) -> bool:
    return v.value("distributed_executor_backend") == "external_launcher" and _int(v.value("pipeline_parallel_size"), 1) > 1


def dbo(v: Any) -> bool:
    return bool(v.value("enable_dbo"))


def logits_processors(v: Any) -> bool:
    return bool(v.value("logits_processors"))


def prompt_embeds(v: Any) -> bool:
    return bool(v.value("enable_prompt_embeds"))


def kv_sharing_fast_prefill(v: Any) -> bool:
    return bool(v.value("kv_sharing_fast_prefill"))


# per release: (the feature as the release names it, the condition, the line of its append), in the release's order
ITEMS: dict[str, list[tuple[str, Callable[[Any], bool], int]]] = {
    "0.28.0": [
        ("stock torch.compile", stock_torch_compile, 2380),
        ("pipeline parallelism with external_launcher", external_launcher_pp, 2394),
        ("dual batch overlap", dbo, 2453),
        ("custom logits processors", logits_processors, 2467),
        ("prompt embeds", prompt_embeds, 2470),
        ("KV sharing fast prefill", kv_sharing_fast_prefill, 2474),
    ],
    "0.29.0": [
        ("stock torch.compile", stock_torch_compile, 2546),
        ("pipeline parallelism with external_launcher", external_launcher_pp, 2560),
        ("dual batch overlap", dbo, 2592),
        ("custom logits processors", logits_processors, 2606),
        ("KV sharing fast prefill", kv_sharing_fast_prefill, 2610),
    ],
    "0.33.0": [
        ("pipeline parallelism with external_launcher", external_launcher_pp, 3064),
    ],
}

# (the call in __post_init__, the function's span, _validate_v2_model_runner's raise; envs.py's reading)
_SPANS = {
    "0.28.0": ("1601-1602", "2369-2476", "2478-2487", "envs.py:2029-2031"),
    "0.29.0": ("1653-1654", "2539-2612", "2724-2733", "envs.py:2035-2037"),
    "0.33.0": ("2092-2094", "3053-3087", "3324-3330", "envs.py:2149-2150"),
}
_SOURCES = {
    rel: (f"vllm config/vllm.py:{call},{fn},{raise_}@{rel} (__post_init__, _get_v2_model_runner_unsupported_features "
          f"lines {', '.join(str(i[2]) for i in ITEMS[rel])}, _validate_v2_model_runner); {env}@{rel}")
    for rel, (call, fn, raise_, env) in _SPANS.items()
}


def unsupported(release: str, v: Any) -> list[str]:
    """The modelled features of ``release``'s list that the line ``v`` has, in the release's order."""
    return [name for name, cond, _ in ITEMS.get(release, ()) if cond(v)]


@rule(RID, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.env." + ENV,
      title="Model Runner V2 does not yet support these features",
      why="With VLLM_USE_V2_MODEL_RUNNER=1 these releases validate the config against Model Runner V2 and refuse "
          "every feature on its release's list of unsupported features; unset, they fall back to the V1 runner.",
      fix="Unset VLLM_USE_V2_MODEL_RUNNER (or set it to 0; the release then picks the V1 runner), or drop the "
          "features named.",
      source=_SOURCES["0.33.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()},
      no_cel="reads an environment variable's integer value and per-release feature conditions on the parsed "
             "line; left to validate")
def check_vllm_v2_runner_unsupported_features(r, c):
    v = line_view(r)
    if v is None or v.env_value(ENV, "vllm_int_bool", None) is not True:
        return
    names = unsupported(r.version.key, v)
    if names:
        yield None, (f"Model Runner V2 does not yet support: {', '.join(names)} (with {ENV}="
                     f"{r.spec.env.get(ENV)} on vLLM {r.version.key}: unset it, or drop these features)")


# applies to the releases its sources name (registry.ReleaseRule)
RULES[RID] = ReleaseRule.of(RULES[RID])
