"""Tier engine_oracle: the releases judge the lines of held-out seed 64283's misses fixed by the lead (round 11), each
with its accepted twin, and the product says the same:
- SGLang DSpark with attention DP and --enable-waterfill (the pipeline turns the MoE A2A backend into deepep:
  arg_groups/overrides.py:1596-1607@0.5.23, :1548-1559@0.5.22; rule sglang-dspark-attn-dp in
  gpustack_k3/core/rules/topology_sglang.py);
- the checks-table entries sglang-mamba-extra-buffer-needs-mamba-model (DeepSeek-V4.1), sglang-dwdp-speculative,
  vllm-mamba-stochastic-rounding-needs-fp16-cache (Nemotron-H's config class) and vllm-spec-tokens-flag-and-json-key
  on 0.28.0/0.29.0 are judged by their own examples in tests/engine_oracle/test_checks_{sglang,vllm}.py.
Needs the wheels (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core.test_checks_table import product
from tests.support import judge_cache

pytestmark = pytest.mark.engine_oracle

DSV41 = ["--trust-remote-code", "--model-path", "/models/DeepSeek-V4.1-Flash", "--tp-size", "8", "--ep-size", "8",
         "--attn-dp-size", "8", "--enable-dp-lm-head", "--speculative-algorithm", "DSPARK",
         "--speculative-draft-model-path", "/models/DeepSeek-V4.1-Flash-DSpark", "--speculative-dspark-block-size", "5",
         "--context-length", "131072"]
RAISE = {"0.5.22": "sglang/srt/arg_groups/speculative_hook.py:617", "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:678"}


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize("extra,refused", [([], False), (["--enable-waterfill"], True),
                                           (["--enable-waterfill", "--moe-a2a-backend", "megamoe"], False)])
def test_waterfill_makes_the_a2a_backend_deepep(oracles, release, extra, refused):
    line = DSV41 + extra
    v = judge_cache.judge_line(oracles(f"sglang-{release}"), line, {})
    got = product("sglang", release, line, {}, "deepseek-v4.1-flash", None)
    if refused:
        assert v["verdict"] == "refused" and v["where"] == RAISE[release] and "got 'deepep'" in v["message"], v
        assert got["verdict"] == "refuse" and got["rules"] == ["sglang-dspark-attn-dp"], got
    else:
        assert v["verdict"] == "accepted", v
        assert got["verdict"] == "pass", got
