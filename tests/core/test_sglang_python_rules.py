"""The tests every module of SGLang Python rules shares (gpustack_k3/core/rules/sglang_checks_smiss5.py, _smiss6.py,
_smiss7.py): each rule of a module is registered and has a case, names exactly the releases its cases are on, and
refuses its case's line and passes the nearest (check-args as the differential runs it). The cases and the
module-specific tests are in tests/core/test_smiss{5,6,7}_rules.py; the release's own verdict on the same lines is
tests/engine_oracle/test_sglang_python_rules_oracle.py."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_smiss5_rules import SMISS5_CASES, SMISS5_DIRECT, product
from tests.core.test_smiss6_rules import SMISS6_CASES, SMISS6_DIRECT
from tests.core.test_smiss7_rules import SMISS7_CASES, SMISS7_DIRECT

# module of gpustack_k3/core/rules -> (its cases, its rule ids)
MODULES = {
    "sglang_checks_smiss5": (SMISS5_CASES, SMISS5_DIRECT),
    "sglang_checks_smiss6": (SMISS6_CASES, SMISS6_DIRECT),
    "sglang_checks_smiss7": (SMISS7_CASES, SMISS7_DIRECT),
}
CASES = [c for cases, _ in MODULES.values() for c in cases]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]
SGLANG_PY_DIRECT = set().union(*(direct for _, direct in MODULES.values()))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_rule_of_the_module_is_registered_and_has_a_case(module):
    mine = {rid for rid, r in RULES.items() if r.check.__module__ == f"gpustack_k3.core.rules.{module}"}
    assert mine == MODULES[module][1]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_rule_names_its_releases(module):
    cases = MODULES[module][0]
    for rid in {c[0] for c in cases}:
        assert {k.split(" ", 1)[1] for k in RULES[rid].sources} == {c[1] for c in cases if c[0] == rid}, rid


@pytest.mark.parametrize("rid,release,bad,good", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_the_nearest(rid, release, bad, good):
    mine = product(release, bad)
    assert mine["verdict"] == "refuse" and rid in mine["rules"], mine
    assert product(release, good)["verdict"] == "pass", product(release, good)
