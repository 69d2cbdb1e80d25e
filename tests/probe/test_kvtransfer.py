"""The KV-transfer verdict (gpustack_k3/probe/kvtransfer.py): each rule from expositions in the engines' real
series (tests/probe/fake_pd.py), the catalog checked on load, and `gpustack-k3 probe ROUTER --prefill --decode`
through a fake P/D deployment (exit 0 when KV moves, 1 when it does not, 2 on half a pair)."""
from __future__ import annotations

import copy
import json

import pytest
import yaml
from click.testing import CliRunner
from fake_pd import BLOCK, FakePD

from gpustack_k3.probe.catalog import MetricsCatalogError
from gpustack_k3.probe.kvtransfer import (
    DATA,
    Exposition,
    Scrape,
    Traffic,
    decide,
    load_kv_catalog,
    parse_catalog,
    parse_samples,
)


def run(pd: FakePD, prompts: list[int]) -> tuple[list[Scrape], Traffic]:
    """Scrape P and D, route the prompts, scrape again (no HTTP: the fakes' expositions directly)."""
    before = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    for n in prompts:
        pd.route(n)
    after = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    return ([Scrape(r, f"http://{r}", before[r], after[r]) for r in ("prefill", "decode")],
            Traffic(len(prompts), len(prompts), tuple(prompts)))


def verdict(mode: str, engine: str = "vllm", prompts=(300, 300, 451)):
    scrapes, traffic = run(FakePD(mode, engine), list(prompts))
    return decide(scrapes, traffic)


# -- the rules, one by one -----------------------------------------------------------------------------

def test_vllm_kv_moving_is_true_with_the_figures():
    v = verdict("moving")
    assert (v.status, v.reason, v.verdict) == ("True", "KVTransferred", "moving")
    s = v.evidence["signals"]
    # whole blocks arrive: (300-2)//128*128 = 256 twice, (451-2)//128*128 = 384
    assert s["arrived"]["delta"] == 256 + 256 + 384
    assert s["recomputed"]["delta"] == 44 + 44 + 67
    assert s["prefilled"]["delta"] == 1051
    assert v.evidence["block_size"] == BLOCK and v.evidence["recompute_allowance"] == 3 * (BLOCK + 1)
    assert "896 prompt token(s) arrived" in v.message


def test_vllm_decode_recomputing_every_prompt_is_false_naming_the_tokens():
    v = verdict("recompute")
    assert (v.status, v.reason) == ("False", "DecodeRecomputedPrompts")
    assert "decode computed 1051 prompt token(s) itself" in v.message and "prefill computed 1051" in v.message


def test_counted_transfer_failures_are_false_before_anything_else():
    v = verdict("failures")
    assert (v.status, v.reason) == ("False", "TransferFailures")
    assert "3 failed transfer(s)" in v.message and "http://decode +3" in v.message


def test_traffic_that_bypasses_prefill_is_false_and_says_prefill_computed_nothing():
    v = verdict("bypass")
    assert (v.status, v.reason) == ("False", "DecodeRecomputedPrompts")
    assert "prefill computed 0" in v.message


def test_partial_transfer_beyond_the_block_tail_is_false():
    pd = FakePD("moving")
    scrapes, traffic = run(pd, [300, 300])
    # a third request whose KV did not arrive: decode computed it all
    after = parse_samples(pd.exposition("decode").replace(
        'source="local_compute"} 88.0', 'source="local_compute"} 1088.0'))
    scrapes[1] = Scrape("decode", "http://decode", scrapes[1].before, after)
    v = decide(scrapes, traffic)
    assert (v.status, v.reason) == ("False", "DecodeRecomputedPrompts")
    assert "more than the 258" in v.message


def test_sglang_transfers_on_prefill_are_true_and_failures_false_and_none_false():
    assert (verdict("moving", "sglang").status, verdict("moving", "sglang").reason) == ("True", "KVTransferred")
    v = verdict("failures", "sglang")
    assert (v.status, v.reason) == ("False", "TransferFailures") and "http://prefill +3" in v.message
    v = verdict("recompute", "sglang")
    assert (v.status, v.reason) == ("False", "NoTransfers")


def test_sglang_fewer_transfers_than_answers_cannot_tell():
    scrapes, _ = run(FakePD("moving", "sglang"), [300, 300])
    v = decide(scrapes, Traffic(3, 3, (300, 300, 300)))
    assert (v.status, v.reason) == ("Unknown", "TransfersBelowTraffic")


@pytest.mark.parametrize("traffic,reason", [(Traffic(4, 0), "NoTraffic")])
def test_no_answered_traffic_cannot_tell(traffic, reason):
    scrapes, _ = run(FakePD("moving"), [300])
    assert decide(scrapes, traffic).reason == reason


