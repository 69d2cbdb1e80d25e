"""Tier engine_oracle: the rules of gpustack_k3/core/rules/sglang_checks_smiss.py against the releases themselves.
Each case of tests/core/test_sglang_checks_smiss.py SMISS_CASES: the refused line is refused by the release at one
of the lines the rule cites for it, the accepted line is accepted (the product's side: the unit test). A wrong
condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_sglang_checks_smiss import IDS, SMISS_CASES
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,release,bad,good", SMISS_CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, bad, good):
    oracle = oracles(f"sglang-{release}")
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    ans = oracle.judge_line(bad, {})
    assert ans["verdict"] == "refused", (bad, ans)
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (ans.get("where"), ans.get("message"))
    ans = oracle.judge_line(good, {})
    assert ans["verdict"] == "accepted", (good, ans)
