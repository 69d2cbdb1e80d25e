"""Public API: report shape, platform events, stall budgets, listeners, metrics."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from gpustack_k3.coldstart import PHASES, ColdStartTracker, PhaseTransition
from gpustack_k3.metrics import ColdStartMetrics

from .conftest import LOGS, track


def test_phases_tuple_is_canonical():
    assert PHASES == ("scheduled", "image_pull", "container_start", "process_start", "weights_download",
                      "weights_load", "compile", "profile_run", "kv_cache", "cuda_graphs", "server_ready", "warm")


def test_report_dict_has_exactly_the_documented_keys():
    d = track("vllm-0.8.5-tp2-ready.log").report().to_dict()
    assert list(d) == ["engine", "version", "status", "failed_phase", "reason", "engine_init_seconds",
                       "total_seconds", "unaccounted_seconds", "failure", "memory", "compile_cache", "phases",
                       "attempts"]
    assert all(list(p) == ["name", "start", "end", "seconds", "details"] for p in d["phases"])


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="engine must be"):
        ColdStartTracker(engine="tgi")
    with pytest.raises(ValueError, match="budgets: unknown phase 'loading'"):
        ColdStartTracker(budgets={"loading": 5})
    with pytest.raises(ValueError, match="platform_event: phase must be one of"):
        ColdStartTracker().platform_event("weights_load", 0)


def test_platform_phases_then_log():
    t = ColdStartTracker(year=2025)
    t0 = datetime(2025, 3, 1, 10, 0, 0, tzinfo=UTC)
    t.platform_event("scheduled", t0, t0.replace(second=4))
    t.platform_event("image_pull", t0.replace(second=4), t0.replace(minute=2))
    t.platform_event("container_start", t0.replace(minute=2), t0.replace(minute=2, second=3))
    t.feed(b"INFO 03-01 10:02:10 [api_server.py:1043] vLLM API server version 0.8.5\n"
           b"INFO 03-01 10:02:40 [core.py:159] init engine (profile, create kv cache, warmup model) took 20.00 seconds\n"
           b"INFO:     Application startup complete.\n")
    d = t.finish().to_dict()
    assert [p["name"] for p in d["phases"]] == ["scheduled", "image_pull", "container_start",
                                                "process_start", "server_ready"]
    assert d["total_seconds"] == 160.0           # 10:00:00 → 10:02:40
    assert d["phases"][1]["seconds"] == 116.0


def test_container_restart_after_progress_is_a_new_attempt():
    t = track("vllm-0.11-tp2-oom-cuda-graphs.log")
    t.platform_event("container_start", datetime(2026, 11, 30, 0, 1, 0, tzinfo=UTC))
    d = t.report().to_dict()
    assert [a["status"] for a in d["attempts"]] == ["failed", "in-progress"]
    assert d["status"] == "in-progress"


def test_stall_longer_than_budget_fails_the_phase_in_progress():
    t = ColdStartTracker(engine="sglang", budgets={"weights_load": 600})
    t.feed(b"[2025-05-05 10:00:00 TP0] Load weight begin. avail mem=70.00 GB\n")
    base = datetime(2025, 5, 5, 10, 0, 0, tzinfo=UTC).timestamp()
    assert t.check_stall(base + 599) is False
    assert t.report().status == "in-progress"
    assert t.check_stall(base + 601) is True
    d = t.report().to_dict()
    assert d["status"] == "failed" and d["failed_phase"] == "weights_load"
    assert d["reason"] == "stalled in weights_load: no end after 601 s (budget 600 s)"


def test_listeners_see_each_transition_once_in_order():
    events: list[PhaseTransition] = []
    t = ColdStartTracker(year=2026, listeners=[events.append])
    t.feed((LOGS / "vllm-0.11-restart-kv-then-ready.log").read_bytes())
    t.finish()
    seq = [(e.attempt, e.phase, e.event) for e in events]
    assert seq[:3] == [(1, "process_start", "start"), (1, "weights_load", "start"), (1, "process_start", "end")] or \
        (1, "weights_load", "end") in seq
    assert (1, "kv_cache", "failed") in seq
    assert (2, None, "attempt") in seq
    assert (2, "server_ready", "end") in seq
    assert len(seq) == len(set(seq))
    end = next(e for e in events if (e.attempt, e.phase, e.event) == (2, "weights_load", "end"))
    assert end.seconds == 14.1 and end.engine == "vllm"


def test_metrics_from_listener_use_an_isolated_registry():
    reg = CollectorRegistry()
    m = ColdStartMetrics(registry=reg)
    t = ColdStartTracker(year=2026, listeners=[m.listener])
    t.feed((LOGS / "vllm-0.11-tp2-oom-cuda-graphs.log").read_bytes())
    t.finish()
    get = reg.get_sample_value
    assert get("gpustack_k3_cold_start_phase_seconds_count", {"engine": "vllm", "phase": "weights_load"}) == 1
    assert get("gpustack_k3_cold_start_phase_seconds_sum", {"engine": "vllm", "phase": "weights_load"}) == 82.75
    assert get("gpustack_k3_cold_start_failures_total", {"engine": "vllm", "phase": "cuda_graphs"}) == 1
    assert get("gpustack_k3_cold_start_current_phase", {"engine": "vllm", "phase": "cuda_graphs"}) == 0
    # a second instance on its own registry does not clash
    ColdStartMetrics(registry=CollectorRegistry())


def test_metrics_set_the_current_phase_while_in_progress():
    reg = CollectorRegistry()
    m = ColdStartMetrics(registry=reg)
    t = ColdStartTracker(year=2026, listeners=[m.listener])     # live, as the runners and the operator feed it
    t.feed((LOGS / "vllm-0.33-kimi-k3-tp8-in-progress.log").read_bytes())
    assert reg.get_sample_value("gpustack_k3_cold_start_current_phase",
                                {"engine": "vllm", "phase": "weights_load"}) == 1
    assert reg.get_sample_value("gpustack_k3_cold_start_current_phase",
                                {"engine": "vllm", "phase": "compile"}) == 0
