"""The probe's pure core: options, request plan, percentiles (checked against the standard library's
independent implementation), SSE decoding in any chunking, per-request timings by the TTFT definition."""
from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_k3.errors import InputError
from gpustack_k3.probe.core import (
    ProbeConfig,
    Slo,
    distribution,
    filler_words,
    min_samples,
    parse_slo,
    payload,
    percentile,
    plan_requests,
)
from gpustack_k3.probe.stream import RequestTrace, SSEDecoder, StreamError


# ------------------------------------------------------------------ options
def test_slo_parses_any_subset():
    assert parse_slo("ttft=2000,tpot=50,e2el=30000") == Slo(2000, 50, 30000)
    assert parse_slo(" TPOT = 12.5 ") == Slo(tpot=12.5)
    assert not parse_slo(None) and not parse_slo("")


@pytest.mark.parametrize("text, needle", [("ttft", "not KEY=MILLISECONDS"), ("latency=3", "not KEY=MILLISECONDS"),
                                          ("ttft=fast", "not a number"), ("ttft=-1", "positive"),
                                          ("ttft=nan", "positive"), ("ttft=1,ttft=2", "given twice")])
def test_bad_slo_names_the_option_and_the_part(text, needle):
    with pytest.raises(InputError) as ei:
        parse_slo(text)
    assert ei.value.where == "--slo" and needle in ei.value.message


@pytest.mark.parametrize("kw, opt", [({"requests": 0}, "--requests"), ({"concurrency": 0}, "--concurrency"),
                                     ({"input_len": 0}, "--input-len"), ({"output_len": 10**9}, "--output-len"),
                                     ({"warmup": -1}, "--warmup"), ({"min_goodput": 1.5}, "--min-goodput"),
                                     ({"request_timeout_s": 0}, "--timeout"), ({"prompts": ()}, "--prompts"),
                                     ({"metrics_interval_s": -1}, "--metrics-interval")])
def test_config_bounds_name_the_option(kw, opt):
    with pytest.raises(InputError) as ei:
        ProbeConfig(**kw).check()
    assert ei.value.where == opt


# ------------------------------------------------------------------ request plan
def test_every_request_starts_with_its_own_prefix_unless_shared():
    cfg = ProbeConfig(requests=50)
    run = plan_requests(cfg, "ab12cd34", 30, "run", 50)
    warm = plan_requests(cfg, "ab12cd34", 30, "warmup", 3)
    firsts = {" ".join(p.prompt.split()[:4]) for p in run + warm}
    assert len(firsts) == 53                                   # no two prompts share their first words
    assert all(len(p.prompt.split()) == 4 + 30 for p in run)   # "probe <id> run <i>:" + 30 filler words
    assert plan_requests(cfg, "ab12cd34", 30, "run", 50) == run    # deterministic (no per-process hash seed)
    shared = plan_requests(cfg.with_(shared_prefix=True), "ab12cd34", 30, "run", 5)
    assert len({p.prompt for p in shared}) == 1
    data = plan_requests(cfg.with_(prompts=("a", "b")), "x", 0, "run", 5)
    assert [p.prompt for p in data] == ["a", "b", "a", "b", "a"]


@pytest.mark.parametrize("input_len, short, long, words", [
    (256, 11, 75, 245),        # 1 token/word, 11-token template: 245 words + 11 = 256
    (257, 11, 139, 123),       # 2 tokens/word: (257-11)/2 = 123
    (5, 11, 75, 0),            # asked for less than the template alone: no filler
    (100, 11, 11, 89),         # words cost nothing measurable: fall back to one token per word
])
def test_filler_words_from_two_measured_prompts(input_len, short, long, words):
    assert filler_words(input_len, short, long, 64) == words


def test_payload_fixes_lengths_and_asks_for_usage():
    cfg = ProbeConfig()
    b = payload(cfg, "m", "hi", max_tokens=64, stream=True, ignore_eos=True)
    assert b == {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}],
                 "stream_options": {"include_usage": True}, "ignore_eos": True}
    b = payload(cfg.with_(api="completions"), "m", "hi", max_tokens=1, stream=False, ignore_eos=False)
    assert b == {"model": "m", "max_tokens": 1, "stream": False, "prompt": "hi"}


# ------------------------------------------------------------------ statistics
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=2, max_size=300))
@settings(max_examples=200, deadline=None)
def test_percentiles_match_the_standard_librarys_inclusive_method(vals):
    cuts = statistics.quantiles(vals, n=100, method="inclusive")   # = numpy's default linear interpolation
    s = sorted(vals)
    for p in (50, 90, 99):
        assert percentile(s, p) == pytest.approx(cuts[p - 1], rel=1e-9, abs=1e-9)


