"""Tier engine_oracle: the rule of gpustack_k3/core/rules/sglang_checks_smiss6.py and the smiss6 checks-table changes
that need a config.json the catalog does not carry, against the releases themselves (the product's side:
tests/core/test_smiss6_rules.py). A wrong condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES, checks
from tests.core.test_smiss5_rules import KIMI
from tests.core.test_smiss6_rules import DSV4_DET, IDS, LMO_PD, SMISS6_CASES, dsv4_config
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


def _where(ans: dict) -> tuple[str, int]:
    path, _, line = ans.get("where", "").rpartition(":")
    return path, int(line or 0)


@pytest.mark.parametrize("rid,release,bad,good", SMISS6_CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, bad, good):
    oracle = oracles(f"sglang-{release}")
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    ans = oracle.judge_line(bad, {})
    assert ans["verdict"] == "refused", (bad, ans)
    path, line = _where(ans)
    assert path in cited and line in cited[path], (ans.get("where"), ans.get("message"))
    ans = oracle.judge_line(good, {})
    assert ans["verdict"] == "accepted", (good, ans)


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
def test_language_model_only_pd_refuses_deepseek_v4_under_another_model_type(oracles, release, tmp_path):
    """The entry's exemption is hf_config.model_type deepseek_v41 (its examples: accepted on DeepSeek-V4.1); the same
    DeepseekV4ForCausalLM under model_type deepseek_v4 is refused where the entry cites."""
    dsv4_config(tmp_path)
    oracle = oracles(f"sglang-{release}")
    pd = ["--tp-size", "8", "--language-model-only", "--disaggregation-mode", "prefill"]
    ans = oracle.judge_line(["--model-path", str(tmp_path), *pd], {})
    assert ans["verdict"] == "refused", ans
    path, line = _where(ans)
    cited = cited_lines(checks.TABLE[LMO_PD].releases[release])
    assert path in cited and line in cited[path], ans
    assert oracle.judge_line(["--model-path", "/models/DeepSeek-V4.1-Flash", *pd], {})["verdict"] == "accepted"


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
def test_dsv4_deterministic_is_refused_for_the_v4_architecture_and_not_for_kimi_k3(oracles, release, tmp_path):
    dsv4_config(tmp_path)
    oracle = oracles(f"sglang-{release}")
    cited = cited_lines(checks.TABLE[DSV4_DET].releases[release])
    ans = oracle.judge_line(["--model-path", str(tmp_path), "--tp-size", "8", "--enable-deterministic-inference"], {})
    assert ans["verdict"] == "refused" and "'dsv4'" in ans["message"], ans
    path, line = _where(ans)
    assert path in cited and line in cited[path], ans
    assert oracle.judge_line(KIMI + ["--enable-deterministic-inference"], {})["verdict"] == "accepted"


def test_the_eagle_rule_leaves_what_the_release_accepts(oracles):
    """The lines tests/core/test_smiss6_rules.py asserts the rule passes: NGRAM's tree is its BFS breadth (an
    --speculative-eagle-topk beside it is overwritten), and DSPARK picks its own verify backend."""
    oracle = oracles("sglang-0.5.23")
    for line in (KIMI + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "1",
                         "--speculative-eagle-topk", "4"],
                 KIMI + ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
                         "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7"]):
        assert oracle.judge_line(line, {})["verdict"] == "accepted", line
