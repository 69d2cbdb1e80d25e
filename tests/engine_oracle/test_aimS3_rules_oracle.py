"""Tier engine_oracle: the rule of gpustack_k3/core/rules/sglang_checks_aimS3.py against the releases themselves (the
product's side: tests/core/test_aimS3_rules.py over the same lines). A wrong condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_aimS3_rules import ACCEPTED, CASES, IDS
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


def _where(ans: dict) -> tuple[str, int]:
    path, _, line = ans.get("where", "").rpartition(":")
    return path, int(line or 0)


@pytest.mark.parametrize("rid,release,gpu,bad,good", CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, gpu, bad, good):
    oracle = oracles(f"sglang-{release}")
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    ans = oracle.judge_line(bad, {}, gpu)
    assert ans["verdict"] == "refused", (bad, ans)
    path, line = _where(ans)
    assert path in cited and line in cited[path], (ans.get("where"), ans.get("message"))
    ans = oracle.judge_line(good, {}, gpu)
    assert ans["verdict"] == "accepted", (good, ans)


@pytest.mark.parametrize("release,gpu,line", ACCEPTED)
def test_the_release_accepts_the_lines_on_sm90(oracles, release, gpu, line):
    ans = oracles(f"sglang-{release}").judge_line(line, {}, gpu)
    assert ans["verdict"] == "accepted", (line, ans)
