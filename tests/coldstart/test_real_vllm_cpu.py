"""Genuine vLLM 0.32.0 (CPU wheel) start-up logs recorded on this machine (another helper's
fixtures, tests/fixtures/logs/vllm-0.32.0-cpu-*.log). Expected values are the hand readings in
tests/fixtures/logs/vllm-0.32.0-cpu.md, not the parser's output."""
from __future__ import annotations

import pytest

from .conftest import LOGS, phases, track

pytestmark = pytest.mark.skipif(not (LOGS / "vllm-0.32.0-cpu-eager.log").exists(),
                                reason="real vLLM CPU fixtures not recorded")


def test_eager_run():
    rep = track("vllm-0.32.0-cpu-eager.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert (d["engine"], d["version"], d["status"]) == ("vllm", "0.32.0", "ready")
    assert ph["process_start"]["start"] == "2026-11-29T18:17:38"       # first vLLM line (banner)
    assert ph["weights_load"]["start"] == "2026-11-29T18:18:10"        # cpu_model_runner.py:68
    assert ph["weights_load"]["details"]["reported_seconds"] == 0.51                       # default_loader.py:501
    # stamped 18:18:10 at both ends (a 0 s span): the engine's 0.51 s is the finer figure and the phase's seconds
    assert ph["weights_load"]["seconds"] == 0.51 and ph["weights_load"]["details"]["elapsed_seconds"] == 0.0
    assert "compile" not in ph                                         # --enforce-eager
    assert ph["kv_cache"]["details"]["tokens"] == 46592
    assert ph["kv_cache"]["details"]["concurrency"] == 45.5
    assert ph["kv_cache"]["details"]["device"] == "CPU"
    assert d["engine_init_seconds"] == 1.72                            # core.py:402
    assert ph["server_ready"]["start"] == "2026-11-29T18:18:13"
    # uvicorn's "Application startup complete." has no timestamp: it follows the 18:18:15 lines
    assert ph["server_ready"]["end"] == "2026-11-29T18:18:15"
    assert d["total_seconds"] == 37.0                                  # 18:17:38 → 18:18:15
    assert ph["warm"]["details"]["first_request"].endswith('"POST /v1/completions HTTP/1.1" 200 OK')
    assert track("vllm-0.32.0-cpu-eager.log").findings() == []


def test_compiled_run_with_empty_compile_cache():
    rep = track("vllm-0.32.0-cpu-compiled.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert (d["version"], d["status"]) == ("0.32.0", "ready")
    assert ph["weights_load"]["details"]["reported_seconds"] == 1.71
    # the engine's own figure is finer than its whole-second stamps (18:20:37 -> :39): it is the phase's seconds,
    # the stamp span beside it (issue 33)
    assert ph["weights_load"]["seconds"] == 1.71 and ph["weights_load"]["details"]["elapsed_seconds"] == 2.0
    c = ph["compile"]
    # the profiling run (monitor.py:91, 2.86 s up to 18:24:41) ran inside "Warming up model" (:87 -> :91 "Warming up
    # done." 18:24:47): its own phase, the compile ending where it began
    assert (c["start"], c["end"]) == ("2026-11-29T18:20:43", "2026-11-29T18:24:38.140")
    pr = ph["profile_run"]
    assert pr["details"]["reported_seconds"] == 2.86 and pr["end"] == "2026-11-29T18:24:41"
    # the KV cache is sized after the profiling run: its phase runs from the run's end to the KV figure (18:24:47),
    # so the phases after the weights add up to the engine's own "init engine ... took 244.55 s" (issue 33)
    kv = ph["kv_cache"]
    assert (kv["start"], kv["end"], kv["seconds"]) == ("2026-11-29T18:24:41", "2026-11-29T18:24:47", 6.0)
    assert d["engine_init_seconds"] == 244.55
    init = sum(ph[n]["seconds"] for n in ("compile", "profile_run", "kv_cache"))
    assert abs(init - d["engine_init_seconds"]) < 1.0, init      # within the stamps' one-second resolution
    assert d["unaccounted_seconds"] == 4.0                              # 18:20:39 -> :43: no line covers it
    assert ph["server_ready"]["end"] == "2026-11-29T18:24:50"
    assert d["total_seconds"] == 291.0                                 # 18:19:59 → 18:24:50
    # "Inductor compilation was disabled" is printed, but no fusion pass is enabled here
    assert track("vllm-0.32.0-cpu-compiled.log").findings() == []


def test_failed_run_kv_cache_too_small():
    t = track("vllm-0.32.0-cpu-failed.log")
    d = t.report().to_dict()
    assert d["status"] == "failed" and d["failed_phase"] == "kv_cache"
    assert d["reason"].startswith("To serve at least one request with the model's max seq len (8192), "
                                  "(0.18 GiB KV cache is needed")
    assert phases(t.report())["weights_load"]["details"]["reported_seconds"] == 0.36
    assert d["total_seconds"] == 31.0                                  # 18:27:01 → 18:27:32
    assert [f.rule for f in t.findings()] == ["coldstart-failed"]
