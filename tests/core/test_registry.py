"""The rule registry: every rule id is one validated definition, bound to its check and its CEL translation or the
reason it has none; its sources cite this repository or an engine file with its version; its version traits exist
in the catalog; every rule has a firing case in the tables of its family."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import RULES, RuleDefinitionError
from gpustack_k3.core.rules.registry import FAMILIES, of_family, rule

REPO = Path(__file__).resolve().parents[2]
GOOD = dict(family="spec", severity="warning", engines=["vllm"], field="spec.env", title="A title", why="Why it is.",
            fix="Fix it so.", source="vllm envs.py:1-2@0.33.0", checked_by="product")


def define(rule_id: str, **kw):
    existed = rule_id in RULES
    try:
        rule(rule_id, **{**GOOD, **kw})(lambda r, c: iter(()))
    finally:
        if not existed:
            RULES.pop(rule_id, None)


@pytest.mark.parametrize("kw,needle", [
    ({"source": "seed 001 §16"}, "cites"),
    ({"source": "domain §4.2"}, "cites"),
    ({"source": "shared/research/engines.md V8"}, "cites"),
    ({"source": "issue 3: model volume"}, "cites"),
    ({"source": "see #14"}, "cites"),
    ({"source": "engines.md Part 1a"}, "cites"),
    ({"severity": "fatal"}, "severity"),
    ({"engines": ["tgi"]}, "engines"),
    ({"engines": []}, "engines"),
    ({"fix": ""}, "fix is empty"),
    ({"severity": "error"}, "exactly one of cel"),                                  # a hard error says how CEL sees it
    ({"severity": "error", "cel": lambda b: "true", "no_cel": "x" * 40}, "exactly one of cel"),
    ({"severity": "error", "no_cel": "too short"}, "must say why"),
    ({"cel": lambda b: "true"}, "only hard errors"),
    ({"family": "render", "severity": "error", "cel": lambda b: "true"}, "only spec and args"),
    ({"family": "log", "log": lambda tr, c: iter(())}, "log="),
    ({"when": {"dspark": []}}, "when[dspark]"),
    ({"sources": {"sglang 0.5.23": "sglang x.py:1@0.5.23"}}, "names an engine"),
    ({"family": "hooks"}, "family"),
])
def test_malformed_definitions_fail_on_import(kw, needle):
    with pytest.raises(RuleDefinitionError, match=re.escape(needle)):
        define("test-malformed", **kw)
    assert "test-malformed" not in RULES


def test_an_id_is_defined_once():
    with pytest.raises(RuleDefinitionError, match="defined twice"):
        define("vllm-dcp-with-dspark")
    assert RULES["vllm-dcp-with-dspark"].severity == "error"          # the original is untouched
    with pytest.raises(RuleDefinitionError, match="lower-case"):
        define("Not_An_Id")


def test_anchors_are_not_citations_of_the_write_ups():
    define("test-anchor", source="docs/sources.md#seed-sglang-deployment; docs/sources.md#domain-x")


def test_every_rule_is_complete():
    assert len(RULES) >= 55 and set(FAMILIES) == {r.family for r in RULES.values()}
    for r in RULES.values():
        assert r.check is not None and r.title and r.why and r.fix and r.source
        if r.hard:
            assert (r.cel is not None) + (r.cel_rules is not None) + (r.no_cel is not None) == 1, r.id


def _anchors() -> set[str]:
    return set(re.findall(r'<a id="([\w-]+)"></a>', (REPO / "docs" / "sources.md").read_text(encoding="utf-8")))


def test_every_cited_anchor_exists_in_docs_sources():
    anchors = _anchors()
    cited = {(r.id, a) for r in RULES.values() for src in (r.source, *r.sources.values())
             for a in re.findall(r"docs/sources\.md#([\w-]+)", src)}
    assert cited, "rules cite docs/sources.md"
    assert {(rid, a) for rid, a in cited if a not in anchors} == set()


def test_cited_repository_files_exist():
    for r in RULES.values():
        for src in (r.source, *r.sources.values()):
            for path in re.findall(r"\b((?:gpustack_k3|docs|tests)/[\w./-]+\.(?:py|md|yaml|json|j2))\b", src):
                assert (REPO / path).exists(), (r.id, path)


def test_engine_sources_name_their_version():
    """An engine file cited as file.py:line carries @version somewhere in the same source."""
    for r in RULES.values():
        for src in (r.source, *r.sources.values()):
            if re.search(r"\.py:\d", src):
                assert "@" in src or "the kimi-k3 image" in src, (r.id, src)


def test_traits_exist_and_each_spec_rule_applies_somewhere():
    cat = load_catalog()
    for r in of_family("spec", "args"):
        for trait, allowed in r.when.items():
            seen = {v.traits.get(trait) for e in r.engines for v in cat.engines[e].versions.values()}
            assert seen & set(allowed), (r.id, trait, allowed, seen)
        assert r.versions(cat), f"{r.id} applies to no catalog version"
    for r in RULES.values():
        for key in r.sources:
            eng, _, ver = key.partition(" ")
            assert not ver or ver in cat.engines[eng].versions, (r.id, key)


def test_every_rule_has_a_firing_case():
    from tests.core.test_sglang_python_rules import SGLANG_PY_DIRECT   # core/rules/sglang_checks_smiss{5,6,7}.py
    from tests.coldstart.test_doctor import LOG_CASES
    from tests.core.test_argv_read import ARGV_CASES
    from tests.core.test_checks_table import CHECKS_DIRECT
    from tests.core.test_rules import CASES
    from tests.core.test_rules_render import RENDER_CASES
    from tests.core.test_rules_topology import TOPOLOGY_CASES
    from tests.core.test_verdicts import MODEL_CASES
    from tests.core.test_verdicts_fresh import FRESH_DIRECT
    from tests.core.test_verdicts_heldout import HELDOUT_DIRECT
    from tests.core.test_verdicts_sglang import SGLANG_CASES, SGLANG_DIRECT
    from tests.core.test_vllm_034 import V034_DIRECT
    from tests.core.test_vllm_checks import VLLM_CHECKS_DIRECT
    from tests.core.test_config_field_bounds import CFB_DIRECT
    from tests.core.test_false_refusals_fr3 import FR3_DIRECT
    from tests.core.test_vllm_python_rules import VMISS5_DIRECT, VMISS6_DIRECT, VMISS7_DIRECT

    from tests.core.test_lora7_rules import LORA7_DIRECT   # core/rules/vllm_checks_lora7.py (helper lora7)
    from tests.core.test_lateB_rules import LATEB_DIRECT   # core/rules/vllm_checks_lateB.py (helper lateB)

    covered = (set(CASES) | set(RENDER_CASES) | set(LOG_CASES) | set(ARGV_CASES) | set(TOPOLOGY_CASES)
               | set(MODEL_CASES) | set(SGLANG_CASES) | SGLANG_DIRECT | FRESH_DIRECT | HELDOUT_DIRECT | V034_DIRECT
               | SGLANG_PY_DIRECT   # core/rules/sglang_checks_smiss{5,6,7}.py (tests/core/test_sglang_python_rules.py)
               | CHECKS_DIRECT   # the checks tables' entries: each one's examples (test_checks_table.py)
               | VLLM_CHECKS_DIRECT   # core/rules/vllm_checks.py (tests/core/test_vllm_checks.py)
               | CFB_DIRECT   # core/rules/config_fields.py (tests/core/test_config_field_bounds.py)
               | FR3_DIRECT   # tests/core/test_false_refusals_fr3.py (argv range, unused topologyKey / bandwidth)
               | VMISS5_DIRECT   # core/rules/vllm_checks_vmiss5.py (tests/core/test_vllm_python_rules.py)
               | VMISS6_DIRECT | VMISS7_DIRECT   # core/rules/vllm_checks_vmiss{6,7}.py (tests/core/test_vllm_python_rules.py)
               | {"spec.schema"})   # test_schema_rule.py
    covered |= LORA7_DIRECT   # core/rules/vllm_checks_lora7.py (tests/core/test_lora7_rules.py)
    covered |= LATEB_DIRECT   # core/rules/vllm_checks_lateB.py (tests/core/test_lateB_rules.py)
    from tests.core.test_lateA_rules import LATEA_DIRECT   # core/rules/vllm_checks_lateA.py (helper lateA)
    covered |= LATEA_DIRECT
    from tests.core.test_aimS2_rules import AIMS2_DIRECT   # core/rules/sglang_checks_aimS2.py (helper aimS2)
    covered |= AIMS2_DIRECT
    from tests.core.test_miss8_rules import MISS8_DIRECT   # core/rules/{vllm,sglang}_checks_miss8.py (helper miss8)
    covered |= MISS8_DIRECT
    from tests.core.test_aimS3_rules import AIMS3_DIRECT   # core/rules/sglang_checks_aimS3.py (helper aimS3)
    covered |= AIMS3_DIRECT
    from tests.core.test_aimV3_rules import AIMV3_DIRECT   # core/rules/vllm_checks_aimV3.py (helper aimV3)
    covered |= AIMV3_DIRECT
    from tests.core.test_miss9_rules import MISS9_DIRECT   # core/rules/vllm_checks_miss9.py (helper miss9)
    covered |= MISS9_DIRECT
    from tests.core.test_mfixS_rules import MFIXS_DIRECT   # core/rules/sglang_checks_mfixS.py (helper mfixS)
    covered |= MFIXS_DIRECT
    from tests.core.test_mfixV_rules import MFIXV_DIRECT   # core/rules/vllm_checks_mfixV.py (helper mfixV)
    covered |= MFIXV_DIRECT
    from tests.core.test_mfix11_rules import MFIX11_DIRECT   # core/rules/vllm_checks_mfix11.py (helper mfix11)
    covered |= MFIX11_DIRECT
    from tests.core.test_late9v_rules import LATE9V_DIRECT   # core/rules/vllm_checks_late9v.py (helper late9v)
    covered |= LATE9V_DIRECT
    from tests.core.test_m10s_rules import M10S_DIRECT   # core/rules/sglang_checks_m10s.py (helper m10s)
    covered |= M10S_DIRECT
    from tests.core.test_m10v_rules import M10V_DIRECT   # core/rules/vllm_checks_m10v.py (helper m10v)
    covered |= M10V_DIRECT
    from tests.core.test_am10v_rules import AM10V_DIRECT   # core/rules/vllm_checks_am10v.py (helper am10v)
    covered |= AM10V_DIRECT
    from tests.core.test_m11v_rules import M11V_DIRECT   # core/rules/vllm_checks_m11v.py (helper m11v)
    from tests.core.test_draft11_rules import DRAFT11_DIRECT   # core/rules/vllm_checks_draft11.py (helper draft11)
    from tests.core.test_lead11_rules import LEAD11_DIRECT   # core/rules/vllm_checks_lead11.py (lead, round 11)
    covered |= M11V_DIRECT
    covered |= DRAFT11_DIRECT
    covered |= LEAD11_DIRECT
    from tests.core.test_am10s_rules import AM10S_DIRECT   # core/rules/sglang_checks_am10s.py (helper am10s)
    from tests.core.test_am11s_rules import AM11S_DIRECT   # core/rules/sglang_checks_am11s.py (helper am11s)
    covered |= AM10S_DIRECT
    covered |= AM11S_DIRECT
    from tests.core.test_v2r10_rules import V2R10_DIRECT   # core/rules/vllm_checks_v2r10.py (helper v2r10)
    covered |= V2R10_DIRECT
    from tests.core.test_reg11_rules import REG11_DIRECT   # core/rules/vllm_checks_reg11.py (helper reg11)
    covered |= REG11_DIRECT
    from tests.core.test_m11s_rules import M11S_DIRECT   # core/rules/sglang_checks_m11s.py (helper m11s)
    covered |= M11S_DIRECT
    assert covered == set(RULES)


def test_source_per_version():
    r = RULES["sglang-kimi-k3-dcp-decode-backend"]
    assert "@0.5.22" in r.source_for("sglang", "0.5.22") and "@0.5.23" in r.source_for("sglang", "0.5.23")
    assert r.source_for("sglang", "kimi-k3") == r.source
