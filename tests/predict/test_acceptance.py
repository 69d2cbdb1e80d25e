from __future__ import annotations

import pytest

from gpustack_k3.predict import acceptance as A
from gpustack_k3.predict.types import PredictError


def test_geometric_tokens_per_step_by_hand():
    assert A.length_from_rate(0.5, 3) == pytest.approx((1 - 0.5 ** 4) / 0.5)   # 1.875
    assert A.length_from_rate(0.0, 7) == 1.0
    assert A.length_from_rate(1.0, 7) == 8.0
    assert A.length_from_rate(0.3, 0) == 1.0


def test_rate_round_trip_and_carry_to_other_draft_counts():
    r = A.rate_from_length(2.39, 7)
    assert A.length_from_rate(r, 7) == pytest.approx(2.39, abs=1e-9)
    assert A.tokens_per_step(3, length=2.39, at_drafts=7) == pytest.approx(A.length_from_rate(r, 3))
    assert A.tokens_per_step(7, length=2.39) == 2.39
    assert A.tokens_per_step(0) == 1.0


@pytest.mark.parametrize("kw", [{}, {"length": 9.0}, {"length": 0.5}, {"rate": 1.5}])
def test_bad_acceptance_is_input_error(kw):
    with pytest.raises(PredictError) as e:
        A.tokens_per_step(7, **kw)
    assert e.value.where in ("--acceptance-length", "--acceptance-rate") and e.value.hint


def test_advise_acceptance_given_or_the_measured_row_nearest_the_context():
    from gpustack_k3.predict.advise import AdviseRequest, acceptance_of, measured

    assert acceptance_of(AdviseRequest(65536, 10, acceptance_rate=0.6), "vllm") == (0.6, "given --acceptance-rate")
    acc = measured()["acceptance_length"]
    row = next(r for r in acc["rows"] if r["engine"] == "sglang" and r["context"] == max(
        x["context"] for x in acc["rows"] if x["engine"] == "sglang"))
    rate, note = acceptance_of(AdviseRequest(10_000_000, 10), "sglang")      # beyond every row: the longest
    assert A.length_from_rate(rate, acc["drafts"]) == pytest.approx((row["low"] + row["high"]) / 2)
    assert f"at {row['context']:,} tokens" in note
