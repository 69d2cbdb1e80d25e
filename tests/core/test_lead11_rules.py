"""gpustack_k3/core/rules/vllm_checks_lead11.py: the DSpark-only speculative options on vLLM 0.28.0/0.29.0 judged on
the method the release resolves (the draft's path and architectures can turn any draft-building method into
dspark). The same lines are judged by each release in tests/engine_oracle/test_lead11_oracle.py."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules.vllm_checks_lead11 import ADAPTIVE, TOPK, UNDECIDED, resolved_method
from tests.core.test_vllm_checks import shape_config

LEAD11_DIRECT = {ADAPTIVE, TOPK, UNDECIDED}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

DSPARK = "Inferact/Kimi-K3-DSpark"
SMOL = "/models/smollm2-hf"


def sc(**k) -> str:
    return json.dumps(k)


def hybrid(spec: str) -> list[str]:
    return ["/models/shape-hybrid", "-tp", "8", "--speculative-config", spec]


def smol(spec: str) -> list[str]:
    return [SMOL, "--speculative-config", spec]


# (release, argv, model: a catalog name or shape-*, what the product says: the rule refusing, UNDECIDED, or None)
CASES = [(rel, *c) for rel in ("0.28.0", "0.29.0") for c in [
    # an MTP name with a DSpark draft path: the release detects dspark from the path (the former false refusal)
    (hybrid(sc(model=DSPARK, num_speculative_tokens=7, method="longcat_flash_mtp", enable_adaptive_verification=True)),
     "shape-hybrid", None),
    (hybrid(sc(model=DSPARK, num_speculative_tokens=7, method="draft_model", enable_adaptive_verification=True)),
     "shape-hybrid", None),
    (hybrid(sc(model=DSPARK, num_speculative_tokens=7, enable_adaptive_verification=True)), "shape-hybrid", None),
    # ngram builds no draft: refused
    (hybrid(sc(num_speculative_tokens=3, method="ngram", prompt_lookup_max=3, enable_adaptive_verification=True)),
     "shape-hybrid", ADAPTIVE),
    # the target named as its own draft: its config.json's architectures (LlamaForCausalLM) decide: refused
    (smol(sc(model=SMOL, num_speculative_tokens=2, method="draft_model", enable_adaptive_verification=True)),
     "smollm2-135m", ADAPTIVE),
    (smol(sc(model=SMOL, num_speculative_tokens=2, method="draft_model", dspark_draft_topk=5)), "smollm2-135m", TOPK),
    (smol(sc(model=SMOL, num_speculative_tokens=2, method="draft_model")), "smollm2-135m", None),
    # an eagle3 path is eagle3 whatever the method says: refused
    (hybrid(sc(model="/models/some-eagle3-draft", num_speculative_tokens=2, method="draft_model",
               enable_adaptive_verification=True)), "shape-hybrid", ADAPTIVE),
    # a draft in another directory whose path names no method: its config.json decides: a warning
    (hybrid(sc(model="/models/other-draft", num_speculative_tokens=2, method="draft_model",
               enable_adaptive_verification=True)), "shape-hybrid", UNDECIDED),
]]
IDS = [f"{rel}-{i % 9}" for i, (rel, *_) in enumerate(CASES)]


def findings(release: str, argv: list[str], model: str) -> list[dict]:
    """check-args' findings of every severity, in-process."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tools.engine_oracle.product import _common

    config = shape_config(model) if model.startswith("shape-") else None
    args = _common("vllm", release, None if config else model, "b300", config) + ["--gpus", "8"]
    res = CliRunner().invoke(cmd, args + ["--", *argv])
    return json.loads(res.output)["findings"]


@pytest.mark.parametrize("release,argv,model,expect", CASES, ids=IDS)
def test_the_rules_judge_the_resolved_method(release, argv, model, expect):
    got = {f["rule"]: f for f in findings(release, argv, model) if f["rule"] in LEAD11_DIRECT}
    assert set(got) == ({expect} if expect else set()), got
    if expect in (ADAPTIVE, TOPK):
        assert got[expect]["severity"] == "error" and "use method dspark" in got[expect]["message"]
    if expect == UNDECIDED:
        assert got[expect]["severity"] == "warning" and "config.json's architectures decide" in got[expect]["message"]


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0", "0.11.0"])
def test_silent_on_the_releases_that_take_adaptive_verification_with_any_method(release):
    line = hybrid(sc(num_speculative_tokens=3, method="ngram", prompt_lookup_max=3, enable_adaptive_verification=True))
    assert not [f for f in findings(release, line, "shape-hybrid") if f["rule"] in LEAD11_DIRECT]


@pytest.mark.parametrize("spec,target,raw,want", [
    ({"method": "kimi_k3_mtp", "num_speculative_tokens": 2}, "/m/Kimi-K3", {"architectures": ["X"]}, "mtp"),
    ({"model": "pkg.MyProposer", "num_speculative_tokens": 2}, "/m/a", None, "custom_class"),
    ({"model": "[ngram]", "num_speculative_tokens": 2}, "/m/a", None, "ngram"),
    ({"model": "org/EAGLE-LLaMA3", "method": "dspark"}, "/m/a", None, "dspark"),   # kept: no detection
    ({"model": "org/EAGLE-dspark", "method": "mtp"}, "/m/a", None, "eagle"),      # eagle- is tried first
    ({"model": "/m/a", "method": "mtp"}, "/m/a", {"architectures": ["Qwen3DSparkModel"]}, "dspark"),
    ({"model": "/m/a", "method": "mtp"}, "/m/a", {"architectures": ["Qwen3OmniDSparkModel"]}, "mtp"),   # 0.29.0 only
    ({"model": "/m/a", "method": "mtp"}, "/m/a", {"architectures": ["MuseGlimmerAssistantModel"]}, "dflash"),
    ({"model": "/m/b", "method": "mtp"}, "/m/a", {"architectures": ["Qwen3DSparkModel"]}, None),  # not the target
])
def test_resolved_method_as_0_28_0_resolves_it(spec, target, raw, want):
    assert resolved_method("0.28.0", spec, target, raw)[0] == want


def test_0_29_0_knows_more_dspark_architectures():
    raw = {"architectures": ["DSparkDraftModel"], "model_type": "qwen3"}
    assert resolved_method("0.29.0", {"model": "/m/a", "method": "mtp"}, "/m/a", raw)[0] == "dspark"
    assert resolved_method("0.28.0", {"model": "/m/a", "method": "mtp"}, "/m/a", raw)[0] == "mtp"
    raw = {"architectures": ["Qwen3OmniDSparkModel"]}
    assert resolved_method("0.29.0", {"model": "/m/a", "method": "mtp"}, "/m/a", raw)[0] == "dspark"
