"""Tier engine_oracle (helper mfixS): the rules of gpustack_k3/core/rules/sglang_checks_mfixS.py against the release's
own code. Each case of tests/core/test_mfixS_rules.py: the release refuses the line at the source the rule cites for
that release and accepts its twin (one fact flipped); the lines of ACCEPTED it accepts. The product's side of the same
lines is tests/core/test_mfixS_rules.py."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_mfixS_rules import ACCEPTED, CASES, GPU_CASES, GPU_IDS, IDS, lines, model_dir
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("mfixS-oracle")


@pytest.mark.parametrize("rid,release,stem,over,base,bad,good,env", CASES, ids=IDS)
def test_the_release_refuses_at_the_cited_source_and_accepts_the_twin(oracles, root, rid, release, stem, over, base,
                                                                      bad, good, env):
    d = model_dir(root, stem, over)
    refuse, accept = lines(d, base, bad, good)
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(refuse, env[0])
    assert ans["verdict"] == "refused", ans
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (ans.get("where"), ans.get("message"))
    twin = oracle.judge_line(accept, env[1])
    assert twin["verdict"] == "accepted", twin


@pytest.mark.parametrize("rid,release,stem,over,argv,gpu,twin_gpu,twin", GPU_CASES, ids=GPU_IDS)
def test_the_release_refuses_on_the_gpu_and_accepts_the_twin(oracles, root, rid, release, stem, over, argv, gpu,
                                                             twin_gpu, twin):
    d = model_dir(root, stem, over)
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(["--model-path", d, *argv], {}, hardware=gpu)
    assert ans["verdict"] == "refused", ans
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (ans.get("where"), ans.get("message"))
    ans = oracle.judge_line(["--model-path", d, *(twin or argv)], {}, hardware=twin_gpu)
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("release,stem,over,argv", ACCEPTED)
def test_the_release_accepts_the_lines_the_rules_pass(oracles, root, release, stem, over, argv):
    d = model_dir(root, stem, over)
    ans = oracles(f"sglang-{release}").judge_line(["--model-path", d, *argv], {})
    assert ans["verdict"] == "accepted", ans


def test_flashmla_mega_on_dsv41_b300_is_accepted(oracles):
    from tests.core.test_mfixS_rules import DSV41_MEGA

    ans = oracles("sglang-0.5.23").judge_line(DSV41_MEGA, {})
    assert ans["verdict"] == "accepted", ans
