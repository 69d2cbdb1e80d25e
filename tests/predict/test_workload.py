"""Length distributions of a workload: parsing, the seeded per-request sample, percentiles (by hand)."""
from __future__ import annotations

import random

import pytest

from gpustack_k3.predict.model import Predictor, dist
from gpustack_k3.predict.types import LengthDist, PredictError, Workload

from .doubles import FakeEstimator, cfg


def test_parse_pairs_and_observed_lengths():
    d = LengthDist.parse("65536:1, 1024:3", "--input-len-dist")
    assert d.points == ((1024, 3.0), (65536, 1.0))
    assert d.mean == pytest.approx((1024 * 3 + 65536) / 4)          # 17152
    assert (d.percentile(0.5), d.percentile(0.75), d.percentile(0.9), d.max) == (1024, 1024, 65536, 65536)
    # observed lengths, a bare length weighs 1 and repeats add up (a file's newlines are separators too)
    o = LengthDist.parse("812\n1024 4000,1024", "--output-len-dist")
    assert o.points == ((812, 1.0), (1024, 2.0), (4000, 1.0)) and o.percentile(0.5) == 1024


@pytest.mark.parametrize("text,part", [("", "no lengths"), ("1024:x", "item 1 '1024:x'"), ("5,0", "item 2 '0'"),
                                       ("100:-1", "positive number"), ("100:nan", "positive number"),
                                       ("1.5k", "not LEN")])
def test_bad_distribution_names_the_option(text, part):
    with pytest.raises(PredictError) as e:
        LengthDist.parse(text, "--input-len-dist")
    assert e.value.where == "--input-len-dist" and part in e.value.message and "LEN:WEIGHT" in e.value.hint


def test_sample_gives_each_length_its_exact_share_in_a_seeded_order():
    d = LengthDist.parse("100:1,200:1,300:1", "x")
    # 10 requests: 3.33 each -> 3/3/3 and the one left over to the shortest (ties by length)
    s = d.sample(10, random.Random(0))
    assert sorted(s) == [100] * 4 + [200] * 3 + [300] * 3
    assert d.sample(10, random.Random(0)) == s and d.sample(10, random.Random(1)) != s
    # 3:1 of 8 requests is 6 and 2 exactly
    assert sorted(LengthDist.parse("1000:3,4000:1", "x").sample(8, random.Random(5))) == [1000] * 6 + [4000] * 2


def test_workload_lengths_and_defaults():
    fixed = Workload(4096, 100, 3)
    assert fixed.request_lengths() == [(4096, 100)] * 3 and not fixed.varies and fixed.total_requests == 3
    w = Workload(LengthDist.parse("1000:3,4000:1", "x"), 100, 2, seed=7)
    assert w.varies and w.total_requests == 64 and w.input_len == 1750       # mean of 1000 x 3/4 + 4000 x 1/4
    lens = w.request_lengths()
    assert sorted(i for i, _ in lens) == [1000] * 48 + [4000] * 16 and {o for _, o in lens} == {100}
    assert w.request_lengths() == lens and Workload(w.input, 100, 2, seed=8).request_lengths() != lens
    d = w.to_dict()
    assert d["input_len_dist"]["p90"] == 4000 and d["seed"] == 7 and d["requests"] == 64 and "input_len_dist" \
        not in fixed.to_dict()


def test_percentiles_as_the_probe_measures_them():
    # linear interpolation between closest ranks (probe.core.percentile, numpy's default, vllm bench serve's)
    xs = [float(x) for x in range(10, 0, -1)]       # 10..1
    assert dist(xs) == {"mean": 5.5, "p50": 5.5, "p90": 9.1}
    assert dist([3.0, 1.0, 2.0]) == {"mean": 2.0, "p50": 2.0, "p90": 2.8}
    assert dist([4.0, 4.0, 4.0, 0.0]) == {"mean": 3.0, "p50": 4.0, "p90": 4.0}
    assert dist([]) == {}


def test_benchmark_runs_each_request_at_its_lengths():
    # two lengths, one client: 6 short and 2 long prompts; p50 (rank 3.5) is a short one's TTFT, p90 (rank 6.3) a
    # long one's
    est = FakeEstimator()
    w = Workload(LengthDist.parse("1000:3,30000:1", "x"), LengthDist.parse("10:1,50:1", "x"), 1, requests=8, seed=3,
                 acceptance_length=1.0)
    r = Predictor(est).predict_role(cfg(drafts=0, budget=8192), w)
    b = r["benchmark"]
    lens = w.request_lengths()
    assert b["requests"] == 8 and b["sample"]["input_len"] == dist([float(i) for i, _ in lens])
    assert b["output_tok_s"] == pytest.approx(sum(o for _, o in lens) / b["e2e_s"], rel=1e-2)
    assert b["ttft_ms"]["p50"] < b["ttft_ms"]["p90"]
    assert "length-dist" in r["assumptions"]
    # the same requests one length at a time: each fixed run's TTFT is one of the mixed run's
    short = Predictor(est).predict_role(cfg(drafts=0, budget=8192), Workload(1000, 10, 1, acceptance_length=1.0))
    long_ = Predictor(est).predict_role(cfg(drafts=0, budget=8192), Workload(30000, 10, 1, acceptance_length=1.0))
    assert b["ttft_ms"]["p50"] == pytest.approx(short["benchmark"]["ttft_ms"]["mean"], rel=1e-3)
    assert b["ttft_ms"]["p90"] == pytest.approx(long_["benchmark"]["ttft_ms"]["mean"], rel=1e-3)


def test_plan_vs_actual_compares_the_percentiles_too():
    from gpustack_k3.predict.actual import drift

    role = {"benchmark": {"ttft_ms": {"mean": 1000.0, "p50": 800.0, "p90": 2000.0},
                          "tpot_ms": {"mean": 20.0, "p50": 20.0, "p90": 25.0}, "e2e_s": 10.0}, "decode": {"itl_ms": 40.0}}
    report = {"ttft_ms": {"mean": 1100.0, "p50": 1000.0, "p90": 1500.0, "p99": 1900.0},
              "tpot_ms": {"mean": 21.0, "p50": 19.0}, "wall_s": 9.0}
    rows = {r["figure"]: r["drift_pct"] for r in drift(role, report)}
    # (measured / predicted - 1) x 100; a figure the report lacks (tpot p90, itl) is left out
    assert rows == {"ttft_mean_ms": 10.0, "ttft_p50_ms": 25.0, "ttft_p90_ms": -25.0, "tpot_mean_ms": 5.0,
                    "tpot_p50_ms": -5.0, "wall_s": -10.0}
