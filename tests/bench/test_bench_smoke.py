"""Every ``bench/`` script runs at a small size (the smoke tier): a benchmark that no longer starts fails here,
not when someone next quotes its figure. Each run is a fresh process from a scratch directory, as a user runs
it; the check is that it printed its JSON and that the figures in it were computed (not that they are fast).

``bench/oracle_differential.py`` needs the engine releases (the engine_oracle tier): it runs here under that
marker, on one release and a handful of lines. ``bench/predict_accuracy.py`` needs the ``[predict]`` extra: the
predict tier computes its whole table (tests/predict/test_bench_readme.py).

``bench/probe_vs_vllm_bench.py`` needs a real vLLM server: its measurement (``side_by_side``) runs in the
engine tier (tests/engine/test_probe_engine.py ``test_probe_agrees_with_vllm_bench_serve``), on the server
that tier starts anyway; a second server here would double that tier's minutes.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tiers

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# script -> where else it runs, for the scripts not run here
ELSEWHERE = {"probe_vs_vllm_bench.py": "tests/engine/test_probe_engine.py",
             # its whole run() is computed there (the predict tier) and compared with the README's table
             "predict_accuracy.py": "tests/predict/test_bench_readme.py"}


def run_bench(tmp_path: Path, script: str, *args: str, timeout: float = 300) -> dict:
    p = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                       cwd=tmp_path, timeout=timeout, check=False)
    assert p.returncode == 0, f"{script} {' '.join(args)} exited {p.returncode}:\n{p.stderr[-4000:]}"
    return json.loads(p.stdout)


def test_every_bench_script_has_a_smoke_run():
    smoked = set(re.findall(r'run_bench\(tmp_path, "([\w.]+)"', Path(__file__).read_text()))
    missing = [p.name for p in sorted(BENCH.glob("*.py")) if p.name not in smoked | set(ELSEWHERE)]
    assert not missing, f"bench scripts without a smoke run in {Path(__file__).name}: {missing}"
    for script, test in ELSEWHERE.items():
        assert script.removesuffix(".py") in (ROOT / test).read_text(), f"{test} no longer runs {script}"


@pytest.mark.parametrize("render", ["fake", "project"])
def test_operator_scale(tmp_path, render):
    out = run_bench(tmp_path, "operator_scale.py", "--crs", "4", "--workers", "2", "--render", render,
                    "--timeout", "120")
    assert out["crs"] == 4 and sum(out["phases"].values()) == 4, out
    assert out["writes_per_create"] >= 3, out          # at least a workload, a Service and the status
    assert out["writes_per_noop_resync"] == 0, out     # a resync of an unchanged cluster writes nothing
    assert out["resync_reconciles"] >= 4, out


def test_argv_read(tmp_path):
    out = run_bench(tmp_path, "argv_read.py", "--runs", "1")
    figures = [v for v in out.values() if isinstance(v, dict)]
    assert figures and all(isinstance(f, dict) for f in figures), out


def test_planner_accuracy(tmp_path):
    out = run_bench(tmp_path, "planner_accuracy.py")
    assert out["predictions"] >= 1 and out["cases"], out
    assert all(f["kind"] in ("prediction", "calibration") for c in out["cases"] for f in c["figures"]), out


def test_coldstart_throughput(tmp_path):
    out = run_bench(tmp_path, "coldstart_throughput.py", "--lines", "20000", "--dense-repeat", "2", "--repeat", "1",
                    "--block-lines", "2000", "--blocks", "2")
    assert out["serving"]["lines_per_s"] > 0 and out["serving"]["status"] == "ready", out
    assert out["dense"]["lines"] > 0 and out["dense"]["status"] == "ready", out


def test_cli_latency(tmp_path):
    out = run_bench(tmp_path, "cli_latency.py", "--runs", "1", "--no-compile")
    assert out["baselines"]["floor_click_pydantic"]["median_s"] > 0, out
    assert out["own_share_median_s"], out
    budget = out["own_share_budget"]
    assert budget["budget_s"] == 0.1 and isinstance(budget["met"], bool), out
    assert out["baselines"]["floor_click_pydantic_validating"]["median_s"] > 0, out


@pytest.mark.tools
def test_cli_instructions(tmp_path):
    tiers.tool("valgrind", "apt-get install valgrind")
    out = run_bench(tmp_path, "cli_instructions.py", "--runs", "1", "--case", "validate_preset_vllm_seed", timeout=900)
    assert list(out["this_checkout"]) == ["validate_preset_vllm_seed"], out   # one case: ~35 s under callgrind
    assert out["this_checkout"]["validate_preset_vllm_seed"] > 100_000_000, out


@pytest.mark.engine_oracle
def test_oracle_differential(tmp_path):
    tiers.engine_wheel("vllm", "0.33.0")
    out = run_bench(tmp_path, "oracle_differential.py", "--releases", "vllm-0.33.0", "--lines", "6", "--pairs", "2",
                    "--seed", "0", "--summary-only", timeout=600)
    releases = [r for r in out["results"] if "matrix" in r]
    assert len(releases) == 2, out          # the release's lines and the P/D pairs
    for r in releases:
        ro = r["runtime_only"]             # the runtime-only class, judged apart by tools/engine_oracle/runtime_judge.py
        judged = sum(sum(v.values()) for v in r["matrix"].values()) + sum(r["not_decidable"].values()) \
            + ro["agree"] + ro["false_refusals"] + ro["misses"] + ro["unjudged"]
        assert judged == r["judged"] >= 1, r


@pytest.mark.engine_oracle
def test_engine_verdict_latency(tmp_path):
    tiers.engine_wheel("vllm", "0.33.0")
    out = run_bench(tmp_path, "engine_verdict_latency.py", "--lines", "2", timeout=600)
    assert "unavailable" not in out, out
    assert out["cold_start_s"] > 0 and out["warm_per_line_ms"]["median"] > 0, out


@pytest.mark.predict
def test_model_fit(tmp_path):
    tiers.aiconfigurator()
    out = run_bench(tmp_path, "model_fit.py")
    assert out["configs"] >= 50 and out["derived"] + out["unknown"] == out["configs"], out
    assert out["families"], out


@pytest.mark.predict
def test_predict_families(tmp_path):
    tiers.aiconfigurator()
    out = run_bench(tmp_path, "predict_families.py", "-o", "json")
    s = out["summary"]
    assert s["crashed"] == 0 and s["predicted"] >= 1, out
    assert s["predicted"] + s["no_data"] + s["refused"] == s["configs"] == len(out["rows"]), out
