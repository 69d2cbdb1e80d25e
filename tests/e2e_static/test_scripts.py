"""The kind e2e and image build scripts: bash syntax, shellcheck (marker ``tools``), the preflight's skip
path as it runs on this machine, and the build context that e2e/images/build.sh stages."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support import tiers

from ._paths import BUILD_SH, ENGINE_DOCKERFILE, REPO, RUN_SH, SCRIPTS

PREFLIGHT_MISSING = 3


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_bash_syntax(script: Path):
    res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script.read_text()
    assert os.stat(script).st_mode & stat.S_IXUSR, f"{script} is not executable"


@pytest.mark.tools
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck(script: Path):
    shellcheck = tiers.tool("shellcheck", "Debian: apt-get install shellcheck; .ci/setup_tools.sh")
    res = subprocess.run([shellcheck, "-x", str(script)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _bin_without(tmp_path: Path, *tools: str) -> str:
    """A PATH where the named tools are absent and everything else of the usual PATH is there."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not Path(d).is_dir():
            continue
        for exe in Path(d).iterdir():
            if exe.name in tools or (shadow / exe.name).exists():
                continue
            if exe.is_file() and os.access(exe, os.X_OK):
                (shadow / exe.name).symlink_to(exe)
    return str(shadow)


@pytest.mark.parametrize("extra", [[], ["--engine"]], ids=["chart", "engine"])
def test_preflight_skips_with_a_reason_when_kind_is_missing(tmp_path, extra):
    env = {**os.environ, "PATH": _bin_without(tmp_path, "kind")}
    res = subprocess.run(["bash", str(RUN_SH), "--preflight", *extra], capture_output=True, text=True,
                         timeout=60, check=False, env=env)
    assert res.returncode == PREFLIGHT_MISSING, res.stderr
    assert "PREFLIGHT: kind is not on PATH" in res.stderr


def test_preflight_refuses_an_unknown_argument():
    res = subprocess.run(["bash", str(RUN_SH), "--bogus"], capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 2 and "usage:" in res.stderr


def _fake_docker(tmp_path: Path) -> tuple[Path, Path]:
    """A `docker` that records its argv and a listing of the build context (the last argument)."""
    bindir, log = tmp_path / "fakebin", tmp_path / "docker.log"
    bindir.mkdir()
    fake = bindir / "docker"
    fake.write_text('#!/usr/bin/env bash\n'
                    f'printf "%s\\n" "$@" > "{log}"\n'
                    f'ctx="${{!#}}"; (cd "$ctx" && find . -type f | sort) > "{log}.files"\n'
                    f'cp "$ctx/Dockerfile" "{log}.Dockerfile"\n')
    fake.chmod(0o755)
    return bindir, log


def test_build_sh_stages_the_engine_context(tmp_path):
    bindir, log = _fake_docker(tmp_path)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"w")
    (wheels / "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"old")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "GPUSTACK_K3_WHEELS": str(wheels),
           "GPUSTACK_K3_BUILD_CA": str(ca)}
    res = subprocess.run(["bash", str(BUILD_SH), "vllm-cpu", "local/vllm-cpu:test", "--network", "host"],
                         capture_output=True, text=True, timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "IMAGE=local/vllm-cpu:test"
    argv = log.read_text().splitlines()
    assert argv[:7] == ["build", "-t", "local/vllm-cpu:test", "--build-arg", "TORCH_INDEX_URL=", "--network", "host"]
    files = log.with_suffix(".log.files").read_text().split()
    assert files == ["./Dockerfile", "./ca/build-ca.pem", "./check_versions.py", "./gguf2hf.py",
                     "./wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert log.with_suffix(".log.Dockerfile").read_text() == ENGINE_DOCKERFILE.read_text()
    # the staged context is removed afterwards
    assert not Path(argv[-1]).exists()


def test_build_sh_without_a_local_torch_wheel_keeps_the_cpu_index(tmp_path):
    bindir, log = _fake_docker(tmp_path)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "GPUSTACK_K3_WHEELS": str(tmp_path / "none"), "GPUSTACK_K3_BUILD_CA": ""}
    env.pop("PIP_CERT", None)
    res = subprocess.run(["bash", str(BUILD_SH), "vllm-cpu", "local/vllm-cpu:test"], capture_output=True, text=True,
                         timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    assert "PyTorch CPU index" in res.stderr
    assert "TORCH_INDEX_URL=" not in log.read_text().splitlines()
    assert log.with_suffix(".log.files").read_text().split() == ["./Dockerfile", "./ca/.keep", "./check_versions.py",
                                                                 "./gguf2hf.py", "./wheels/.keep"]


def test_build_sh_stages_the_operator_context(tmp_path):
    bindir, log = _fake_docker(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CERT", "GPUSTACK_K3_BUILD_CA")}
    env["PATH"] = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    res = subprocess.run(["bash", str(BUILD_SH), "operator", "gpustack-k3:test"], capture_output=True, text=True,
                         timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    files = log.with_suffix(".log.files").read_text().split()
    assert "./pyproject.toml" in files and "./Dockerfile" in files and "./.dockerignore" in files
    assert "./build-ca.pem" not in files
    pkg = sorted(f[2:] for f in files if f.startswith("./gpustack_k3/"))
    want = sorted(str(p.relative_to(REPO)) for p in (REPO / "gpustack_k3").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    assert pkg == want
    assert not any(f.startswith(("./tests/", "./e2e/", "./.ci/")) for f in files)


def test_build_sh_refuses_bad_usage(tmp_path):
    res = subprocess.run(["bash", str(BUILD_SH), "nonsense", "x:y"], capture_output=True, text=True, timeout=30,
                         check=False)
    assert res.returncode == 2 and "usage:" in res.stderr
    res = subprocess.run(["bash", str(BUILD_SH), "operator", "x:y"], capture_output=True, text=True, timeout=30,
                         check=False, env={**os.environ, "GPUSTACK_K3_BUILD_CA": str(tmp_path / "missing.pem"),
                                           "PATH": f"{_fake_docker(tmp_path)[0]}{os.pathsep}{os.environ['PATH']}"})
    assert res.returncode == 2 and "is not a file" in res.stderr
