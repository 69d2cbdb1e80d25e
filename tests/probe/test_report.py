"""The report from hand-made traces (known times and tokens): goodput, the three invariants failing when
they should, engine counters, the catalogs' validation."""
from __future__ import annotations

import copy

import pytest
import yaml

from gpustack_k3.probe.catalog import (
    DATA,
    FINDINGS_DATA,
    MetricsCatalogError,
    load_findings,
    load_metrics_catalog,
    parse_catalog,
    parse_findings,
)
from gpustack_k3.probe.core import ProbeConfig, parse_slo
from gpustack_k3.probe.metrics import MetricsTrace, detect_engine, parse_exposition
from gpustack_k3.probe.report import Collected, Stage, summarize
from gpustack_k3.probe.stream import RequestTrace


def trace(i, start, ttft, tpot, tokens, *, usage=True, reasoning_s=0.0, per_chunk=1):
    """A request whose first delta came ttft after start and then one chunk (of per_chunk tokens) every
    tpot*per_chunk; with reasoning_s the content started that much later."""
    t = RequestTrace(i)
    t.start = start
    chunks = tokens // per_chunk
    t.delta_times = [start + ttft + k * tpot * per_chunk for k in range(chunks)]
    t.first_any = t.delta_times[0]
    t.last_delta = t.delta_times[-1]
    t.first_content = t.first_any + reasoning_s
    t.reasoning_chars = 10 if reasoning_s else 0
    t.completion_tokens = tokens if usage else None
    t.prompt_tokens = 100
    t.done = True
    return t


def collected(traces, wall, **kw):
    return Collected(endpoint="http://x", engine=kw.pop("engine", None), model="m",
                     stages=[Stage("health", True, 1.0, "ok")], run=traces, wall_s=wall, **kw)


def rules(rep):
    return {f.rule for f in rep.findings}


def test_goodput_counts_a_request_only_if_it_meets_every_slo():
    # 4 requests: TTFT 100/200/300/400 ms, TPOT 10 ms, 11 tokens -> e2e = TTFT + 100 ms
    run = [trace(i, 0.0, 0.1 * (i + 1), 0.01, 11) for i in range(4)]
    cfg = ProbeConfig(requests=4, concurrency=4, output_len=11, slo=parse_slo("ttft=250,e2el=320"), min_goodput=0.5)
    rep = summarize(cfg, collected(run, 0.6))
    g = rep.data["goodput"]
    assert (g["good"], g["ratio"], g["misses"]) == (2, 0.5, {"ttft": 2, "e2el": 2})  # request 2: e2e 400 > 320
    assert rep.exit_code == 0
    rep = summarize(cfg.with_(min_goodput=0.75), collected(run, 0.6))
    assert rep.exit_code == 1 and "probe.slo" in rules(rep)
    assert rep.data["ttft_ms"]["p50"] == pytest.approx(250.0) and rep.data["tpot_ms"]["p50"] == pytest.approx(10.0)
    assert rep.data["output_tokens"] == 44 and rep.data["output_tokens_per_s"] == pytest.approx(44 / 0.6, abs=1e-3)


def test_failed_requests_are_errors_and_never_good():
    bad = RequestTrace(1)
    bad.start = 0.0
    bad.fail("HTTP 500: boom")
    run = [trace(0, 0.0, 0.1, 0.01, 11), bad]
    rep = summarize(ProbeConfig(requests=2, output_len=11, slo=parse_slo("ttft=1000")), collected(run, 0.3))
    assert rep.data["errors"] == 1 and rep.data["error_rate"] == 0.5 and rep.data["goodput"]["good"] == 1
    assert {"probe.errors", "probe.slo"} <= rules(rep) and rep.exit_code == 1
    assert rep.data["error_examples"] == ["request 1: HTTP 500: boom"]


def test_requested_bound_fails_when_usage_claims_more_than_max_tokens():
    run = [trace(i, 0.0, 0.1, 0.01, 11) for i in range(3)]
    for t in run:
        t.completion_tokens = 110          # 10x what max_tokens allows: seed 000's overstated figure
    rep = summarize(ProbeConfig(requests=3, output_len=11), collected(run, 0.3))
    inv = {i["name"]: i for i in rep.data["invariants"]}
    assert not inv["requested_bound"]["ok"] and inv["requested_bound"]["bound_tokens_per_s"] == pytest.approx(110.0)
    assert "probe.requested-bound" in rules(rep) and rep.exit_code == 1


