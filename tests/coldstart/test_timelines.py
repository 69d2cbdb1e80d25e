"""Phase timings against numbers read by hand from the fixture logs (tests/fixtures/logs).

Each expectation names the log line it was read from. Times are UTC, vLLM year given as 2026."""
from __future__ import annotations

from datetime import UTC

import pytest

from .conftest import phases, track


def test_vllm_033_kimi_k3_ready_matches_seed_13_timeline():
    rep = track("vllm-0.33-kimi-k3-tp8-ready.log").report()
    d = rep.to_dict()
    ph = phases(rep)
    assert (d["engine"], d["version"], d["status"]) == ("vllm", "0.33.0", "ready")
    # "vLLM server version 0.33.0" at 17:06:30; "Application startup complete." follows the
    # 17:16:56 "Available routes are:" line (uvicorn prints no timestamp)
    assert d["total_seconds"] == 626.0
    assert d["engine_init_seconds"] == 409.61            # "init engine (...) took 409.61 s"
    assert list(ph) == ["process_start", "weights_load", "compile", "profile_run", "kv_cache", "cuda_graphs",
                        "server_ready", "warm"]
    assert ph["process_start"]["start"] == "2026-11-29T17:06:30"
    assert ph["process_start"]["end"] == "2026-11-29T17:07:20"  # first "Starting to load model"
    wl = ph["weights_load"]
    assert (wl["start"], wl["end"]) == ("2026-11-29T17:07:20", "2026-11-29T17:10:06")
    assert wl["details"]["reported_seconds"] == 163.8                          # Worker_TP5 "Loading weights took 163.80 seconds"
    assert wl["details"]["elapsed_seconds"] == 166.0
    assert wl["details"]["gib"] == 194.54 and wl["details"]["shards"] == 12
    assert wl["details"]["ranks_reported"] == 8 and wl["details"]["ranks_expected"] == 8
    assert wl["details"]["ranks"]["Worker_TP5"]["seconds"] == 163.8
    assert wl["details"]["ranks"]["Worker_TP0"]["end"] == "2026-11-29T17:10:06"
    c = ph["compile"]
    assert (c["start"], c["end"]) == ("2026-11-29T17:10:06", "2026-11-29T17:11:09")  # last "torch.compile took"
    assert c["details"]["reported_seconds"] == 59.49                           # "torch.compile took 59.49 s in total"
    pr = ph["profile_run"]   # issue 23: the 170 s profiling/warm-up run is a phase of its own
    assert (pr["start"], pr["end"]) == ("2026-11-29T17:11:09", "2026-11-29T17:14:02")  # Worker_TP6 warmup line
    assert pr["details"]["reported_seconds"] == 170.32 and pr["seconds"] == 173.0
    in_span = [p["seconds"] for p in d["phases"] if p["name"] != "warm"]
    assert sum(in_span) + d["unaccounted_seconds"] == d["total_seconds"] == 626.0
    assert d["unaccounted_seconds"] == 4.0   # 17:14:14 -> :15 and 17:16:52 -> :55: no line covers them
    kv = ph["kv_cache"]
    assert (kv["start"], kv["end"]) == ("2026-11-29T17:14:02", "2026-11-29T17:14:14")
    assert kv["details"]["tokens"] == 2687776 and kv["details"]["concurrency"] == 2.69
    assert kv["details"]["gib"] == 43.76
    g = ph["cuda_graphs"]
    assert (g["start"], g["end"]) == ("2026-11-29T17:14:15", "2026-11-29T17:16:52")  # Worker_TP4 88 secs
    assert g["details"]["reported_seconds"] == 88.0
    assert g["details"]["sizes"] == 51 and g["details"]["gib"] == 5.13
    assert g["details"]["ranks"]["Worker_TP0"]["seconds"] == 85.0
    sr = ph["server_ready"]
    assert (sr["start"], sr["end"], sr["seconds"]) == ("2026-11-29T17:16:55", "2026-11-29T17:16:56", 1.0)
    # first POST after ready comes after the 17:18:20 JIT line
    assert ph["warm"]["end"] == "2026-11-29T17:18:20"


