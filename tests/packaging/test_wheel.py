"""The product apart from its tooling: the wheel holds the package only, and a fresh venv with nothing but the
wheel and its runtime dependencies runs the main commands (dry-run, render --target all --out, crd, coldstart).
Needs PyPI for the dependencies (pip's cache makes repeat runs quick)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.wheel
TEST_ONLY = ("kmock", "celpy", "kubernetes_validate", "hypothesis", "pytest", "jsonpatch", "jsonschema", "tests", "tools")


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the checkout must not be importable (nor look installed) from the fresh venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from an export of the tracked files (a build writes build/ and *.egg-info next to its sources: not
    into the checkout)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    export = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, export):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((ROOT / rel).read_bytes())
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600, check=False, env=clean_env(), cwd=src)
    assert proc.returncode == 0, proc.stderr
    (whl,) = out.glob("gpustack_k3-*.whl")
    return whl


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(d)
    py = d / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=900, check=False, env=clean_env(), cwd=d)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return d


def test_the_wheel_holds_the_product_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"gpustack_k3", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert not [n for n in names if "/testing/" in n or "celeval" in n or "golden" in n or n.endswith("charts.py")]
    assert any(n.startswith("gpustack_k3/catalog/data/engines/") for n in names)
    assert "gpustack_k3/templates/docker/run.sh.j2" in names


def run(venv_dir: Path, *args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**clean_env(), "GPUSTACK_K3_CATALOG_CACHE": str(cwd / "cache")}
    return subprocess.run([str(venv_dir / "bin" / "gpustack-k3"), *args], capture_output=True, cwd=cwd, env=env,
                          input=stdin, timeout=300, check=False)


def test_main_commands_run_from_the_installed_wheel(fresh_venv, tmp_path):
    py = fresh_venv / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import importlib.util, json, gpustack_k3; print(json.dumps("
                            "[gpustack_k3.__file__, [m for m in %r if importlib.util.find_spec(m)]]))" % (TEST_ONLY,)],
                           capture_output=True, text=True, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, check=True)
    where, test_deps = json.loads(probe.stdout)
    assert where.startswith(str(fresh_venv)) and test_deps == []     # the installed copy, no test dependencies

    dry = run(fresh_venv, "dry-run", "-o", "json", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr.decode()
    assert json.loads(dry.stdout)["ok"] is True

    out = tmp_path / "rendered"
    rendered = run(fresh_venv, "render", "--preset", "vllm-seed", "--target", "all", "--out", str(out), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr.decode()
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                     if p.is_file() and p.name != ".gpustack-k3-render")   # the render's own marker
    committed = sorted(p.relative_to(ROOT / "manifests/examples/vllm-seed").as_posix()
                       for p in (ROOT / "manifests/examples/vllm-seed").rglob("*")
                       if p.is_file() and p.parts[-2] in ("launch", "argv", "kubernetes", "docker", "gpustack"))
    assert written == committed
    for rel in written:   # byte-identical to the golden tree rendered from the checkout
        assert (out / rel).read_text() == (ROOT / "manifests/examples/vllm-seed" / rel).read_text(), rel

    crd = run(fresh_venv, "crd", cwd=tmp_path)
    assert crd.returncode == 0 and crd.stdout.decode() == \
        (ROOT / "charts/gpustack-k3/crds/k3deployments.k3.gpustack.ai.yaml").read_text()

    log = (ROOT / "tests/fixtures/logs/vllm-0.32.0-cpu-compiled.log").read_bytes()
    cs = run(fresh_venv, "coldstart", "-", "-o", "json", cwd=tmp_path, stdin=log)
    assert cs.returncode == 0, cs.stderr.decode()
    assert json.loads(cs.stdout)["status"] == "ready"