def test_a_missing_scrape_or_role_cannot_tell_and_names_it():
    scrapes, traffic = run(FakePD("moving"), [300])
    v = decide([scrapes[0], Scrape("decode", "http://d", None, None, "GET http://d/metrics answered 404")], traffic)
    assert (v.status, v.reason) == ("Unknown", "NoMetrics") and "answered 404" in v.message
    v = decide(scrapes[:1], traffic)
    assert v.reason == "NoMetrics" and "no decode URL" in v.message


def test_a_gateway_or_mixed_engines_cannot_tell():
    scrapes, traffic = run(FakePD("moving"), [300])
    gw = parse_samples("# TYPE router_requests_total counter\nrouter_requests_total 3.0\n")
    v = decide([scrapes[0], Scrape("decode", "http://gw", gw, gw)], traffic)
    assert (v.status, v.reason) == ("Unknown", "EngineUnknown") and "http://gw" in v.message
    sg, _ = run(FakePD("moving", "sglang"), [300])
    v = decide([scrapes[0], sg[1]], traffic)
    assert v.reason == "EngineUnknown" and "different engines" in v.message


def test_a_counter_that_went_backwards_is_a_restart():
    pd = FakePD("moving")
    scrapes, traffic = run(pd, [300])
    restarted = Scrape("decode", "http://decode", scrapes[1].after, parse_samples(FakePD("moving").exposition("decode")))
    v = decide([scrapes[0], restarted], traffic)
    assert (v.status, v.reason) == ("Unknown", "CountersReset") and "external_kv_transfer" in v.message


def test_a_release_without_the_series_cannot_tell():
    old = parse_samples("# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 5.0\n")
    scrapes, traffic = run(FakePD("moving"), [300])
    v = decide([scrapes[0], Scrape("decode", "http://old", old, old)], traffic)
    assert (v.status, v.reason) == ("Unknown", "NoTransferMetric")
    assert "vllm:prompt_tokens_by_source_total" in v.message


def test_prompts_shorter_than_two_blocks_cannot_tell():
    scrapes, traffic = run(FakePD("moving"), [100, 129])
    v = decide(scrapes, traffic)
    assert (v.status, v.reason) == ("Unknown", "PromptsTooShort") and "at least 130" in v.message


def test_decode_served_from_its_own_cache_or_not_reached_cannot_tell():
    pd = FakePD("moving")
    before = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    pd.c.d_hits += 600
    pd.c.p_compute += 600
    after = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    scrapes = [Scrape(r, r, before[r], after[r]) for r in ("prefill", "decode")]
    assert decide(scrapes, Traffic(2, 2, (300, 300))).reason == "DecodeCacheServed"
    pd.c.d_hits -= 600
    after = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    scrapes = [Scrape(r, r, before[r], after[r]) for r in ("prefill", "decode")]
    assert decide(scrapes, Traffic(2, 2, (300, 300))).reason == "NoDecodeTraffic"


def test_kv_that_arrived_while_prefill_computed_nothing_cannot_tell():
    pd = FakePD("moving")
    before = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    pd.c.d_external += 256
    pd.c.d_compute += 44
    after = {r: parse_samples(pd.exposition(r)) for r in ("prefill", "decode")}
    v = decide([Scrape(r, r, before[r], after[r]) for r in ("prefill", "decode")], Traffic(1, 1, (300,)))
    assert (v.status, v.reason) == ("Unknown", "PrefillIdle")


def test_several_decodes_are_summed_and_listed_per_url():
    a, _ = run(FakePD("moving"), [300])
    b, _ = run(FakePD("moving"), [300])
    v = decide([a[0], a[1], Scrape("decode", "http://decode2", b[1].before, b[1].after)], Traffic(2, 2, (300, 300)))
    assert v.status == "True"
    assert v.evidence["signals"]["arrived"]["per_url"] == {"http://decode": 256, "http://decode2": 256}


# -- the exposition reader -----------------------------------------------------------------------------

def test_exposition_keeps_labels_declared_names_and_skips_bad_lines():
    e = parse_samples('# TYPE a_total counter\na_total{x="1"} 2\nnot a line\nh_count 3\n# TYPE h histogram\nb NaN\n')
    assert isinstance(e, Exposition)
    assert e.has("a_total") and e.has("h_count") and e.has("h_sum") and not e.has("zz_total")
    assert [n for n, _, _ in e.samples] == ["a_total", "h_count"]


# -- the catalog ---------------------------------------------------------------------------------------

def test_the_shipped_catalog_loads_and_cites_every_signal():
    cat = load_kv_catalog()
    assert set(cat.engines) == {"vllm", "sglang"}
    for ev in cat.engines.values():
        assert "arrived" in ev.signals and all("@" in s.source for s in ev.signals.values())


PREFIXES = {"vllm": "vllm:", "sglang": "sglang:"}


