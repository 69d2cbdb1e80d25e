"""Tier engine_oracle (helper m11s): the rules of gpustack_k3/core/rules/sglang_checks_m11s.py and the kernel-plugin
verdicts against the release's own code. Each case of tests/core/test_m11s_rules.py: the release refuses the line at
the source the rule cites for that release and accepts its twin; the held-out JSON miss it refuses at the cited source.
The kernel plugins (0.5.23): a refusal whose only reason is the plugin's absence (not installed on the oracle's box,
the serving image may carry it) is not_decidable (optional-package); with both flags the release's own reason is
computed without the plugin and the line stays refused; 0.5.22 has neither flag (an argparse refusal)."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_m11s_rules import CASES, HELDOUT_ENV, HELDOUT_JSON, IDS, JSON, MLA, PLUGIN_LINES
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle


def _at_cited(ans: dict, source: str) -> None:
    cited = cited_lines(source)
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (ans.get("where"), ans.get("message"), source)


@pytest.mark.parametrize("rid,release,bad,good", CASES, ids=IDS)
def test_the_release_refuses_at_the_cited_source_and_accepts_the_twin(oracles, rid, release, bad, good):
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(bad, {})
    assert ans["verdict"] == "refused", ans
    _at_cited(ans, RULES[rid].sources[f"sglang {release}"])
    twin = oracle.judge_line(good, {})
    assert twin["verdict"] == "accepted", twin


def test_the_heldout_json_miss_is_refused_at_the_cited_source(oracles):
    ans = oracles("sglang-0.5.23").judge_line(HELDOUT_JSON, HELDOUT_ENV)
    assert ans["verdict"] == "refused" and ans.get("type") == "JSONDecodeError", ans
    _at_cited(ans, RULES[JSON].sources["sglang 0.5.23"])


@pytest.mark.parametrize("argv,rid", PLUGIN_LINES)
def test_a_plugin_only_refusal_is_not_decidable_on_0_5_23(oracles, argv, rid):
    ans = oracles("sglang-0.5.23").judge_line(argv, {})
    assert ans["verdict"] == "not_decidable" and ans.get("reason") == "optional-package", ans
    assert "kernel plugin" in ans.get("detail", "") and "did not evaluate the plugin's own reasons" in ans["detail"], ans
    assert ans.get("where", "").startswith("sglang/srt/kernel_plugins/"), ans


def test_a_refusal_with_a_reason_besides_the_plugin_stays_refused_on_0_5_23(oracles):
    ans = oracles("sglang-0.5.23").judge_line([*MLA, "--enable-nvidia-megakernel", "--enable-amd-monokernel"], {})
    assert ans["verdict"] == "refused", ans
    assert ans.get("where") == "sglang/srt/kernel_plugins/nvidia/binding.py:380", ans
    assert "--enable-amd-monokernel is also set" in ans.get("message", ""), ans
    _at_cited(ans, RULES["sglang-nvidia-megakernel-with-amd-monokernel"].sources["sglang 0.5.23"])


@pytest.mark.parametrize("argv,rid", PLUGIN_LINES)
def test_0_5_22_has_no_kernel_plugin_flags(oracles, argv, rid):
    ans = oracles("sglang-0.5.22").judge_line(argv, {})
    assert ans["verdict"] == "refused" and ans.get("stage") == "parse", ans
    assert "unrecognized arguments" in ans.get("message", ""), ans
