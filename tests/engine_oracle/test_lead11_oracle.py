"""Tier engine_oracle: vLLM 0.28.0 and 0.29.0 judge the lines of tests/core/test_lead11_rules.py
(gpustack_k3/core/rules/vllm_checks_lead11.py): where the product refuses, the release refuses at the DSpark-only
option's raise with its message; where the product says nothing, the release accepts; a line whose draft directory the
oracle does not have is not judged here (see judged()).
Needs the wheels (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_lead11_rules as lead11
from tests.support import judge_cache

pytestmark = pytest.mark.engine_oracle

# the option's raise per release (config/speculative.py) and its message
RAISE = {("0.28.0", lead11.ADAPTIVE): (1141, 1142, "Adaptive verification only supported with DSpark"),
         ("0.29.0", lead11.ADAPTIVE): (1507, 1508, "Adaptive verification only supported with DSpark"),
         ("0.28.0", lead11.TOPK): (1089, 1090, "dspark_draft_topk is only supported by DSpark"),
         ("0.29.0", lead11.TOPK): (1437, 1438, "dspark_draft_topk is only supported by DSpark")}



def judged(case: tuple) -> bool:
    """Not the warned lines, nor the eagle3 path the oracle has no directory for (refused earlier, at the draft's
    config lookup: the path detection itself is held to the release's source in tests/core/test_lead11_rules.py)."""
    return case[3] != lead11.UNDECIDED and "/models/some-eagle3-draft" not in " ".join(case[1])


JUDGED = [c for c in lead11.CASES if judged(c)]
IDS = [i for c, i in zip(lead11.CASES, lead11.IDS) if judged(c)]


@pytest.mark.parametrize("release,argv,model,expect", JUDGED, ids=IDS)
def test_the_release_agrees(oracles, release, argv, model, expect):
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), argv, {})
    if expect is None:
        assert v["verdict"] == "accepted", v
        return
    lo, hi, msg = RAISE[(release, expect)]
    path, _, line = str(v.get("where")).rpartition(":")
    assert v["verdict"] == "refused" and path == "vllm/config/speculative.py" and lo <= int(line) <= hi, v
    assert msg in v["message"], v
