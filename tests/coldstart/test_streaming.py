"""One implementation for files and live streams: any chunking gives the same report."""
from __future__ import annotations

import random

import pytest

from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.coldstart.tracker import MAX_LINE

from .conftest import LOGS, track

ALL = sorted(p.name for p in LOGS.glob("*.log"))


@pytest.mark.parametrize("name", ALL)
def test_random_chunking_gives_the_same_report_and_findings(name):
    whole = track(name)
    data = (LOGS / name).read_bytes()
    rng = random.Random(name)
    t = ColdStartTracker(year=2026)
    i = 0
    while i < len(data):
        n = rng.choice([1, 2, 3, 7, 64, 500, 4096])
        t.feed(data[i:i + n])
        i += n
    t.finish()
    assert t.report().to_dict() == whole.report().to_dict()
    assert t.findings() == whole.findings()


def test_byte_by_byte_feed_of_a_multi_rank_log():
    data = (LOGS / "sglang-0.5.5-dp-attention-ready.log").read_bytes()
    t = ColdStartTracker(year=2026)
    for b in data:
        t.feed(bytes([b]))
    assert t.finish().to_dict() == track("sglang-0.5.5-dp-attention-ready.log").report().to_dict()


def test_unterminated_last_line_is_read_at_finish():
    t = ColdStartTracker(year=2026)
    t.feed(b"[2025-01-01 00:00:00] server_args=ServerArgs(tp_size=1)\n"
           b"[2025-01-01 00:00:05 TP0] Load weight begin. avail mem=70.00 GB\n"
           b"[2025-01-01 00:00:09 TP0] Load weight end. elapsed=4.00 s, type=X, avail mem=60.00 GB, mem usage=10.00 GB.")
    assert t.report().phase("weights_load") is None or t.report().phase("weights_load").end is None
    rep = t.finish()
    assert rep.phase("weights_load").seconds == 4.0


def test_interleaved_ranks_with_partial_lines_split_across_chunks():
    a = b"(Worker_TP0 pid=10) INFO 01-01 00:01:00 [default_loader.py:509] Loading weights took 50.00 seconds\n"
    b = b"(Worker_TP1 pid=11) INFO 01-01 00:01:07 [default_loader.py:509] Loading weights took 57.00 seconds\n"
    t = ColdStartTracker(engine="vllm", year=2025)
    t.feed(b"(Worker_TP1 pid=11) INFO 01-01 00:00:10 [gpu_model_runner.py:4982] Starting to load model m...\n")
    t.feed(b"(Worker_TP0 pid=10) INFO 01-01 00:00:10 [gpu_model_runner.py:4982] Starting to load model m...\n")
    t.feed(a[:40]); t.feed(b[:30]); t.feed(b"\n")
    t.feed(a); t.feed(b)
    wl = t.finish().phase("weights_load")
    assert wl.seconds == 57.0 and wl.details["ranks_reported"] == 2


def test_long_line_without_newline_keeps_memory_bounded():
    t = ColdStartTracker(year=2026)
    junk = b"x" * 65536
    for _ in range((MAX_LINE // len(junk)) * 3):
        t.feed(junk)
        assert len(t._framer._buf) <= MAX_LINE
    t.feed(b" Loading weights took 1.00 seconds\n")   # tail of the dropped junk line: ignored
    t.feed(b"INFO 01-01 00:00:01 [x.py:1] vLLM API server version 0.9.2\n")
    rep = t.finish()
    assert rep.version == "0.9.2" and rep.phase("weights_load") is None


def test_binary_noise_between_lines_is_tolerated():
    clean = (LOGS / "vllm-0.8.5-tp2-ready.log").read_bytes()
    noisy = clean.replace(b"\n", b"\n\x00\xff\xfe\x1b[31m\x80garbage\x1b[0m\n", 5)
    t = ColdStartTracker(year=2026)
    t.feed(noisy)
    assert t.finish().to_dict() == track("vllm-0.8.5-tp2-ready.log").report().to_dict()


def test_year_rollover_for_vllm_timestamps():
    t = ColdStartTracker(engine="vllm", year=2025)
    t.feed(b"(Worker_TP0 pid=1) INFO 12-31 23:59:50 [gpu_model_runner.py:4982] Starting to load model m...\n"
           b"(Worker_TP0 pid=1) INFO 01-01 00:00:20 [default_loader.py:509] Loading weights took 30.00 seconds\n")
    p = t.finish().to_dict()["phases"]
    wl = next(x for x in p if x["name"] == "weights_load")
    assert (wl["start"], wl["end"]) == ("2025-12-31T23:59:50", "2026-01-01T00:00:20")
    assert wl["details"]["elapsed_seconds"] == 30.0


def test_sglang_time_only_prefix_rolls_over_midnight():
    t = ColdStartTracker(engine="sglang", year=2024)
    t.feed(b"[23:59:58 TP0] Load weight begin. avail mem=70.00 GB\n"
           b"[00:00:08 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.float16, avail mem=60.00 GB\n")
    wl = t.finish().phase("weights_load")
    assert wl.end - wl.start == 10.0


@pytest.mark.parametrize("name", ALL)
def test_regex_fallback_backend_gives_the_same_report(name):
    """Without ahocorasick_rs installed the scanner falls back to one compiled alternation regex."""
    fast = track(name)
    slow = track(name, backend="regex")
    assert slow.scanner.backend == "regex"
    assert slow.report().to_dict() == fast.report().to_dict()
    assert slow.findings() == fast.findings()


def test_many_restarts_keep_attempts_bounded():
    from gpustack_k3.coldstart.tracker import MAX_ATTEMPTS
    t = ColdStartTracker(engine="vllm", year=2026)
    for i in range(MAX_ATTEMPTS + 10):
        t.feed(f"INFO 01-01 00:{i // 60:02d}:{i % 60:02d} [api_server.py:1] vLLM API server version 0.9.2\n"
               f"INFO 01-01 00:{i // 60:02d}:{i % 60:02d} [core.py:1] EngineCore failed to start.\n".encode())
    rep = t.finish()
    assert len(rep.attempts) == MAX_ATTEMPTS and rep.dropped_attempts == 10
    assert rep.last.index == MAX_ATTEMPTS + 10


def test_state_stays_bounded_on_endless_marker_lines():
    from gpustack_k3.coldstart.tracker import MAX_HITS_PER_RULE, MAX_RANKS
    t = ColdStartTracker(engine="vllm", year=2026)
    for block in range(20):
        lines = []
        for i in range(2000):
            r = block * 2000 + i
            lines.append(f"(Worker_TP{r} pid={r}) INFO 01-01 00:00:01 [default_loader.py:509] Loading weights took 1.00 seconds")
            lines.append(f"(Worker_TP{r} pid={r}) WARNING 01-01 00:00:01 [kv_cache.py:180] Using KV cache scaling factor 1.0 for fp8_e4m3.")
            lines.append(f"(Worker_TP{r} pid={r}) INFO 01-01 00:00:01 [x.py:1] device_name=NVIDIA_X{r}.json")
        t.feed(("\n".join(lines) + "\n").encode())
    rep = t.finish()
    assert len(t.attempts[-1].phases["weights_load"].ranks) == MAX_RANKS
    assert all(len(h) <= MAX_HITS_PER_RULE for h in t.doctor_hits.values())
    assert t.doctor_counts["fp8-kv-no-scales"] == 40000
    assert rep.phase("weights_load").seconds == 1.0
