"""Tier engine_oracle: the corpus lines of tests/core/test_sglang_tail.py (issue 31, SGLang misses) judged by SGLang
0.5.23 itself: each is refused, raising where the case says (the line its rule cites). With the unit test this shows
the product now refuses, for the engine's own reason, lines the release refuses and check-args passed before."""
from __future__ import annotations

import pytest

from tests.core.test_sglang_tail import IDS, RELEASE, TAIL_CASES

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,argv,env,model,where", TAIL_CASES, ids=IDS)
def test_the_release_refuses_the_corpus_line(oracles, rid, argv, env, model, where):
    ans = oracles(f"sglang-{RELEASE}").judge_line(argv, env)
    assert ans["verdict"] == "refused" and ans.get("where") == where, (argv, ans)
