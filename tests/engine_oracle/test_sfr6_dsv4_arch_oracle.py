"""Tier engine_oracle (helper sfr6): SGLang reads DeepSeek-V4.1's DeepseekV41ForCausalLM as DeepseekV4ForCausalLM
(sglang/srt/configs/deepseek_v41.py:38-39@0.5.23, the same lines @0.5.22). Two entries of
gpustack_k3/catalog/data/checks/sglang.yaml had to name both classes; each case is judged by the release and the product:

- sglang-language-model-only-architecture: --language-model-only on DeepSeek-V4.1 is accepted (it was a false refusal);
- sglang-mis-needs-flashinfer-attention: --enable-mis without a backend on a DeepseekV4ForCausalLM config is refused
  (the dsv4 backends are the default; it was a miss), as on the catalogued V4.1."""
from __future__ import annotations

import copy

import pytest

from gpustack_k3.core.rules import checks
from gpustack_k3.oracle.models import DSV41_FLASH, _write_dir
from tests.engine_oracle.test_checks_sglang import cited_lines
from tools.engine_oracle.product import check_args

pytestmark = pytest.mark.engine_oracle

RELEASES = ["0.5.22", "0.5.23"]
DSV41 = ["--model-path", "/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tp-size", "8"]


def _product(release: str, argv: list[str]) -> dict:
    return check_args("sglang", release, {"argv": argv, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})


@pytest.fixture(scope="module")
def dsv4_dir(tmp_path_factory) -> str:
    """The catalogued V4.1 config with config.json's architectures already DeepseekV4ForCausalLM (what the release
    makes of V4.1's): the product reads this architecture as it stands."""
    cfg = copy.deepcopy(DSV41_FLASH)
    cfg["architectures"] = ["DeepseekV4ForCausalLM"]
    return _write_dir(tmp_path_factory.mktemp("sfr6") / "dsv4", cfg)


@pytest.mark.parametrize("release", RELEASES)
def test_language_model_only_on_dsv41_is_accepted(oracles, release):
    line = DSV41 + ["--language-model-only"]
    ans = oracles(f"sglang-{release}").judge_line(line, {})
    assert ans["verdict"] == "accepted", ans
    mine = _product(release, line)
    assert mine["verdict"] == "pass", mine
    assert "sglang-language-model-only-architecture" not in mine["rules"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("which", ["dsv41", "dsv4"])
def test_mis_without_a_backend_on_dsv4_is_refused(oracles, dsv4_dir, release, which):
    eid = "sglang-mis-needs-flashinfer-attention"
    base = DSV41 if which == "dsv41" else ["--model-path", dsv4_dir, "--trust-remote-code", "--tp-size", "8"]
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(base + ["--enable-mis"], {})
    assert ans["verdict"] == "refused", ans
    path, _, line = ans.get("where", "").rpartition(":")
    cited = cited_lines(checks.TABLE[eid].releases[release])
    assert path in cited and int(line) in cited[path], ans
    mine = _product(release, base + ["--enable-mis"])
    assert mine["verdict"] == "refuse" and eid in mine["rules"], mine
    ans = oracle.judge_line(base, {})
    assert ans["verdict"] == "accepted", ans
    assert _product(release, base)["verdict"] == "pass"
