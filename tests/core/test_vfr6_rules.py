"""spec-json-tensor-parallel-size (vfr6): refused only where the release refuses it -- a non-null value on vLLM
0.28.0 and later; null passes (SpeculativeConfig._verify_args tests ``is not None``), and 0.11.0 ignores the key
(tests/engine_oracle/test_vfr6_oracle.py judges the same lines with the releases)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.spec import _SPEC_JSON_TP_REFUSED
from tests.core.test_vllm_checks import SMOL, product

RID = "spec-json-tensor-parallel-size"


def line(tp) -> list[str]:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "tensor_parallel_size": tp}
    return [SMOL, "--speculative-config", json.dumps(spec)]


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_refused_when_not_null(release):
    assert RID in product(release, line(8), {})["rules"]
    assert RID not in product(release, line(None), {})["rules"]


def test_not_on_0_11_0():
    assert "0.11.0" not in _SPEC_JSON_TP_REFUSED
    assert RID not in product("0.11.0", line(8), {})["rules"]


def test_every_refusing_release_has_its_source():
    for key in _SPEC_JSON_TP_REFUSED:
        assert "speculative.py:" in RULES[RID].sources[f"vllm {key}"]
