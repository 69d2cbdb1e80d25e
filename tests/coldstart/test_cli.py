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
    out = json.loads(r.output)
    # the findings list, or (issue 33: every command's JSON says ok and findings) the object that carries it
    findings = out["findings"] if isinstance(out, dict) else out
    assert isinstance(out, list) or out["ok"] is True
    rules = {f["rule"] for f in findings}
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


def test_text_without_an_engine_line_is_unusable(run, tmp_path):
    """issue 23: a file with no engine line is not an engine "in progress": exit 2, the error object under -o json."""
    p = tmp_path / "other.log"
    p.write_text("".join(f"line {i}: nothing an engine prints\n" for i in range(1000)))
    r = run(coldstart, [str(p), "-o", "json"])
    assert r.exit_code == 2 and "no line of a vLLM or SGLang engine" in r.stderr
    assert json.loads(r.stdout)["error"]["where"] == "LOG"


def test_engine_option_contradicting_the_log_warns(run):
    r = run(coldstart, [str(LOGS / "vllm-0.8.5-tp2-ready.log"), "--engine", "sglang", "-o", "json", "--year", "2026"])
    assert "--engine sglang but the log has" in r.stderr and "of vllm" in r.stderr
    if r.exit_code == 0:
        assert json.loads(r.stdout)["warnings"]
    else:
        assert r.exit_code == 2 and json.loads(r.stdout)["exit_code"] == 2
    ok = run(coldstart, [str(LOGS / "vllm-0.8.5-tp2-ready.log"), "--engine", "vllm", "--year", "2026"])
    assert ok.exit_code == 0 and "warning" not in ok.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_phases_and_unaccounted_add_up_to_the_total(run, name):
    """issue 23: the phases are wall-clock intervals; inside the attempt's span they and `unaccounted_seconds` add up
    to `total_seconds` (what runs after Ready, the warm-up requests, is outside it). A phase whose engine printed a
    finer figure than its stamps shows that figure as `seconds` and its span as `details.elapsed_seconds` (issue 33):
    the spans add up."""
    r = run(coldstart, [str(LOGS / name), "-o", "json", "--year", "2026"])
    d = json.loads(r.stdout)
    assert all(p["seconds"] is None or p["seconds"] >= 0 for p in d["phases"]), d["phases"]
    if d["total_seconds"] is None:
        return
    from datetime import datetime

    start = min(datetime.fromisoformat(p["start"]) for p in d["phases"] if p["start"])
    end = start.timestamp() + d["total_seconds"]
    span = {p["name"]: p["details"].get("elapsed_seconds", p["seconds"]) for p in d["phases"]}
    inside = [span[p["name"]] for p in d["phases"] if span[p["name"]] is not None and p["start"]
              and datetime.fromisoformat(p["start"]).timestamp() < end]
    assert abs(sum(inside) + d["unaccounted_seconds"] - d["total_seconds"]) < 0.01, (name, d["phases"])


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


def test_coldstart_with_preset_adds_the_plan_check(run):
    r = run(coldstart, [str(LOGS / "vllm-0.32.0-cpu-eager.log"), "--preset", "vllm-cpu-smollm2", "--year", "2026",
                        "-o", "json"])
    assert r.exit_code == 0, r.output
    check = json.loads(r.output)["plan_check"]
    assert [(x["figure"], x["planned"], x["engine"], x["drift_pct"]) for x in check["figures"]] == [
        ("kv_cache_gib", 1.0, 1.0, 0.0), ("kv_cache_tokens", 46603, 46592, -0.02),
        ("max_concurrency", 45.5107, 45.5, -0.02)]
    assert check["max_abs_drift_pct"] == 0.02 and check["not_printed"] == []
    text = run(coldstart, [str(LOGS / "vllm-0.32.0-cpu-eager.log"), "--preset", "vllm-cpu-smollm2", "--year", "2026"])
    assert "kv_cache_tokens        planned       46,603  engine       46,592  drift -0.02%" in text.output


def test_coldstart_plan_check_names_an_engine_mismatch_and_figures_not_printed(run):
    r = run(coldstart, [str(LOGS / "sglang-0.5.5-graph-capture-crash.log"), "--preset", "vllm-cpu-smollm2", "-o", "json"])
    check = json.loads(r.output)["plan_check"]
    assert check["note"] == "the log is sglang's but the spec plans vllm"
    assert "max_concurrency" in check["not_printed"]


def test_coldstart_spec_errors(run, tmp_path):
    log = str(LOGS / "vllm-0.32.0-cpu-eager.log")
    both = run(coldstart, [log, "--spec", "x.yaml", "--preset", "vllm-cpu-smollm2"])
    assert both.exit_code == 2 and "give one of them" in both.output
    missing = run(coldstart, [log, "--spec", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 2
    unknown = run(coldstart, [log, "--preset", "no-such-preset"])
    assert unknown.exit_code == 2 and "unknown preset" in unknown.output
    bad = tmp_path / "dcp2.yaml"   # DCP 2 does not divide TP 1: refused (vLLM's own config check, the oracle agrees)
    preset = LOGS.parents[2] / "gpustack_k3" / "catalog" / "data" / "presets" / "vllm-cpu-smollm2.yaml"
    bad.write_text(preset.read_text().replace("parallel: {tp: 1}", "parallel: {tp: 1, dcp: 2}"))
    refused = run(coldstart, [log, "--spec", str(bad)])
    assert refused.exit_code == 1, refused.output    # a refused spec: its findings, no timeline
    assert "FAILED" not in refused.output
