"""The probe over real HTTP against the fake OpenAI-compatible server (tests/probe/fake_openai.py), whose
delays and token counts are the ground truth: figures, the reasoning-first TTFT, stages, error paths,
invariants against a lying server, engine counters."""
from __future__ import annotations

import pytest
from fake_openai import Behaviour, FakeOpenAI

from gpustack_k3.probe.client import Paths, base_url, collect, run_probe
from gpustack_k3.probe.core import ProbeConfig, parse_slo
from gpustack_k3.probe.report import summarize
from tests.support.ports import free_port

# Timers here are sleeps on a 2-core machine shared with other jobs: a client may read a chunk late, never
# early. So each trace is checked against the server's own record of that request (same monotonic clock,
# matched by x-request-id): TTFT no less than the server's first write, the delta it stops at being the
# first one sent. Upper bounds would only measure the machine's load.


def rules(rep):
    return {f["rule"] for f in rep.to_dict()["findings"]}


def probe(server, **kw):
    kw.setdefault("requests", 8)
    kw.setdefault("concurrency", 4)
    kw.setdefault("input_len", 40)
    kw.setdefault("output_len", 12)
    kw.setdefault("warmup", 1)
    return run_probe(server.url, ProbeConfig(**kw), run_id="t1")


def collected(server, **kw):
    cfg = ProbeConfig(**kw)
    col = collect(server.url, cfg, run_id="t1")
    return col, summarize(cfg, col)


def first(rec, *kinds):
    return next(t for t, k in rec["writes"] if k in kinds)


def test_figures_match_the_servers_known_timing_and_counts():
    b = Behaviour(prefill_s=0.15, token_s=0.02)
    with FakeOpenAI(b) as srv:
        col, rep = collected(srv, requests=8, concurrency=4, input_len=40, output_len=12, warmup=2)
    d = rep.to_dict()
    assert rep.exit_code == 0, d["findings"]
    assert [s["name"] for s in d["stages"]] == ["health", "models", "metrics", "completion"]
    assert d["engine"] == "vllm" and d["model"] == "fake-model"
    assert d["completed"] == 8 and d["errors"] == 0 and d["output_tokens"] == 8 * 12     # exact
    assert d["input_tokens"] == {"target": 40, "mean": 40.0, "min": 40, "max": 40}        # sized by calibration
    for t in col.run:
        rec = srv.timeline[f"probe-t1-run-{t.index}"]
        assert t.start <= rec["recv"] and t.first_any >= first(rec, "content") >= rec["recv"] + 0.15
        assert t.last_delta >= rec["writes"][-3][0]           # the last token chunk (before usage, [DONE])
        assert t.ttft_s >= 0.15 and t.tpot_s == pytest.approx((t.e2el_s - t.ttft_s) / 11)
    assert d["ttft_ms"]["p50"] >= 150 and d["ttft_ms"]["n"] == 8
    assert d["itl_ms"]["n"] == 8 * 11 and d["tokens_per_chunk"] == 1.0
    assert d["output_tokens_per_s"] == pytest.approx(96 / d["wall_s"], rel=1e-3)
    # warm-up apart: its requests are not in the run's figures; the server saw stages(2) + 2 + 8 requests
    assert d["warmup"]["requests"] == 2 and d["warmup"]["completed"] == 2 and srv.requests == 12
    assert {f"probe-t1-warmup-{i}" for i in range(2)} <= set(srv.timeline)
    # what was sent: fixed output, usage asked for, a unique prefix per request, never more than 4 at once
    streamed = [x for x in srv.bodies if x.get("stream")]
    assert all(x["ignore_eos"] and x["max_tokens"] == 12 and x["stream_options"] == {"include_usage": True}
               for x in streamed)
    assert len({" ".join(x["messages"][0]["content"].split()[:4]) for x in streamed}) == 10
    assert srv.peak_active <= 4
    inv = {i["name"]: i["ok"] for i in d["invariants"]}
    assert inv == {"requested_bound": True, "throughput_bound": True, "tokens_vs_engine": True}
    assert d["metrics"]["generation_tokens"] == 96 and d["metrics"]["preemptions"] == 0


