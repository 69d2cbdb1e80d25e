"""The README's accuracy table is what bench/predict_accuracy.py computes (tier `predict`)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.support import tiers

pytestmark = pytest.mark.predict
REPO = Path(__file__).resolve().parents[2]


def test_readme_figures_are_the_benchs():
    tiers.aiconfigurator()
    spec = importlib.util.spec_from_file_location("predict_accuracy", REPO / "bench" / "predict_accuracy.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    d = bench.run()
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("### Accuracy (`python3 bench/predict_accuracy.py"):]
    table = table[:table.index("Misses, named")]
    for r in d["rows"]:
        if r["figure"] == "decode_ms_per_token":
            assert f"| {r['predicted']:.2f} | {r['measured']:.2f} | {r['error_pct']:+.1f} % |" in table, r
        elif r["figure"] == "ttft_mean_ms":
            assert f"| {round(r['predicted']):,} | {round(r['measured']):,} | {r['error_pct']:+.1f} %" in table, r
        elif r["figure"] == "sglang_chunk_tok_s":
            assert f"{round(r['predicted']):,}" in table and f"{r['measured']:,}" in table, r
    assert d["crossover"]["right_direction"] is True and "right direction" in table
    assert d["seed002"]["predicted"] is None and "not predicted" in table
