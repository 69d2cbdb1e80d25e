"""Tier engine_oracle: each vLLM release with ParallelConfig._validate_numa_bind_cpus (0.28.0 .. 0.34.0) judges the
--numa-bind-cpus values of tests/core/test_numa_bind_cpus.py, and rule vllm-numa-bind-cpus-syntax gives the same
verdict: the release refuses what the rule refuses (with the message the rule quotes) and accepts what it passes."""
from __future__ import annotations

import pytest

from tests.core.test_numa_bind_cpus import ACCEPTED, REFUSED, RELEASES, RID, line
from tests.core.test_vllm_checks import product

pytestmark = pytest.mark.engine_oracle

CASES = [(rel, entries, message) for rel in RELEASES for entries, message in REFUSED]
CASES += [(rel, entries, None) for rel in RELEASES for entries in ACCEPTED]


@pytest.mark.parametrize("release,entries,message", CASES, ids=[f"{c[0]}-{c[1]!r}" for c in CASES])
def test_the_release_and_the_rule_agree_on_numa_bind_cpus(oracles, release, entries, message):
    verdict = oracles(f"vllm-{release}").judge_line(line(entries))
    ours = product(release, line(entries), {})
    if message is None:
        assert verdict["verdict"] == "accepted", verdict
        assert ours["verdict"] == "pass", ours
    else:
        assert verdict["verdict"] == "refused" and message in verdict["message"], verdict
        assert ours["verdict"] == "refuse" and ours["rules"] == [RID], ours