def test_vllm_033_container_start_makes_total_match_seed_10_6_minutes():
    t = track("vllm-0.33-kimi-k3-tp8-ready.log")
    from datetime import datetime
    t.platform_event("container_start", datetime(2026, 11, 29, 17, 6, 21, tzinfo=UTC),
                     datetime(2026, 11, 29, 17, 6, 29, tzinfo=UTC))
    d = t.report().to_dict()
    assert d["phases"][0]["name"] == "container_start"
    assert d["total_seconds"] == 635.0                    # 17:06:21 → 17:16:56 ≈ 10.6 min (seed §13)
    assert len(d["attempts"]) == 1


def test_sglang_0523_kimi_k3_ready_matches_seed_13_timeline():
    rep = track("sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log").report()
    d = rep.to_dict()
    ph = phases(rep)
    assert (d["engine"], d["status"]) == ("sglang", "ready")
    assert d["version"] == ">=0.5.13"                     # "Init parallel begin." exists from 0.5.13 on
    assert d["total_seconds"] == 607.0                    # 18:01:52 server_args → 18:11:59 "fired up"
    assert d["engine_init_seconds"] == 370.0              # weights end 18:04:36 → last graph end 18:10:46
    wl = ph["weights_load"]
    assert (wl["start"], wl["end"], wl["details"]["reported_seconds"]) == ("2026-11-29T18:02:14", "2026-11-29T18:04:36",
                                                                          141.03)
    # the engine's figure is finer than the whole-second stamps (18:02:14 -> 18:04:36): it is the seconds, the span
    # beside it (issue 33)
    assert wl["seconds"] == 141.03 and wl["details"]["elapsed_seconds"] == 142.0
    assert wl["details"]["gb"] == 195.86
    kv = ph["kv_cache"]
    assert (kv["start"], kv["end"]) == ("2026-11-29T18:04:36", "2026-11-29T18:04:42")
    assert kv["details"]["tokens"] == 916672
    assert kv["details"]["pools"] == {"kv": 916672, "draft MHA": 7333376}
    assert kv["details"]["max_total_num_tokens"] == 916672 and kv["details"]["context_len"] == 1000000
    g = ph["cuda_graphs"]
    assert (g["start"], g["end"]) == ("2026-11-29T18:05:15", "2026-11-29T18:10:46")
    assert g["details"]["reported_seconds"] == 329.95                         # TP6: 266.85 + 63.10
    assert g["details"]["sizes"] == 67                    # 52 target + 15 draft batch sizes
    assert g["details"]["ranks"]["TP0"]["captures"] == 2
    assert g["details"]["ranks"]["TP0"]["seconds"] == 328.1  # 265.70 + 62.40
    sr = ph["server_ready"]
    assert (sr["start"], sr["end"]) == ("2026-11-29T18:10:46", "2026-11-29T18:11:59")
    w = ph["warm"]
    assert (w["start"], w["end"]) == ("2026-11-29T18:11:59", "2026-11-29T18:14:03")


def test_sglang_container_start_total_matches_seed():
    t = track("sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log")
    from datetime import datetime
    t.platform_event("container_start", datetime(2026, 11, 29, 18, 1, 45, tzinfo=UTC).timestamp())
    d = t.report().to_dict()
    assert d["total_seconds"] == 614.0                    # 18:01:45 → 18:11:59 ≈ 10.2 min (seed §13)


