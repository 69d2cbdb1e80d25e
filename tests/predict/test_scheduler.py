"""The scheduler model on costs simple enough to follow by hand."""
from __future__ import annotations

import pytest

from gpustack_k3.predict.scheduler import Policy, simulate


def _run(engine, *, budget=100, lpt=0, drafts=0, tps=1.0, n=2, inp=200, out=3, seqs=8):
    pol = Policy(engine, budget, lpt, seqs, drafts, tps)
    return simulate(pol, lengths=[(inp, out)] * n, concurrency=n, rate=None,
                    decode_ms=lambda b, ctx: 10.0, prefill_ms=lambda tok, pre: float(tok))   # 1 ms per prefill token


def test_vllm_runs_running_requests_first_then_admits():
    # budget 100, prompts 200: step1 r0 100; step2 r0 100 (done); step3 r0 decode (1 row) + r1 99 ...
    res = _run("vllm")
    r0, r1 = res.requests
    assert r0.chunks[0] == {"tokens": 100, "prefix": 0, "step_tokens": 100, "ms": 100.0}
    assert r0.prefill_done_at == pytest.approx(0.2)
    # r0's first delta with its first decode step (step 3: 99 prefill tokens of r1 + a 10 ms decode)
    assert r0.first_delta_at == pytest.approx(0.2 + 0.099 + 0.010)
    assert r1.chunks[0]["tokens"] == 99


def test_sglang_prefills_before_decoding():
    res = _run("sglang")
    r0, r1 = res.requests
    # prefill steps of 100 tokens until both prompts are in (4 steps, 400 ms), then decode steps of 10 ms
    assert r1.prefill_done_at == pytest.approx(0.4)
    assert r0.first_delta_at == pytest.approx(0.41) and r1.first_delta_at == pytest.approx(0.41)
    # output 3: the prefill token + 2 decode steps
    assert r0.done_at == pytest.approx(0.42)
    assert res.end_s == pytest.approx(0.42)


def test_long_prefill_threshold_caps_the_chunk_when_others_wait():
    res = _run("vllm", lpt=30)
    assert res.requests[0].chunks[0]["tokens"] == 30


def test_acceptance_shortens_decode():
    slow = _run("sglang", out=21, tps=1.0)
    fast = _run("sglang", out=21, tps=2.0, drafts=1)
    assert fast.end_s < slow.end_s
    assert fast.requests[0].decode_steps == 10 and slow.requests[0].decode_steps == 20


def test_max_num_seqs_queues_the_rest():
    res = _run("sglang", n=3, seqs=1)
    a, b, c = res.requests
    assert b.arrival == 0.0 and b.chunks[0]["prefix"] == 0
    assert b.prefill_done_at > a.done_at


def test_each_request_runs_at_its_own_lengths():
    # SGLang, budget 100, one client, requests (50 in, 3 out) then (250 in, 2 out); prefill 1 ms/token, decode 10 ms
    pol = Policy("sglang", 100, 0, 8, 0, 1.0)
    res = simulate(pol, lengths=[(50, 3), (250, 2)], concurrency=1, rate=None,
                   decode_ms=lambda b, ctx: 10.0, prefill_ms=lambda tok, pre: float(tok))
    a, b = res.requests
    assert (a.input_len, a.output_len, b.input_len, b.output_len) == (50, 3, 250, 2)
    # a: one 50-token chunk (50 ms), 2 decode steps (the prefill token + 2 = 3): done at 70 ms
    assert [c["tokens"] for c in a.chunks] == [50] and a.done_at == pytest.approx(0.070)
    # b, issued at 70 ms: chunks 100 + 100 + 50 (250 ms), 1 decode step: done at 330 ms, TTFT 260 ms
    assert [c["tokens"] for c in b.chunks] == [100, 100, 50] and b.arrival == pytest.approx(0.070)
    assert b.done_at == pytest.approx(0.330) and res.ttfts() == pytest.approx([0.060, 0.260])
    assert res.end_s == pytest.approx(0.330)


def test_open_loop_arrivals_run_at_their_own_lengths():
    # 10 req/s: arrivals at 0 and 100 ms; (50 in, 2 out) then (20 in, 2 out); prefill 1 ms/token, decode 10 ms
    pol = Policy("sglang", 100, 0, 8, 0, 1.0)
    res = simulate(pol, lengths=[(50, 2), (20, 2)], concurrency=1, rate=10.0,
                   decode_ms=lambda b, ctx: 10.0, prefill_ms=lambda tok, pre: float(tok))
    a, b = res.requests
    assert a.done_at == pytest.approx(0.060)                       # 50 ms prefill + one 10 ms decode
    assert b.arrival == pytest.approx(0.100) and b.done_at == pytest.approx(0.130)   # idle until it arrives
    assert res.ttfts() == pytest.approx([0.060, 0.030]) and res.end_s == pytest.approx(0.130)
