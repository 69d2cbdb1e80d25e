"""The judge is part of the package (issue 31 item 8): no module of gpustack_k3 imports the repository's tools/, the
modules that run inside a release's interpreter import nothing of gpustack_k3, and a copy of the package laid out
as an install lays it out (no checkout beside it) imports the judge and, in the engine_oracle tier, judges a line."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import tiers

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "gpustack_k3"


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


def test_no_module_of_the_package_imports_the_repository_tools():
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in sorted(PKG.rglob("*.py")) for m in _imports(p)
           if m == "tools" or m.startswith("tools.")]
    assert bad == [], bad


def test_the_engine_side_imports_only_the_standard_library_the_release_and_its_siblings():
    side = PKG / "oracle" / "engine_side"
    siblings = {p.stem for p in side.glob("*.py")}
    bad = [f"{p.name}: {m}" for p in sorted(side.glob("*.py")) for m in _imports(p) if m.split(".")[0] == "gpustack_k3"]
    assert bad == [], bad
    assert {"worker", "doubles", "stubs", "nixl_pair"} <= siblings


def _installed_copy(dest: Path) -> Path:
    """gpustack_k3 as setuptools installs it (pyproject: every package's .py files + package-data), no tools/."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = cfg["package-data"]["gpustack_k3"]
    site = dest / "site"
    files = [p for p in PKG.rglob("*.py") if (p.parent / "__init__.py").is_file() and "__pycache__" not in p.parts]
    files += [p for g in globs for p in PKG.glob(g) if p.is_file()]
    for p in files:
        target = site / "gpustack_k3" / p.relative_to(PKG)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)
    return site


def _run_in_copy(site: Path, code: str, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-c", code], cwd=str(site.parent), env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_an_installed_copy_imports_the_judge_without_the_checkout(tmp_path):
    site = _installed_copy(tmp_path)
    code = ("import sys, gpustack_k3.oracle.judge as j, gpustack_k3.oracle.document, gpustack_k3.oracle.setup, "
            "gpustack_k3.cli.oracle_cmd\n"
            "assert not [m for m in sys.modules if m == 'tools' or m.startswith('tools.')]\n"
            "print(j.WORKER); print(j.HARDWARE_YAML.is_file())\n")
    r = _run_in_copy(site, code, 120)
    assert r.returncode == 0, r.stderr[-3000:]
    worker, hw = r.stdout.split()
    assert Path(worker).is_file() and Path(worker).is_relative_to(site), worker
    assert hw == "True"


@pytest.mark.engine_oracle
def test_an_installed_copy_judges_a_line_with_the_release(tmp_path):
    from gpustack_k3.oracle.setup import status

    if not status(["vllm-0.33.0"])["releases"]["vllm-0.33.0"]["ready"]:
        tiers.unavailable("vllm-0.33.0 is not prepared (gpustack-k3 oracle setup --engine vllm --version 0.33.0)",
                          require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    site = _installed_copy(tmp_path)
    code = ("import json\nfrom gpustack_k3.oracle import engine_verdict\n"
            "print(json.dumps(engine_verdict('vllm', '0.33.0', ['/models/Kimi-K3', '--trust-remote-code', '-tp', '8', "
            "'-dcp', '3'])))\n")
    r = _run_in_copy(site, code, 600)
    assert r.returncode == 0, r.stderr[-3000:]
    v = json.loads(r.stdout.strip().splitlines()[-1])
    assert v["verdict"] == "refused" and "divisible by dcp_size" in v["message"], v
    assert v["where"].startswith("vllm/config/parallel.py:"), v


def test_the_package_re_exports_the_verdict_api_and_runs_its_modules_once():
    """``gpustack_k3.oracle`` hands out verdict.py's API on first use: importing cache.py or wheels.py (what
    tools/engine_parsers reads) loads neither the judge nor the product's renderers, and ``python3 -m`` of a submodule
    (judge.py, models.py) runs it once (no runpy "found in sys.modules" RuntimeWarning, raised as an error here)."""
    code = ("import sys\nimport gpustack_k3.oracle.cache, gpustack_k3.oracle.wheels\n"
            "heavy = sorted(m for m in sys.modules if m in ('gpustack_k3.oracle.judge', 'gpustack_k3.oracle.verdict', "
            "'gpustack_k3.core.launch'))\n"
            "assert heavy == [], heavy\n"
            "from gpustack_k3.oracle import EngineVerdictUnavailable, compare, engine_verdict, warm\n"
            "from gpustack_k3.oracle import verdict\n"
            "assert engine_verdict is verdict.engine_verdict and warm is verdict.warm\n"
            "import gpustack_k3.oracle as o\n"
            "try:\n    o.no_such_name\nexcept AttributeError as exc:\n    print(exc)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "has no attribute 'no_such_name'" in r.stdout
    for module in ("gpustack_k3.oracle.judge", "gpustack_k3.oracle.models"):
        r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", module, "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "usage:" in r.stdout, (module, r.stderr[-3000:])


def test_the_shape_lines_set_what_they_mean_to_in_the_products_reading():
    """The warm-up's model-shape lines spell their flags from the catalog (warmup.py shape_lines): the product's own
    reader of a command line takes each back to the model path and the field it sets (tensor-parallel size 8 on a GPU
    release, maximum model length 4096 on the CPU build), with nothing refused."""
    from gpustack_k3.core.argv.roles import argv_to_data
    from gpustack_k3.oracle.models import SHAPES
    from gpustack_k3.oracle.releases import RELEASES
    from gpustack_k3.oracle.warmup import shape_lines

    for release, (engine, version, _wheel) in RELEASES.items():
        lines = shape_lines(release)
        assert lines, release
        for ln in lines:
            data, refused = argv_to_data(engine, version, None, ln["gpu_type"], ln["gpus"], [], "shape", ln["argv"])
            spec = data["spec"]
            assert refused == [] and spec["model"]["path"] == SHAPES[ln["seed"].removeprefix("shape/")][1], ln
            if version.endswith("-cpu"):
                assert spec["scheduling"] == {"maxModelLen": 4096}, (release, ln["argv"])
            else:
                assert spec["parallel"] == {"tp": 8}, (release, ln["argv"])