@pytest.mark.parametrize("edit,needle", [
    (lambda d: d["engines"]["vllm"]["signals"]["arrived"].update(side="middle"), "signals.arrived.side"),
    (lambda d: d["engines"]["vllm"]["signals"]["arrived"]["series"][0].update(name="sglang:x"), "engine prefix"),
    (lambda d: d["engines"]["vllm"]["signals"].pop("arrived"), "needs 'arrived'"),
    (lambda d: d["engines"]["vllm"].pop("block_size"), "tail: block needs the block size"),
    (lambda d: d["engines"]["vllm"]["signals"].update(bogus=d["engines"]["vllm"]["signals"]["failures"]),
     "unknown signal"),
    (lambda d: d["reasons"].pop("PrefillIdle"), "missing PrefillIdle"),
    (lambda d: d["reasons"]["KVTransferred"].update(status="Maybe"), "reasons.KVTransferred.status"),
    (lambda d: d["engines"].update(trt=d["engines"]["vllm"]), "engines.trt"),
])
def test_a_bad_catalog_edit_names_the_field(edit, needle):
    doc = copy.deepcopy(yaml.safe_load(DATA.read_text()))
    edit(doc)
    with pytest.raises(MetricsCatalogError, match=needle.replace("(", r"\(")):
        parse_catalog(doc, PREFIXES)


# -- `gpustack-k3 probe ROUTER --prefill P --decode D` ---------------------------------------------------

SMALL = ["--requests", "3", "--concurrency", "2", "--input-len", "300", "--output-len", "4", "--warmup", "0"]


def cli(*args):
    from gpustack_k3.cli.main import cli as group
    return CliRunner().invoke(group, list(args))


def test_probe_through_a_pd_router_where_kv_moves_is_exit_0_with_the_verdict():
    with FakePD("moving") as pd:
        r = cli("probe", pd.router.url, "--prefill", pd.prefill.url, "--decode", pd.decode.url, *SMALL, "-o", "json")
    assert r.exit_code == 0, r.output
    kv = json.loads(r.stdout)["kv_transfer"]
    assert (kv["status"], kv["reason"], kv["engine"]) == ("True", "KVTransferred", "vllm")
    assert kv["evidence"]["answered"] == 3 and kv["evidence"]["signals"]["arrived"]["delta"] > 0


@pytest.mark.parametrize("mode,reason", [("recompute", "DecodeRecomputedPrompts"), ("failures", "TransferFailures")])
def test_probe_through_a_pd_router_where_kv_does_not_move_is_exit_1(mode, reason):
    with FakePD(mode) as pd:
        r = cli("probe", pd.router.url, "--prefill", pd.prefill.url, "--decode", pd.decode.url, *SMALL)
    assert r.exit_code == 1, r.output
    assert f"KVTransfer=False (not-moving, {reason})" in r.stdout
    assert "ERROR [probe.kv-not-moving]" in r.stdout


def test_probe_with_half_a_pair_is_exit_2_naming_the_missing_option():
    r = cli("probe", "http://127.0.0.1:9", "--prefill", "http://127.0.0.1:9", *SMALL)
    assert r.exit_code == 2 and "--decode" in r.output


def test_probe_without_prefill_and_decode_has_no_verdict():
    with FakePD("recompute") as pd:
        r = cli("probe", pd.router.url, *SMALL, "-o", "json")
    assert r.exit_code == 0, r.output
    assert "kv_transfer" not in json.loads(r.stdout)


# -- the traffic as the engines counted it (the operator's interval check) ---------------------------------

def test_engine_traffic_reads_the_decodes_finished_requests():
    from gpustack_k3.probe.kvtransfer import engine_traffic

    lab = 'engine="0",finished_reason="length",model_name="smollm2"'
    def expo(n: int) -> Exposition:
        return parse_samples(f"# TYPE vllm:request_success_total counter\nvllm:request_success_total{{{lab}}} {n}.0\n")
    scrapes = [Scrape("prefill", "p", expo(0), expo(5)), Scrape("decode", "d", expo(2), expo(9))]
    assert engine_traffic(scrapes) == Traffic(requests=7, ok=7)
    assert engine_traffic([Scrape("decode", "d", expo(9), expo(2))]) is None                 # a restart
    assert engine_traffic([Scrape("decode", "d", None, None, "down")]) is None
    gw = parse_samples("router_requests_total 3.0\n")
    assert engine_traffic([Scrape("decode", "gw", gw, gw)]) is None


def test_a_missing_scrape_is_named_before_missing_traffic():
    """The operator's interval check counts the traffic from the scrapes: when one is missing, that is the reason."""
    scrapes, _ = run(FakePD("moving"), [300])
    v = decide([scrapes[0], Scrape("decode", "http://d", None, None, "ConnectError")], Traffic(0, 0))
    assert (v.status, v.reason) == ("Unknown", "NoMetrics")
