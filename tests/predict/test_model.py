"""The per-role orchestration on the stand-in estimator (no aiconfigurator-core needed)."""
from __future__ import annotations

import pytest

from gpustack_k3.predict.model import Predictor
from gpustack_k3.predict.types import Workload

from .doubles import FakeEstimator, cfg


def test_role_prediction_is_consistent():
    est = FakeEstimator()
    r = Predictor(est).predict_role(cfg(engine="vllm", drafts=7), Workload(65536, 300, 4, acceptance_length=2.0))
    d = r["decode"]
    assert d["batch"] == 4 and d["tokens_per_step"] == 2.0
    assert d["tpot_ms"] == pytest.approx(d["step_ms"] / 2.0, rel=1e-3)
    assert d["decode_tok_s"] == pytest.approx(1000 * 2.0 * 4 / d["step_ms"], rel=1e-3)
    assert sum(d["breakdown_ms"].values()) == pytest.approx(d["step_ms"], abs=0.01)
    assert r["bottleneck"]["decode_step"] == max(d["breakdown_ms"], key=d["breakdown_ms"].get)
    assert [c["prefix"] for c in r["prefill"]["chunks"]] == [0, 32768]
    b = r["benchmark"]
    assert b["requests"] == 4 and b["e2e_s"] > 0 and b["ttft_ms"]["mean"] <= b["latency_ms"]["mean"]
    assert {"verify-kv-once", "moe-kernel", "acceptance", "vllm-budget"} <= set(r["assumptions"])


def test_decode_steps_are_cached_by_context_bucket():
    est = FakeEstimator()
    p = Predictor(est)
    c = cfg()
    p.decode_step(c, 4, 65536)
    n = est.calls
    p.decode_step(c, 4, 65536 - 100)     # same 2048-token bucket (rounded up)
    assert est.calls == n


def test_open_loop_batch_follows_littles_law():
    est = FakeEstimator()
    r = Predictor(est).predict_role(cfg(drafts=0), Workload(4096, 1000, 1, requests=20, rate=5.0))
    assert r["decode"]["batch"] > 1 and "open-loop-batch" in r["assumptions"]


def test_only_the_command_edge_imports_the_adapter_and_predict():
    """Read from the source: the aiconfigurator-core adapter is imported by the predict/advise command alone (our
    core speaks to the Estimator interface), and no other command or layer imports gpustack_k3.predict."""
    from tests.architecture.imports import graph

    g = graph()
    adapter = sorted(m for m, es in g.items() if "gpustack_k3.predict.aic" in es)
    outside = sorted(m for m, es in g.items() if not m.startswith("gpustack_k3.predict")
                     and any(t.startswith("gpustack_k3.predict") for t in es))
    assert adapter == ["gpustack_k3.cli.predict_cmd"] and outside == ["gpustack_k3.cli.predict_cmd"]
