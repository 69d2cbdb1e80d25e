"""Tier engine_oracle: the rules of gpustack_k3/core/rules/sglang_checks_smiss5.py and the smiss5 change to
sglang-hisparse-architecture against the releases themselves (the product's side: tests/core/test_smiss5_rules.py).
A wrong condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES, checks
from tests.core.test_smiss5_rules import DSV41, IDS, MEGA, SMISS5_CASES
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


def _where(ans: dict) -> tuple[str, int]:
    path, _, line = ans.get("where", "").rpartition(":")
    return path, int(line or 0)


@pytest.mark.parametrize("rid,release,bad,good", SMISS5_CASES, ids=IDS)
def test_the_rule_agrees_with_the_release(oracles, rid, release, bad, good):
    oracle = oracles(f"sglang-{release}")
    cited = cited_lines(RULES[rid].sources[f"sglang {release}"])
    ans = oracle.judge_line(bad, {})
    assert ans["verdict"] == "refused", (bad, ans)
    path, line = _where(ans)
    assert path in cited and line in cited[path], (ans.get("where"), ans.get("message"))
    ans = oracle.judge_line(good, {})
    assert ans["verdict"] == "accepted", (good, ans)


def test_megakernel_without_the_plugin_is_refused_where_the_warning_cites(oracles):
    """The oracle's interpreter has no sgl-nvidia-mega (the wheel does not depend on it): the release refuses at the
    plugin check the warning cites, naming the package; a serving image that installs it is not refused there."""
    oracle = oracles("sglang-0.5.23")
    ans = oracle.judge_line(["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-nvidia-megakernel"], {})
    assert ans["verdict"] == "refused", ans
    cited = cited_lines(RULES[MEGA].sources["sglang 0.5.23"])
    path, line = _where(ans)
    assert path in cited and line in cited[path], ans
    assert "plugin is not installed" in ans["message"] and "sgl-nvidia-mega" in ans["message"]


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
def test_hisparse_on_dsv41_is_refused_by_the_v41_feature_list_not_the_architecture(oracles, release):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(DSV41 + ["--enable-hisparse", "--disable-radix-cache"], {})
    assert ans["verdict"] == "refused", ans
    path, line = _where(ans)
    assert path == "sglang/srt/arg_groups/deepseek_v4_hook.py" and "HiSparse" in ans["message"], ans
    cited = cited_lines(checks.TABLE["sglang-dsv41-unsupported-features"].releases[release])
    assert line in cited[path], ans
    assert path not in cited_lines(checks.TABLE["sglang-hisparse-architecture"].releases[release])
