"""nan from a command line (issue 31, fr3): vLLM 0.11.0 and SGLang 0.5.23 accept it at config time (the engine oracle,
2026-12-03: --gpu-memory-utilization nan on 0.11.0, --mem-fraction-static nan and --mamba-full-memory-ratio nan on
0.5.23); vLLM 0.33.0 refuses it (CacheConfig le=1). core/flags.py refused every non-finite float (argv-refused)."""
from __future__ import annotations

import pytest

from tests.core.test_false_refusals_fr3 import HYBRID, KIMI, KIMI_SGL, assert_not_refused, check_args, findings


@pytest.mark.parametrize("engine, version, argv, field", [
    ("vllm", "0.11.0", HYBRID + ["--gpu-memory-utilization", "nan"], "spec.memory.fraction"),
    ("sglang", "0.5.23", KIMI_SGL + ["--mem-fraction-static", "nan"], "spec.memory.fraction"),
    ("sglang", "0.5.23", KIMI_SGL + ["--mamba-full-memory-ratio", "nan"], "spec.memory.mambaFullMemoryRatio"),
])
def test_nan_the_release_accepts_is_warned_not_refused(engine, version, argv, field):
    code, doc = check_args(engine, version, argv)
    assert_not_refused(code, doc)
    assert field in {f["field"] for f in findings(doc, "warning")}, doc


def test_nan_the_release_refuses_is_refused():
    code, doc = check_args("vllm", "0.33.0", KIMI + ["--gpu-memory-utilization", "nan"])
    assert code == 1 and "vllm-config-bounds" in {f["rule"] for f in findings(doc, "error")}, doc