def test_reasoning_first_stream_where_the_two_ttft_definitions_differ():
    """vLLM with --reasoning-parser streams delta.reasoning before delta.content. Here the server thinks for 6
    tokens and then pauses 1.5 s before the first content token. TTFT is the first delta of any kind: it stops at
    the first reasoning chunk, before the server had even written any content. A content-only TTFT (GPUStack's
    benchmark, gpustack#6205) would report the thinking time as the time to the first token."""
    b = Behaviour(prefill_s=0.2, token_s=0.01, reasoning_tokens=6, think_gap_s=1.5)
    with FakeOpenAI(b) as srv:
        col, rep = collected(srv, requests=4, concurrency=4, output_len=12, warmup=0)
    for t in col.run:
        rec = srv.timeline[f"probe-t1-run-{t.index}"]
        assert first(rec, "reasoning") <= t.first_any < first(rec, "content") <= t.first_content
        assert t.ttft_content_s - t.ttft_s >= 1.5 * 0.9 and t.ttft_s >= 0.2
    d = rep.to_dict()
    assert d["ttft_content_ms"]["p50"] - d["ttft_ms"]["p50"] >= 1350
    assert "probe.reasoning-first" in rules(rep)
    # answers that never leave the reasoning: no content TTFT at all (where GPUStack shows 0)
    with FakeOpenAI(Behaviour(prefill_s=0.2, token_s=0.01, reasoning_tokens=100, reasoning_field="reasoning_content")) as srv:
        rep = probe(srv, requests=4, concurrency=4, output_len=8, warmup=0)
    d = rep.to_dict()
    assert d["ttft_content_ms"]["n"] == 0 and d["ttft_ms"]["n"] == 4 and d["ttft_ms"]["p50"] >= 200
    assert "no request reached content" in next(f["message"] for f in d["findings"] if f["rule"] == "probe.reasoning-first")


def test_bad_json_chunk_and_500s_are_failed_requests():
    b = Behaviour(bad_json_at={4}, status_for={5: 500, 7: 503})   # numbering: 0,1 stages, 2 warm-up, 3.. run
    with FakeOpenAI(b) as srv:
        rep = probe(srv, requests=6, concurrency=1)
    d = rep.to_dict()
    assert rep.exit_code == 1 and d["errors"] == 3 and d["completed"] == 3
    errs = " ".join(d["error_examples"])
    assert "not JSON" in errs and "HTTP 500" in errs and "HTTP 503" in errs
    assert "probe.errors" in rules(rep)


def test_missing_usage_counts_chunks_and_says_so():
    with FakeOpenAI(Behaviour(usage=False, tokens_per_chunk=1)) as srv:
        rep = probe(srv, output_len=10)
    d = rep.to_dict()
    assert "probe.usage-missing" in rules(rep) and d["output_tokens"] == 8 * 10   # one token per chunk here
    assert "without usage" in d["stages"][3]["detail"] and d["input_tokens"] is None


def test_multi_token_chunks_make_itl_a_chunk_gap():
    with FakeOpenAI(Behaviour(tokens_per_chunk=4, token_s=0.005)) as srv:
        rep = probe(srv, output_len=16)
    d = rep.to_dict()
    assert d["tokens_per_chunk"] == 4.0 and d["itl_ms"]["n"] == 8 * 3 and "probe.multi-token-chunks" in rules(rep)
    assert d["output_tokens"] == 8 * 16


@pytest.mark.parametrize("behaviour, cfg, stage, needle", [
    (Behaviour(health=503), {}, "health", "answered 503"),
    (Behaviour(), {"model": "other"}, "models", "does not serve 'other'"),
    (Behaviour(api_key="s3cret"), {}, "models", "--api-key-env"),
    (Behaviour(status_for={0: 400}), {}, "completion", "answered 400"),
])
def test_unusable_endpoint_stops_at_the_failed_stage(behaviour, cfg, stage, needle):
    with FakeOpenAI(behaviour) as srv:
        rep = probe(srv, **cfg)
        seen = srv.requests
    d = rep.to_dict()
    assert rep.exit_code == 2 and d["usable"] is False
    assert d["stages"][-1]["name"] == stage and not d["stages"][-1]["ok"] and needle in d["reason"]
    assert seen <= 1                       # nothing was streamed at an unusable endpoint


