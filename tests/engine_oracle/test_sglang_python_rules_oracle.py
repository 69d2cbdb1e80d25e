"""Tier engine_oracle: the Python rules of gpustack_k3/core/rules/sglang_checks_smiss5.py, _smiss6.py and _smiss7.py,
and the checks-table changes of those rounds that need a config.json the catalog does not carry, against the releases
themselves (the product's side: tests/core/test_sglang_python_rules.py over the cases of
tests/core/test_smiss{5,6,7}_rules.py). A wrong condition fails here both ways."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES, checks
from tests.core.test_smiss5_rules import DSV41, KIMI, MEGA
from tests.core.test_sglang_python_rules import CASES, IDS
from tests.core.test_smiss6_rules import DSV4_DET, LMO_PD, dsv4_config
from tests.core.test_smiss7_rules import AMD, K3_DCP_PP0, KIMI as K3, PP0
from tests.engine_oracle.test_checks_sglang import cited_lines

pytestmark = pytest.mark.engine_oracle



def _where(ans: dict) -> tuple[str, int]:
    path, _, line = ans.get("where", "").rpartition(":")
    return path, int(line or 0)


@pytest.mark.parametrize("rid,release,bad,good", CASES, ids=IDS)
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
    plugin check the warning cites, naming the package; a serving image that installs it is not refused there. The
    plugin's absence being the refusal's only reason, the oracle answers not_decidable (optional-package:
    oracle/engine_side/doubles.py kernel_plugin_probes), still naming where the release raised."""
    oracle = oracles("sglang-0.5.23")
    ans = oracle.judge_line(["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-nvidia-megakernel"], {})
    assert ans["verdict"] == "not_decidable" and ans["reason"] == "optional-package", ans
    cited = cited_lines(RULES[MEGA].sources["sglang 0.5.23"])
    path, line = _where(ans)
    assert path in cited and line in cited[path], ans
    assert "plugin is not installed" in ans["detail"] and "sgl-nvidia-mega" in ans["detail"]


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


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
def test_pp_size_zero_with_dcp_divides_by_zero_where_the_warning_cites(oracles, release):
    """The oracle's B300 reports no NVLink fabric (no NVML): the release divides by --pp-size choosing the DCP
    communication backend, where the warning cites; a --dcp-comm-backend on the line skips that choice."""
    oracle = oracles(f"sglang-{release}")
    ans = oracle.judge_line(K3_DCP_PP0, {})
    assert ans["verdict"] == "refused" and ans["type"] == "ZeroDivisionError", ans
    path, line = _where(ans)
    cited = cited_lines(RULES[PP0].sources[f"sglang {release}"])
    assert path in cited and line in cited[path], ans
    ans = oracle.judge_line(K3_DCP_PP0 + ["--dcp-comm-backend", "a2a"], {})
    assert ans["verdict"] == "accepted", ans


@pytest.mark.parametrize("flag", [["--enable-amd-monokernel"], ["--monokernel-backend", "amd"]])
def test_amd_monokernel_without_a_plugin_is_refused_where_the_warning_cites(oracles, flag):
    """The wheel registers no 'amd' monokernel backend: the release refuses at the plugin lookup the warning cites;
    that absence being its only reason, the oracle answers not_decidable (optional-package), naming where it raised."""
    oracle = oracles("sglang-0.5.23")
    ans = oracle.judge_line(K3 + flag, {})
    assert ans["verdict"] == "not_decidable" and ans["reason"] == "optional-package", ans
    path, line = _where(ans)
    cited = cited_lines(RULES[AMD].sources["sglang 0.5.23"])
    assert path in cited and line in cited[path], ans
    assert "no monokernel backend 'amd' is registered" in ans["detail"], ans