def test_throughput_bound_fails_when_more_streams_decoded_than_the_plan_allows():
    # 4 requests decoding side by side for 1 s each at 10 ms/token: 400 tokens/s over 1.1 s
    run = [trace(i, 0.0, 0.1, 0.01, 101) for i in range(4)]
    cfg = ProbeConfig(requests=4, concurrency=4, output_len=101)
    ok = summarize(cfg, collected(run, 1.1))
    inv = {i["name"]: i for i in ok.data["invariants"]}
    assert inv["throughput_bound"]["ok"] and inv["throughput_bound"]["concurrency"] == 4
    planned = summarize(cfg.with_(planned_concurrency=1), collected(run, 1.1))   # the spec says 1 at a time
    inv = {i["name"]: i for i in planned.data["invariants"]}
    assert not inv["throughput_bound"]["ok"] and inv["throughput_bound"]["concurrency"] == 1
    assert inv["throughput_bound"]["bound_tokens_per_s"] == pytest.approx(4 / 1.1 + 100.0, abs=1e-3)
    assert planned.exit_code == 1 and "probe.throughput-bound" in rules(planned)


def _metrics(before, after, peaks=None):
    mt = MetricsTrace(before=before, after=after)
    for p in peaks or []:
        mt.sample(p)
    return mt


def test_engine_counters_diffed_over_the_run_and_the_token_cross_check():
    run = [trace(i, 0.0, 0.1, 0.01, 11) for i in range(2)]
    mt = _metrics({"vllm:generation_tokens_total": 100.0, "vllm:num_preemptions_total": 1.0,
                   "vllm:kv_cache_usage_perc": 0.0, "vllm:spec_decode_num_accepted_tokens_total": 10.0,
                   "vllm:spec_decode_num_drafts_total": 10.0},
                  {"vllm:generation_tokens_total": 122.0, "vllm:num_preemptions_total": 3.0,
                   "vllm:kv_cache_usage_perc": 0.1, "vllm:spec_decode_num_accepted_tokens_total": 12.0,
                   "vllm:spec_decode_num_drafts_total": 30.0},
                  [{"vllm:kv_cache_usage_perc": 0.45}])
    cfg = ProbeConfig(requests=2, output_len=11, dataset="random-200k")
    rep = summarize(cfg, collected(run, 0.3, engine="vllm", metrics=mt, ignore_eos=True))
    m = rep.data["metrics"]
    assert m["preemptions"] == 2 and m["generation_tokens"] == 22 and m["kv_usage"] == {"before": 0.0, "after": 0.1,
                                                                                        "peak": 0.45}
    acc = rep.data["spec_acceptance"]
    assert acc["length"] == pytest.approx(1.1) and acc["drafts"] == 20 and acc["dataset"] == "random-200k"
    low = next(f for f in rep.findings if f.rule == "probe.acceptance-low")
    assert "'random-200k'" in low.message and low.severity == "warning"
    assert "probe.preemptions" in rules(rep)
    assert {i["name"]: i["ok"] for i in rep.data["invariants"]}["tokens_vs_engine"]
    mt.after["vllm:generation_tokens_total"] = 110.0          # the engine generated 10, the client counted 22
    rep = summarize(cfg, collected(run, 0.3, engine="vllm", metrics=mt, ignore_eos=True))
    assert "probe.tokens-vs-engine" in rules(rep) and rep.exit_code == 1


def test_sglang_acceptance_is_its_gauge_and_a_counter_reset_is_no_figure():
    run = [trace(0, 0.0, 0.1, 0.01, 11)]
    mt = _metrics({"sglang:num_retracted_requests_total": 5.0},
                  {"sglang:spec_accept_length": 2.4, "sglang:num_retracted_requests_total": 1.0,
                   "sglang:generation_tokens_total": 50.0})
    rep = summarize(ProbeConfig(requests=1, output_len=11), collected(run, 0.2, engine="sglang", metrics=mt))
    assert rep.data["spec_acceptance"]["length"] == 2.4 and "gauge" in rep.data["spec_acceptance"]["how"]
    assert rep.data["metrics"]["preemptions"] is None        # the counter went backwards: engine restarted
    assert "probe.acceptance-low" not in rules(rep)


