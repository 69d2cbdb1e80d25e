"""Tier engine_oracle: the rules of gpustack_k3/core/rules/sglang_checks_am11s.py against the releases themselves (the
product's side: tests/core/test_am11s_rules.py over the same lines). Each refused line raises at a line the rule's
source cites for that release, and its twin is accepted (for the chunk rounding: the same line on a GPU with more
memory, the GPU-dependent term; for the W4A16_NVFP4 experts: the same line off SM100). A wrong condition fails here
both ways."""
from __future__ import annotations

import pytest

from tests.core.test_am11s_rules import CASES, IDS, MODEL_CASES, MODEL_IDS, QWEN3_OFF_SM100, QWEN36, with_model
from tests.core.test_mfixS_rules import model_dir
from tests.engine_oracle.test_am10s_rules_oracle import _at_cited

pytestmark = pytest.mark.engine_oracle


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("am11s-oracle")


@pytest.mark.parametrize("rid,release,gpu,bad,good_gpu,good,env", CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, gpu, bad, good_gpu, good, env):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(bad, env, gpu)
    assert ans["verdict"] == "refused", (bad, ans)
    _at_cited(rid, release, ans)
    ans = oracle.judge_line(good, env, good_gpu)
    assert ans["verdict"] == "accepted", (good, ans)


@pytest.mark.parametrize("rid,release,argv,env,bad_model,good_model,good,gpu", MODEL_CASES, ids=MODEL_IDS)
def test_the_model_rule_agrees_with_the_release(oracles, root, rid, release, argv, env, bad_model, good_model, good,
                                                gpu):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(with_model(model_dir(root, *bad_model), argv), env, gpu)
    assert ans["verdict"] == "refused", ans
    _at_cited(rid, release, ans)
    ans = oracle.judge_line(with_model(model_dir(root, *good_model), good), env, gpu)
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("release,argv,gpu", QWEN3_OFF_SM100)
def test_w4a16_experts_off_sm100_are_accepted(oracles, root, release, argv, gpu):
    ans = oracles(f"sglang-{release}").judge_line(["--model-path", model_dir(root, QWEN36, {}), *argv], {}, gpu)
    assert ans["verdict"] == "accepted", ans