def test_nothing_listening_is_unusable():
    rep = run_probe(f"http://127.0.0.1:{free_port()}", ProbeConfig(requests=1))
    assert rep.exit_code == 2 and "stage health" in rep.to_dict()["reason"]


def test_api_key_goes_in_the_header():
    with FakeOpenAI(Behaviour(api_key="s3cret")) as srv:
        rep = run_probe(srv.url, ProbeConfig(requests=2, concurrency=2, output_len=4, warmup=0), api_key="s3cret")
    assert rep.exit_code == 0 and "s3cret" not in str(rep.to_dict())


def test_without_engine_metrics_ignore_eos_is_not_sent_and_short_answers_are_flagged():
    with FakeOpenAI(Behaviour(metrics=None, eos_after=5)) as srv:
        rep = probe(srv, output_len=12)
        sent = [x for x in srv.bodies if x.get("stream")]
    d = rep.to_dict()
    assert d["engine"] is None and not any("ignore_eos" in x for x in sent)
    assert {"probe.no-metrics", "probe.output-length"} <= rules(rep) and d["output_tokens"] == 8 * 5
    assert rep.exit_code == 0


def test_lying_usage_breaks_the_invariants():
    with FakeOpenAI(Behaviour(usage_scale=3)) as srv:
        rep = probe(srv, output_len=12)
    d = rep.to_dict()
    inv = {i["name"]: i["ok"] for i in d["invariants"]}
    assert inv["requested_bound"] is False and inv["tokens_vs_engine"] is False
    assert rep.exit_code == 1 and {"probe.requested-bound", "probe.tokens-vs-engine"} <= rules(rep)


def test_slo_miss_is_exit_1_and_min_goodput_relaxes_it():
    with FakeOpenAI(Behaviour(prefill_s=0.1)) as srv:
        rep = probe(srv, slo=parse_slo("ttft=50"))
        assert rep.exit_code == 1 and rep.to_dict()["goodput"]["good"] == 0 and "probe.slo" in rules(rep)
        rep = probe(srv, slo=parse_slo("ttft=50"), min_goodput=0.0)
        assert rep.exit_code == 0


def test_spec_counters_and_preemptions_vllm_and_sglang():
    with FakeOpenAI(Behaviour(spec=(1, 10), preempt_every=2)) as srv:   # 1 accepted per 10 drafts: 1.1
        rep = probe(srv, warmup=0)
    d = rep.to_dict()
    assert d["spec_acceptance"]["length"] == pytest.approx(1.1) and d["metrics"]["preemptions"] == 4
    assert {"probe.acceptance-low", "probe.preemptions"} <= rules(rep)
    assert "'synthetic'" in next(f["message"] for f in d["findings"] if f["rule"] == "probe.acceptance-low")
    with FakeOpenAI(Behaviour(metrics="sglang", spec=(15, 10))) as srv:
        rep = probe(srv, warmup=0)
    d = rep.to_dict()
    assert d["engine"] == "sglang" and d["spec_acceptance"]["length"] == pytest.approx(2.5)
    assert "probe.acceptance-low" not in rules(rep) and d["invariants"][-1]["counter"] == "sglang:generation_tokens_total"


def test_completions_api_and_a_gateway_without_health_or_metrics():
    with FakeOpenAI(Behaviour()) as srv:
        rep = run_probe(srv.url + "/v1/", ProbeConfig(requests=3, concurrency=3, output_len=5, warmup=0,
                                                      api="completions"),
                        paths=Paths(health=None, metrics=None))
        paths = {x.get("prompt") is not None for x in srv.bodies}
    d = rep.to_dict()
    assert rep.exit_code == 0 and d["output_tokens"] == 15 and d["engine"] is None and paths == {True}
    assert d["stages"][0]["detail"].startswith("skipped")


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:8000", "http://", "http://h:99999", "http://h/?q=1"])
def test_unusable_urls_are_input_errors(url):
    from gpustack_k3.errors import InputError
    with pytest.raises(InputError):
        base_url(url)
    assert base_url("http://h:8000/v1/") == "http://h:8000" and base_url("https://h/api/v1") == "https://h/api"