def test_vllm_063_v0_single_process():
    rep = track("vllm-0.6.3-ready.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert (d["engine"], d["version"], d["status"]) == ("vllm", "0.6.3.post1", "ready")
    assert d["engine_init_seconds"] == 25.0               # no "init engine" line in 0.6.3: 09:00:17 → 09:00:42
    assert ph["weights_load"]["start"] == "2026-11-29T09:00:12"
    assert ph["weights_load"]["end"] == "2026-11-29T09:00:17"
    assert ph["weights_load"]["details"]["gib"] == 14.9888
    assert ph["kv_cache"]["details"]["blocks"] == 27264
    assert ph["cuda_graphs"]["start"] == "2026-11-29T09:00:21"
    assert ph["cuda_graphs"]["seconds"] == 21.0
    assert ph["server_ready"]["end"] == "2026-11-29T09:00:44"
    assert d["total_seconds"] == 43.0


def test_vllm_085_two_ranks_last_rank_ends_phase():
    rep = track("vllm-0.8.5-tp2-ready.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert d["version"] == "0.8.5.post1"
    wl = ph["weights_load"]
    assert wl["end"] == "2026-11-29T10:15:22"             # rank 1 "Model loading took" is last
    assert wl["details"]["reported_seconds"] == 5.64
    assert set(wl["details"]["ranks"]) == {"rank0", "rank1"}
    assert ph["compile"]["details"]["reported_seconds"] == 26.51               # "torch.compile takes 26.51 s in total"
    assert ph["compile"]["end"] == "2026-11-29T10:15:51"
    assert ph["kv_cache"]["details"]["concurrency"] == 2.86
    assert ph["cuda_graphs"]["details"]["reported_seconds"] == 7.0
    assert d["engine_init_seconds"] == 38.42
    assert d["total_seconds"] == 61.0


def test_vllm_011_oom_during_capture_across_midnight():
    rep = track("vllm-0.11-tp2-oom-cuda-graphs.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert d["status"] == "failed"
    assert d["failed_phase"] == "cuda_graphs"
    assert d["reason"].startswith("CUDA out of memory. Tried to allocate 1.00 GiB")
    assert ph["cuda_graphs"]["end"] == "2026-11-30T00:00:12"   # day changes at midnight
    assert ph["cuda_graphs"]["details"]["failed"] is True
    assert d["total_seconds"] == 152.0                    # 23:57:40 → 00:00:12 next day
    assert d["engine_init_seconds"] is None


def test_vllm_011_restart_gives_two_attempts():
    rep = track("vllm-0.11-restart-kv-then-ready.log").report()
    d = rep.to_dict()
    assert [a["status"] for a in d["attempts"]] == ["failed", "ready"]
    first = d["attempts"][0]
    assert first["failed_phase"] == "kv_cache"
    assert "16.00 GiB KV cache is needed" in first["reason"]
    assert first["total_seconds"] == 51.0                 # 08:00:00 → 08:00:51
    assert d["status"] == "ready" and d["total_seconds"] == 51.0  # 08:02:00 → 08:02:51
    assert d["engine_init_seconds"] == 28.77
    assert phases(rep)["weights_load"]["details"]["reported_seconds"] == 14.1


def test_vllm_in_progress_reports_current_phase():
    t = track("vllm-0.33-kimi-k3-tp8-in-progress.log")
    rep = t.report()
    d = rep.to_dict()
    assert d["status"] == "in-progress" and d["failed_phase"] is None
    assert rep.last.current_phase == "weights_load"
    wl = phases(rep)["weights_load"]
    assert wl["end"] is None and wl["details"]["shards_done"] == 5 and wl["details"]["shards"] == 12
    assert d["total_seconds"] == 51.0                     # 17:06:30 → last stamped line 17:07:21


def test_compose_prefix_ansi_and_docker_timestamps():
    rep = track("vllm-0.33-compose-ansi-ready.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert (d["engine"], d["version"], d["status"]) == ("vllm", "0.33.0", "ready")
    assert ph["weights_load"]["details"]["reported_seconds"] == 29.4
    assert ph["cuda_graphs"]["details"]["reported_seconds"] == 18.0
    assert d["engine_init_seconds"] == 41.02
    # the uvicorn line has no engine timestamp; docker's own 04:01:33.512 stamp is used
    assert ph["server_ready"]["end"] == "2026-03-02T04:01:33.512"
    assert d["total_seconds"] == 83.512


def test_sglang_036_no_graph_end_line_and_no_kv_line():
    rep = track("sglang-0.3.6-ready.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert (d["engine"], d["status"]) == ("sglang", "ready")
    assert ph["weights_load"]["seconds"] == 15.0           # 10:00:05 → 10:00:20, no elapsed= in 0.3.x
    assert ph["kv_cache"]["end"] == "2024-11-29T10:00:21"   # only "Memory pool end" in 0.3.x
    g = ph["cuda_graphs"]
    assert g["start"] == "2024-11-29T10:00:22" and g["end"] == "2024-11-29T10:00:40"
    assert g["details"]["end_inferred"] is True           # no end line before 0.4: next phase's first line
    assert ph["server_ready"]["end"] == "2024-11-29T10:00:43"
    assert d["total_seconds"] == 42.0


def test_sglang_046_two_ranks_and_bs_list():
    rep = track("sglang-0.4.6-tp2-ready.log").report()
    d, ph = rep.to_dict(), phases(rep)
    assert ph["weights_load"]["end"] == "2025-06-01T12:01:43"   # TP0 finished last
    assert ph["weights_load"]["seconds"] == 91.0
    assert ph["kv_cache"]["details"]["tokens"] == 201000
    g = ph["cuda_graphs"]
    assert g["details"]["reported_seconds"] == 46.92 and g["end"] == "2025-06-01T12:02:32"
    assert g["details"]["sizes"] == 23
    assert ph["server_ready"]["end"] == "2025-06-01T12:02:37"
    assert d["engine_init_seconds"] == 49.0               # 12:01:43 → 12:02:32


def test_sglang_055_dp_attention_rank_prefixes():
    rep = track("sglang-0.5.5-dp-attention-ready.log").report()
    ph = phases(rep)
    wl = ph["weights_load"]
    assert set(wl["details"]["ranks"]) == {"DP0 TP0 EP0", "DP0 TP1 EP1", "DP1 TP2 EP2", "DP1 TP3 EP3"}
    assert wl["end"] == "2025-10-20T07:31:44"             # DP1 TP2 EP2 is the last rank
    assert ph["cuda_graphs"]["details"]["reported_seconds"] == 77.95
    assert ph["cuda_graphs"]["end"] == "2025-10-20T07:33:05"


def test_sglang_scheduler_exception_with_capture_failure_reason():
    rep = track("sglang-0.5.5-graph-capture-crash.log").report()
    d = rep.to_dict()
    assert d["status"] == "failed" and d["failed_phase"] == "cuda_graphs"
    # "Capture cuda graph failed" is more specific than "Scheduler hit an exception"
    assert d["reason"] == "Capture cuda graph failed: CUDA error: out of memory"
    assert phases(rep)["cuda_graphs"]["end"] == "2025-10-21T09:00:52"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_engine_given_ignores_the_other_engines_markers(engine):
    rep = track("sglang-0.4.6-tp2-ready.log", engine=engine).report()
    names = [p.name for p in rep.phases]
    if engine == "vllm":
        # only uvicorn's own "Application startup complete." is shared; no SGLang marker is read
        assert rep.engine == "vllm" and names == ["server_ready"]
    else:
        assert rep.status == "ready" and "cuda_graphs" in names


def test_draft_model_load_does_not_replace_main_weights_figure():
    """vLLM prints 'Loading weights took' twice with speculative decoding: 163.80 s for Kimi-K3, then 6.41 s for
    the DSpark draft after 'Loading drafter model...' (replay log lines 35-37, read by hand)."""
    from pathlib import Path

    from gpustack_k3.coldstart import ColdStartTracker

    log = Path(__file__).parents[1] / "docker" / "images" / "replay-engine" / "logs" / "vllm-0.33-kimi-k3-8xb300.log"
    t = ColdStartTracker()
    t.feed(log.read_bytes())
    w = next(p for p in t.finish().to_dict()["phases"] if p["name"] == "weights_load")
    assert w["details"]["reported_seconds"] == 163.8
    assert w["details"]["draft_seconds"] == 6.41