def test_reasoning_first_multi_token_chunks_missing_usage_and_short_answers():
    run = [trace(i, 0.0, 0.1, 0.01, 12, reasoning_s=0.05, per_chunk=3) for i in range(2)]
    run.append(trace(2, 0.0, 0.1, 0.01, 6, usage=False))
    rep = summarize(ProbeConfig(requests=3, output_len=12), collected(run, 0.3))
    r = rules(rep)
    assert {"probe.reasoning-first", "probe.multi-token-chunks", "probe.usage-missing", "probe.output-length",
            "probe.percentiles"} <= r
    assert rep.data["tokens_per_chunk"] == 3.0 and rep.data["ttft_content_ms"]["p50"] == pytest.approx(150.0)
    short = next(f for f in rep.findings if f.rule == "probe.output-length")
    assert "ignore_eos was not sent" in short.message
    assert rep.exit_code == 0                                 # warnings and info only


def test_unusable_endpoint_is_exit_2_with_the_stages():
    col = Collected(endpoint="http://x", stages=[Stage("health", False, 3.0, "answered 503")],
                    unusable="stage health: answered 503")
    rep = summarize(ProbeConfig(), col)
    assert rep.exit_code == 2 and rep.to_dict()["usable"] is False and rep.to_dict()["stages"][0]["ok"] is False


def test_no_metrics_is_said_once():
    rep = summarize(ProbeConfig(requests=1, output_len=11),
                    collected([trace(0, 0.0, 0.1, 0.01, 11)], 0.2, metrics_note="answered 404"))
    f = next(f for f in rep.findings if f.rule == "probe.no-metrics")
    assert "/metrics answered 404" in f.message and rep.data["metrics"] is None


# ------------------------------------------------------------------ exposition and catalogs
def test_exposition_sums_series_and_survives_odd_lines():
    text = ('# HELP x\nvllm:a_total{model_name="x y",engine="0"} 2.0\nvllm:a_total{model_name="z}"} 3\n'
            'vllm:b NaN\nvllm:c +Inf\ngarbage line here\nvllm:d{unterminated="\n\nsglang:e 1e3 1700000000\n')
    v = parse_exposition(text)
    assert v == {"vllm:a_total": 5.0, "vllm:c": float("inf"), "sglang:e": 1000.0}
    cat = load_metrics_catalog()
    assert detect_engine({"vllm:a_total": 1, "vllm:b": 1, "sglang:e": 1}, cat) == "vllm"
    assert detect_engine({"process_cpu_seconds_total": 1}, cat) is None


def test_catalog_files_are_valid_and_every_rule_cites_a_source():
    cat = load_metrics_catalog()
    assert set(cat.engines) == {"vllm", "sglang"} and cat.acceptance_flag_below == 1.3
    assert all("@" in m.source or "sglang" in m.source for e in cat.engines.values() for m in e.metrics.values())
    texts = load_findings()
    assert all(t.source and t.fix for t in texts.values())


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d["engines"]["vllm"]["metrics"].update(typo={"name": "vllm:x_total", "kind": "counter",
                                                             "source": "somewhere.py:1@0.1"}), "unknown role"),
    (lambda d: d["engines"]["vllm"]["metrics"]["preemptions"].update(name="sglang:x_total"), "engine prefix"),
    (lambda d: d["engines"]["vllm"]["metrics"]["preemptions"].update(name="vllm:num_preemptions"), "_total"),
    (lambda d: d["engines"]["vllm"]["metrics"].pop("spec_drafts"), "needs the roles"),
    (lambda d: d.update(acceptance_flag_below=1), "above 1"),
])
def test_metrics_catalog_refuses_bad_entries_naming_the_field(edit, needle):
    data = copy.deepcopy(yaml.safe_load(DATA.read_text()))
    edit(data)
    with pytest.raises(MetricsCatalogError, match=needle):
        parse_catalog(data)


def test_findings_catalog_refuses_bad_entries():
    data = yaml.safe_load(FINDINGS_DATA.read_text())
    data["findings"]["probe.errors"]["severity"] = "fatal"
    with pytest.raises(MetricsCatalogError, match="severity"):
        parse_findings(data)
    data = yaml.safe_load(FINDINGS_DATA.read_text())
    data["findings"]["errors"] = data["findings"].pop("probe.errors")
    with pytest.raises(MetricsCatalogError, match="probe."):
        parse_findings(data)
