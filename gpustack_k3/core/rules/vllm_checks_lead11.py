"""DSpark-only speculative options on vLLM 0.28.0 / 0.29.0, judged on the method the release ends up with.

``SpeculativeConfig.__post_init__`` does not keep the method the line names. It infers one when none is given
(``custom_class`` for a dotted import path, ``ngram``, else ``draft_model``), renames every ``*_mtp`` name to ``mtp``,
takes the target as the draft for ``mtp``/``dspark`` without a model, and then, for every method that builds a draft
model config (all but ngram, ngram_gpu, suffix, custom_class, extract_hidden_states) and is not already eagle,
eagle3, dflash or dspark, detects it again from the draft: ``"eagle-"``, ``"eagle3"``, ``"dflash"`` or ``"dspark"`` in
the draft's path (lower-cased, in that order), or the draft config's architectures (MuseGlimmerAssistantModel:
dflash; Qwen3DSparkModel, Gemma4DSparkModel and on 0.29.0 Qwen3OmniDSparkModel or a qwen3 DSparkDraftModel: dspark)
(config/speculative.py:740-777,934-966@0.28.0; :1078-1119,1276-1310@0.29.0). Only after that does it refuse
``dspark_draft_topk`` (:1089-1090@0.28.0, :1437-1438@0.29.0, inside the draft-model branch) and
``enable_adaptive_verification`` (:1141-1142@0.28.0, :1507-1508@0.29.0) for a method other than dspark.

So ``{"method": "mtp", "model": "Inferact/Kimi-K3-DSpark", "enable_adaptive_verification": true}`` is accepted (the
path makes it dspark), which the checks-table entries these rules replace refused: a false refusal found by
re-judging the seed-7919 coverage records (the engine oracle accepts the line on 0.28.0). Where only the draft's
config.json could decide (a draft path that names no method, the draft not being the target), the draft's config.json
read at the CLI edge (Resolved.draft_arch, cli/model_source.py draft_arch_for; helper draft11) decides; where it was
not read (not a local directory, no config.json there), warning ``vllm-spec-dspark-option-draft-undecided`` names
that term.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.draft11_config import read_draft
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.vllm_checks_mfixV import spec_config

ADAPTIVE = "vllm-spec-adaptive-verification-dspark-only-028"
TOPK = "vllm-spec-dspark-draft-topk-dspark-only-028"
UNDECIDED = "vllm-spec-dspark-option-draft-undecided"

# methods whose branch builds no draft model config (no detection from the draft)
_NO_DRAFT = ("ngram", "[ngram]", "ngram_gpu", "suffix", "custom_class", "extract_hidden_states")
_KEPT = ("eagle", "eagle3", "dflash", "dspark")
_DSPARK_ARCHS = {"0.28.0": ("Qwen3DSparkModel", "Gemma4DSparkModel"),
                 "0.29.0": ("Qwen3DSparkModel", "Qwen3OmniDSparkModel", "Gemma4DSparkModel")}

_SOURCES = {
    "0.28.0": "vllm config/speculative.py:740-777,934-966,1089-1090,1141-1142@0.28.0",
    "0.29.0": "vllm config/speculative.py:1078-1119,1276-1310,1437-1438,1507-1508@0.29.0",
}


def _custom_proposer_path(model: Any) -> bool:
    """``SpeculativeConfig._is_custom_proposer_path``: a dotted import path."""
    if not isinstance(model, str) or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def resolved_method(release: str, sc: dict, target: str | None, target_raw: dict | None,
                    draft_raw: dict | None = None) -> tuple[str | None, bool, str]:
    """(the method ``__post_init__`` ends with, or None where the draft's config decides and was not read; whether a
    draft model config is built; how it was decided). ``draft_raw``: the draft's own config.json where it was read
    (Resolved.draft_arch, a draft other than the target: cli/model_source.py draft_arch_for)."""
    method, model = sc.get("method"), sc.get("model")
    if method is None:
        method = ("custom_class" if _custom_proposer_path(model)
                  else "ngram" if model in ("ngram", "[ngram]") else "draft_model")
    if isinstance(method, str) and method.endswith("_mtp"):
        method = "mtp"
    # the target named as its own draft; else the draft's own config.json where it was read
    raw = target_raw if model is not None and model == target else draft_raw
    if model is None and sc.get("num_speculative_tokens") is not None and method in ("mtp", "dspark"):
        model, raw = target, target_raw
    if method in _NO_DRAFT or model is None:
        return method, False, f"method {method}"
    if method in _KEPT:
        return method, True, f"method {method}"
    low = str(model).lower()
    for needle, found in (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark")):
        if needle in low:
            return found, True, f"the draft path {model!r} contains {needle!r}"
    if raw is None:
        return None, True, f"the draft {model!r}: its config.json's architectures decide"
    archs = raw.get("architectures") or []
    if "MuseGlimmerAssistantModel" in archs:
        return "dflash", True, "the draft's architecture MuseGlimmerAssistantModel"
    dspark = [a for a in archs if a in _DSPARK_ARCHS.get(release, ())]
    if release == "0.29.0" and "DSparkDraftModel" in archs and raw.get("model_type") == "qwen3":
        dspark.append("DSparkDraftModel")
    if dspark:
        return "dspark", True, f"the draft's architecture {dspark[0]}"
    return method, True, f"the draft's architectures {archs or 'none'} name no other method"


def _line(r) -> tuple[dict, str | None, dict | None, dict | None] | None:
    v = line_view(r)
    sc = spec_config(v) if v is not None else None
    if sc is None:
        return None
    raw = getattr(r.model_arch, "raw", None) if r.model_arch is not None else None
    return sc, v.value("model_path"), raw if isinstance(raw, dict) else None, read_draft(r)


def _options(sc: dict, built: bool) -> list[str]:
    """The DSpark-only options the line sets that the release checks on this path."""
    out = []
    if sc.get("dspark_draft_topk") is not None and built and sc.get("num_speculative_tokens") is not None:
        out.append("dspark_draft_topk")
    if sc.get("enable_adaptive_verification") is True:
        out.append("enable_adaptive_verification")
    return out


def _resolved(r) -> tuple[dict, str | None, bool, str] | None:
    """(the line's speculative config, the method the release resolves, whether it builds a draft config, how it was
    decided); None without a speculative config."""
    got = _line(r)
    if got is None:
        return None
    sc, target, raw, draft_raw = got
    return (sc, *resolved_method(r.version.key, sc, target, raw, draft_raw))


def _refusals(r, option: str, *, named_draft: bool = False) -> Iterator[tuple[None, str]]:
    """``named_draft``: only where the line names the draft (``model``)."""
    got = _resolved(r)
    if got is None or (named_draft and got[0].get("model") is None):
        return
    sc, method, built, how = got
    if option in _options(sc, built) and method is not None and method != "dspark":
        yield None, (f"{option} is DSpark's only and vLLM {r.version.key} resolves the speculative method to "
                     f"{method} ({how}); drop {option} from --speculative-config or use method dspark")


_WHY = ("SpeculativeConfig resolves the speculative method first (inferring it, renaming *_mtp to mtp, detecting it "
        "from the draft's path and architectures) and then refuses the DSpark-only options for any other method.")


@rule(ADAPTIVE, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="enable_adaptive_verification with a speculative method that does not resolve to dspark (0.28.0, 0.29.0)",
      why=_WHY + " Adaptive verification trims DSpark's block drafts (0.33.0 takes it with other methods too).",
      fix="Drop enable_adaptive_verification from --speculative-config, or use method dspark.",
      source=_SOURCES["0.28.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()},
      no_cel="resolves the speculative method as the release does; left to validate")
def check_adaptive_verification(r, c):
    yield from _refusals(r, "enable_adaptive_verification")


@rule(TOPK, checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="dspark_draft_topk with a draft-model method that does not resolve to dspark (0.28.0, 0.29.0)",
      why=_WHY + " dspark_draft_topk sizes DSpark's draft vocabulary top-k.",
      fix="Drop dspark_draft_topk from --speculative-config, or use method dspark.",
      source=_SOURCES["0.28.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()},
      no_cel="resolves the speculative method as the release does; left to validate")
def check_dspark_draft_topk(r, c):
    # a draft the line names (the target as its own draft, mtp without a model: vllm-spec-dspark-draft-topk-mtp)
    yield from _refusals(r, "dspark_draft_topk", named_draft=True)


@rule(UNDECIDED, checked_by="oracle", family="args", severity="warning", engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="A DSpark-only speculative option whose method the draft's config.json decides (0.28.0, 0.29.0)",
      why=_WHY + " Where the draft's path names no method and the draft is not the target, its config.json's "
                 "architectures decide whether the method becomes dspark; here they were not read (the draft is not a local "
                 "directory holding a readable config.json).",
      fix="Give method dspark explicitly if the draft is a DSpark model; otherwise drop the DSpark-only options.",
      source=_SOURCES["0.28.0"], sources={f"vllm {k}": s for k, s in _SOURCES.items()})
def check_dspark_option_undecided(r, c):
    got = _resolved(r)
    if got is None:
        return
    sc, method, built, how = got
    opts = _options(sc, built)
    if opts and method is None:
        yield None, (f"{', '.join(opts)}: vLLM {r.version.key} refuses it unless the speculative method resolves to "
                     f"dspark, and {how}")


# each applies to the releases its sources name (registry.ReleaseRule)
for _rid in (ADAPTIVE, TOPK, UNDECIDED):
    RULES[_rid] = ReleaseRule.of(RULES[_rid])
