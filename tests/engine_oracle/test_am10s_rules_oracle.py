"""Tier engine_oracle: the rules of gpustack_k3/core/rules/sglang_checks_am10s.py against the releases themselves (the
product's side: tests/core/test_am10s_rules.py over the same lines). Each refused line raises at a line the rule's
source cites for that release, and its twin is accepted; UNO with no attention backend is refused on B300 and
accepted on H200 (the GPU-dependent term the warning names). A wrong condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_am10s_rules import CASES, IDS, MODEL_CASES, MODEL_IDS, UNO, WARN_CASES
from tests.core.test_mfixS_rules import model_dir
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("am10s-oracle")


def _at_cited(rid: str, release: str, ans: dict) -> None:
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line or 0) in cited[path], (ans.get("where"), ans.get("message"))


@pytest.mark.parametrize("rid,release,gpu,bad,good_gpu,good,env", CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, gpu, bad, good_gpu, good, env):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(bad, env, gpu)
    assert ans["verdict"] == "refused", (bad, ans)
    _at_cited(rid, release, ans)
    ans = oracle.judge_line(good, env, good_gpu)
    assert ans["verdict"] == "accepted", (good, ans)


@pytest.mark.parametrize("rid,release,argv,env,bad_model,good_model,good", MODEL_CASES, ids=MODEL_IDS)
def test_the_model_rule_agrees_with_the_release(oracles, root, rid, release, argv, env, bad_model, good_model, good):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(["--model-path", model_dir(root, *bad_model), *argv], env)
    assert ans["verdict"] == "refused", ans
    _at_cited(rid, release, ans)
    # the twin (a class of the same list without index_topk: not DSA; or one option flipped): accepted
    ans = oracle.judge_line(["--model-path", model_dir(root, *good_model), *good], env)
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("release,line,bad_gpu,good_gpu", WARN_CASES)
def test_uno_with_the_picked_backend_depends_on_the_gpu(oracles, release, line, bad_gpu, good_gpu):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(line, {}, bad_gpu)
    assert ans["verdict"] == "refused" and "FA3" in ans.get("message", ""), ans
    _at_cited(UNO, release, ans)
    ans = oracle.judge_line(line, {}, good_gpu)
    assert ans["verdict"] == "accepted", ans
