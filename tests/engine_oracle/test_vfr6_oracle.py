"""Tier engine_oracle: spec-json-tensor-parallel-size against the vLLM releases (vfr6). 0.28.0 and later refuse a
non-null 'tensor_parallel_size' in --speculative-config at the line the rule's source cites, and accept null (the
model validator tests ``is not None``); 0.11.0 has no such field and ignores the key. The product agrees on each
line. Needs the wheels (tests/support/tiers.py)."""
from __future__ import annotations

import json

import pytest

from tests.core.test_vllm_checks import SMOL, product
from tests.engine_oracle.test_checks_vllm import cited, finding_message, words

pytestmark = pytest.mark.engine_oracle

RID = "spec-json-tensor-parallel-size"


def line(tp) -> list[str]:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "tensor_parallel_size": tp}
    return [SMOL, "--speculative-config", json.dumps(spec)]


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_a_non_null_tensor_parallel_size_is_refused_where_the_rule_says(oracles, release):
    v = oracles(f"vllm-{release}").judge_line(line(8), {})
    assert v["verdict"] == "refused", v
    path, _, at = str(v["where"]).rpartition(":")
    assert any(path == p and lo <= int(at) <= hi for p, lo, hi in cited(RID, release)), (v, cited(RID, release))
    ours = product(release, line(8), {})
    assert ours["verdict"] == "refuse" and RID in ours["rules"], ours
    assert words("'tensor_parallel_size'") in words(v["message"])
    assert "is not a valid argument in the speculative_config" in finding_message(ours, RID)


@pytest.mark.parametrize("release,tp", [("0.28.0", None), ("0.29.0", None), ("0.33.0", None), ("0.34.0", None),
                                        ("0.11.0", None), ("0.11.0", 8)])
def test_null_and_the_release_without_the_field_are_accepted(oracles, release, tp):
    v = oracles(f"vllm-{release}").judge_line(line(tp), {})
    assert v["verdict"] == "accepted", v
    ours = product(release, line(tp), {})
    assert RID not in ours["rules"], ours
