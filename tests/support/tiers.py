"""What a test does when its tier's tool or service is missing: skip on a developer machine, fail where
the tier was prepared (``CI=true``, which ``scripts/test.sh`` sets, or the tier's own ``GPUSTACK_K3_REQUIRE_*``
variable). A prepared tier never skips silently; ``scripts/test.sh`` also fails on any skip it reads in the
JUnit report (``tools/testgate.py``), so a skip that slipped past this helper is caught there too."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

TRUE = ("1", "true", "yes")


def required(require_env: str | None = None) -> bool:
    """Whether a missing tool fails the test: under CI=true, or when ``require_env`` is set to 1/true."""
    if os.environ.get("CI", "").lower() in TRUE:
        return True
    return bool(require_env) and os.environ.get(require_env, "").lower() in TRUE


def unavailable(reason: str, *, require_env: str | None = None) -> NoReturn:
    """The tier cannot run here: ``pytest.fail`` where it was prepared, else ``pytest.skip`` (both raise)."""
    if required(require_env):
        why = "CI=true" if os.environ.get("CI", "").lower() in TRUE else f"{require_env}=1"
        pytest.fail(f"{why} but {reason}", pytrace=False)
    pytest.skip(reason)


def cache_dir() -> Path:
    return Path(os.environ.get("GPUSTACK_K3_CACHE") or Path.home() / ".cache" / "gpustack-k3")


def engine_wheel(dist: str, version: str) -> Path:
    """A released engine wheel (``vllm``/``sglang``) from the cache ``.ci/setup_engine_wheels.sh`` fills
    ($GPUSTACK_K3_CACHE/wheels), or ``unavailable`` (fails under CI=true or GPUSTACK_K3_REQUIRE_WHEELS=1)."""
    where = cache_dir() / "wheels"
    found = sorted(where.glob(f"{dist}-{version}-*.whl"))
    if not found:
        unavailable(f"{dist} {version} wheel not in {where}: run `bash .ci/setup_engine_wheels.sh`",
                    require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    return found[0]


def unpacked_vllm_releases(where: Path, versions) -> Path:
    """A directory ``where`` of links to the unpacked wheels of the vLLM ``versions`` (a ``-cpu`` build has no wheel
    and is left out): the ``--unpacked`` argument of the tools/engine_parsers table makers."""
    from gpustack_k3.oracle import wheels

    where.mkdir()
    for v in versions:
        if not v.endswith("-cpu"):
            root = wheels.unpacked_dir(engine_wheel("vllm", v))
            (where / root.name).symlink_to(root)
    return where


def tool(name: str, how: str) -> str:
    """An executable on PATH, or ``unavailable`` saying how to install it."""
    found = shutil.which(name)
    if not found:
        unavailable(f"{name} is not installed ({how})")
    return found


def checkov() -> str:
    """checkov: $GPUSTACK_K3_CHECKOV, the venv .ci/setup_checkov.sh builds, or checkov on PATH."""
    env = os.environ.get("GPUSTACK_K3_CHECKOV")
    for cand in (env, str(cache_dir() / "tools" / "checkov-venv" / "bin" / "checkov"), shutil.which("checkov")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    unavailable("checkov is not installed: run .ci/setup_checkov.sh (its own venv) or set GPUSTACK_K3_CHECKOV",
                require_env="GPUSTACK_K3_REQUIRE_CHECKOV")


def aiconfigurator() -> None:
    """aiconfigurator-core (the [predict] extra, installed by .ci/setup_predict.sh), or ``unavailable``."""
    try:
        import aiconfigurator_core  # noqa: F401
    except ImportError:
        unavailable("aiconfigurator-core is not installed: run `bash .ci/setup_predict.sh` "
                    "(pip install 'gpustack-k3[predict]')", require_env="GPUSTACK_K3_REQUIRE_PREDICT")
