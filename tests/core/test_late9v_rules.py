"""The rule of gpustack_k3/core/rules/vllm_checks_late9v.py: a --model-class-overrides value that is not
'<module>:<class>' (no ':' or more than one) is refused on every release whose ModelConfig registers the overrides
(0.28.0 and later), left alone for a well-formed class path. tests/engine_oracle/test_late9v_rules_oracle.py has each
release judge the same lines."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_late9v import bad_class_paths
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip

RID = "vllm-model-class-overrides-format"
LATE9V_DIRECT = {RID}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

SMOL = ["/models/smollm2-hf"]
FLAG = "--model-class-overrides"
GOOD = json.dumps({"LlamaForCausalLM": "vllm.model_executor.models.llama:LlamaForCausalLM"})

# (rule id, release, refused line, its env, the line flipped, its env, catalog model or shape-X)
CASES = [
    (RID, rel, SMOL + [FLAG, json.dumps({"synth": "synth"})], {}, SMOL + [FLAG, GOOD], {}, None)
    for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")
] + [
    (RID, "0.34.0", SMOL + [FLAG, json.dumps({"LlamaForCausalLM": "a:b:c"})], {}, SMOL + [FLAG, GOOD], {}, None),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines the rule must leave (release, line, env, catalog model or shape-X); the engine oracle judges them
NOT_REFUSED = [
    ("0.34.0", SMOL + [FLAG, "{}"], {}, None),
    ("0.33.0", SMOL + [FLAG, GOOD], {}, None),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)


@pytest.mark.parametrize("release,line,env,model", NOT_REFUSED)
def test_the_rule_leaves_these_lines(release, line, env, model):
    assert RID not in product(release, line, env, model)["rules"]


def test_the_rule_is_on_the_releases_that_validate():
    rule = RULES[RID]
    for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
        assert f"@{rel}" in rule.source_for("vllm", rel)
    assert bad_class_paths({"a": "x", "b": "m:C", "c": "a:b:c"}) == [("a", "x"), ("c", "a:b:c")]
    assert bad_class_paths({"a": "m:C"}) == [] and bad_class_paths(None) == []
