"""CLI: exit codes, JSON shape, text timeline, stdin, unusable input (one line, no traceback)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.coldstart_cmd import coldstart, doctor

from .conftest import LOGS


@pytest.fixture
def run():
    def _run(cmd, args, stdin=None):
        return CliRunner().invoke(cmd, args, input=stdin)
    return _run


def test_coldstart_json_ready_exit_0(run):
    r = run(coldstart, [str(LOGS / "vllm-0.8.5-tp2-ready.log"), "--output", "json", "--year", "2026"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["status"] == "ready" and d["engine_init_seconds"] == 38.42


def test_coldstart_failed_exit_1_and_text_timeline(run):
    r = run(coldstart, [str(LOGS / "vllm-0.11-tp2-oom-cuda-graphs.log")])
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith("vllm 0.11.0: FAILED")
    assert any(l.split()[1:2] == ["cuda_graphs"] for l in lines)
    assert "failed in cuda_graphs: [Worker_TP1] torch.OutOfMemoryError: CUDA out of memory" in r.output
    assert "    after: EngineCore failed to start." in r.output
    assert "\x1b[" not in r.output            # no colour when not a TTY


def test_coldstart_reads_stdin_and_engine_option(run):
    data = (LOGS / "sglang-0.4.6-tp2-ready.log").read_bytes()
    r = run(coldstart, ["-", "--engine", "sglang", "-o", "json"], stdin=data)
    assert r.exit_code == 0
    assert json.loads(r.output)["engine"] == "sglang"


def test_doctor_warnings_exit_0_error_exit_1(run):
    r = run(doctor, [str(LOGS / "sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log"), "-o", "json"])
    assert r.exit_code == 0
    rules = {f["rule"] for f in json.loads(r.output)}
    assert "sglang-kv-pool-below-context" in rules
    r = run(doctor, [str(LOGS / "sglang-0.5.5-graph-capture-crash.log")])
    assert r.exit_code == 1 and "coldstart-failed" in r.output


@pytest.mark.parametrize("args,needle", [
    (["/nonexistent/x.log"], "no such file"),
    ([str(LOGS)], "is a directory"),
])
def test_unusable_input_exit_2_one_line(run, args, needle):
    for cmd in (coldstart, doctor):
        r = run(cmd, args)
        assert r.exit_code == 2
        assert needle in r.output and "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1


def test_empty_input_exit_2(run, tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    r = run(coldstart, [str(p)])
    assert r.exit_code == 2 and "is empty" in r.output


def test_binary_input_is_unusable_not_a_crash(run, tmp_path):
    p = tmp_path / "junk.log"
    p.write_bytes(bytes(range(256)) * 100)
    r = run(coldstart, [str(p), "-o", "json"])
    assert r.exit_code == 2 and "not a text log" in r.output


def test_text_without_markers_is_in_progress(run, tmp_path):
    p = tmp_path / "other.log"
    p.write_text("".join(f"line {i}: nothing an engine prints\n" for i in range(1000)))
    r = run(coldstart, [str(p), "-o", "json"])
    assert r.exit_code == 0
    assert json.loads(r.output)["status"] == "in-progress"


def test_exit_codes_through_the_main_entry_point():
    from gpustack_k3.cli import main
    if not hasattr(main, "run"):
        pytest.skip("main.run not available")
    assert main.run(["coldstart", str(LOGS / "vllm-0.8.5-tp2-ready.log")]) == 0
    assert main.run(["coldstart", str(LOGS / "vllm-0.11-tp2-oom-cuda-graphs.log")]) == 1
    assert main.run(["doctor", str(LOGS / "sglang-0.5.5-graph-capture-crash.log")]) == 1
    assert main.run(["doctor", "/nonexistent.log"]) == 2


def test_endless_binary_input_is_refused_early(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "coldstart", "/dev/zero"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2 and "not a text log" in p.stderr
