"""Tier engine_oracle (helper m10s): the rules of gpustack_k3/core/rules/sglang_checks_m10s.py against the release's
own code. Each case of tests/core/test_m10s_rules.py: the release refuses the line at the source the rule cites for
that release and accepts its twin; the lines of ACCEPTED it accepts; the external-linker line it refuses on the SM100
GPU (the rule's warning) and accepts on the other; the hierarchical-cache lines it refuses on the SM100 GPU and accepts flipped; the held-out misses it refuses at the cited source of the rule or
entry that now refuses them. The product's side of the same lines is tests/core/test_m10s_rules.py."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_m10s_rules import (ACCEPTED, CASES, HELDOUT, HELDOUT_ENV, HICACHE, HICACHE_CASES, IDS, LINKER,
                                        LINKER_CASES, lines, model_dir)
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("m10s-oracle")


def _at_cited(ans: dict, source: str) -> None:
    cited = cited_lines(source)
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (ans.get("where"), ans.get("message"), source)


@pytest.mark.parametrize("rid,release,stem,over,base,bad,good,env", CASES, ids=IDS)
def test_the_release_refuses_at_the_cited_source_and_accepts_the_twin(oracles, root, rid, release, stem, over, base,
                                                                      bad, good, env):
    d = model_dir(root, stem, over)
    refuse, accept = lines(d, base, bad, good)
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(refuse, env[0])
    assert ans["verdict"] == "refused", ans
    assert "does not match the quantization method" in ans.get("message", ""), ans
    _at_cited(ans, RULES[rid].sources[f"sglang {release}"])
    twin = oracle.judge_line(accept, env[1])
    assert twin["verdict"] == "accepted", twin


@pytest.mark.parametrize("release,stem,over,argv", ACCEPTED)
def test_the_release_accepts_the_lines_the_rule_passes(oracles, root, release, stem, over, argv):
    d = model_dir(root, stem, over)
    ans = oracles(f"sglang-{release}").judge_line(["--model-path", d, *argv], {})
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("release,stem,over,argv,gpu,warned", LINKER_CASES)
def test_the_linker_line_depends_on_the_gpu(oracles, root, release, stem, over, argv, gpu, warned):
    d = model_dir(root, stem, over)
    ans = oracles(f"sglang-{release}").judge_line(["--model-path", d, *argv], {}, hardware=gpu)
    if warned:
        assert ans["verdict"] == "refused", ans
        _at_cited(ans, RULES[LINKER].sources[f"sglang {release}"])
    else:
        assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("release,stem,over,argv,gpu,twin_gpu,twin", HICACHE_CASES)
def test_the_hicache_line_is_refused_on_the_sm100_gpu_and_the_twin_accepted(oracles, root, release, stem, over, argv,
                                                                           gpu, twin_gpu, twin):
    d = model_dir(root, stem, over)
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(["--model-path", d, *argv], {}, hardware=gpu)
    assert ans["verdict"] == "refused", ans
    _at_cited(ans, RULES[HICACHE].sources[f"sglang {release}"])
    ans = oracle.judge_line(["--model-path", d, *(twin or argv)], {}, hardware=twin_gpu)
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("rid,argv", HELDOUT, ids=[h[0] for h in HELDOUT])
def test_the_heldout_misses_are_refused_at_the_cited_source(oracles, rid, argv):
    ans = oracles("sglang-0.5.23").judge_line(argv, HELDOUT_ENV)
    assert ans["verdict"] == "refused", ans
    _at_cited(ans, RULES[rid].sources["sglang 0.5.23"])