def test_percentiles_the_sample_count_cannot_support_are_labelled():
    assert (min_samples(50), min_samples(90), min_samples(99)) == (2, 10, 100)
    d = distribution([i / 1000 for i in range(1, 11)])        # 10 samples, 1..10 ms
    assert d["n"] == 10 and d["max"] == 10.0 and d["p50"] == 5.5 and d["unsupported"] == ["p99"]
    assert d["p99"] == pytest.approx(9.91)
    assert "unsupported" not in distribution([0.001] * 100)
    assert distribution([]) == {"p50": None, "p90": None, "p99": None, "max": None, "mean": None, "n": 0}
    assert distribution([0.2])["unsupported"] == ["p50", "p90", "p99"]


# ------------------------------------------------------------------ SSE decoding
STREAM = (b': ping\r\n\r\ndata: {"a": 1}\r\n\r\ndata: {"b":\ndata: 2}\n\nevent: x\ndata: [DONE]\n\n'
          + 'data: "caf\u00e9"\r\r'.encode())


def _events(parts):
    d = SSEDecoder()
    out = [e for p in parts for e in d.feed(p)]
    return out + d.close()


def test_sse_events_comments_multiline_and_line_endings():
    assert _events([STREAM]) == ['{"a": 1}', '{"b":\n2}', "[DONE]", '"caf\u00e9"']


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_sse_any_chunking_gives_the_same_events(cuts):
    cuts = sorted(set(cuts))
    parts = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)])]
    assert _events(parts) == _events([STREAM])


def test_sse_last_event_without_blank_line_and_oversized_event():
    assert _events([b"data: [DONE]"]) == ["[DONE]"]
    d = SSEDecoder()
    with pytest.raises(StreamError):
        d.feed(b"data: " + b"x" * (16 << 20))


# ------------------------------------------------------------------ one request's timings
def chat(delta, usage=None, finish=None):
    import json
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})


def test_ttft_is_the_first_delta_of_any_kind_not_the_role_chunk():
    t = RequestTrace(0)
    t.start = 10.0
    t.on_event(chat({"role": "assistant", "content": ""}), 10.5)     # no token: does not count
    t.on_event(chat({"reasoning": "let me think"}), 11.0)            # the first token: TTFT
    t.on_event(chat({"reasoning_content": " more"}), 11.5)
    t.on_event(chat({"content": "Paris"}), 12.0)                     # TTFT to content
    t.on_event(chat({"content": "."}, finish="length"), 12.5)
    t.on_event(chat({}, usage={"prompt_tokens": 9, "completion_tokens": 5}), 12.6)   # usage: no delta
    t.on_event("[DONE]", 12.7)
    t.end_of_stream()
    assert t.ok and t.ttft_s == 1.0 and t.ttft_content_s == 2.0 and t.e2el_s == 2.5
    assert t.tokens == 5 and t.tpot_s == pytest.approx(1.5 / 4) and t.itl_s == [0.5, 0.5, 0.5]
    assert (t.prompt_tokens, t.reasoning_chars) == (9, 17)


def test_tool_calls_count_and_completions_text():
    t = RequestTrace(0)
    t.start = 0.0
    t.on_event(chat({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}), 0.3)
    assert t.first_any == 0.3 and t.first_content is None
    c = RequestTrace(1, api="completions")
    c.start = 0.0
    c.on_event('{"choices": [{"index": 0, "text": ""}]}', 0.1)
    c.on_event('{"choices": [{"index": 0, "text": "Hi"}]}', 0.2)
    c.on_event("[DONE]", 0.3)
    c.end_of_stream()
    assert c.ttft_s == 0.2 and c.tokens == 1 and c.usage_missing and c.tpot_s is None


@pytest.mark.parametrize("events, needle", [
    (['{"choices": [ {"delta": '], "not JSON"),
    (["[1, 2]"], "not a JSON object"),
    (['{"object": "error", "message": "boom"}'], "error in stream: boom"),
    (['{"error": {"message": "engine dead"}}'], "engine dead"),
    ([chat({"content": "a"})], "without [DONE]"),
    ([chat({"role": "assistant", "content": ""}), "[DONE]"], "no chunk carried a delta"),
])
def test_broken_streams_fail_the_request_with_a_reason(events, needle):
    t = RequestTrace(0)
    t.start = 0.0
    for i, e in enumerate(events):
        t.on_event(e, 0.1 * (i + 1))
    t.end_of_stream()
    assert not t.ok and needle in t.error
    assert t.ttft_s is None and t.tpot_s is None
