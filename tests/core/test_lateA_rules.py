"""The rules of gpustack_k3/core/rules/vllm_checks_lateA.py: --show-hidden-metrics-for-version that is not a PEP 440
version is refused where the release's ObservabilityConfig parses it (0.28.0 and later), left alone on 0.11.0 (no
config-time validator) and for a valid version; elastic EP with hybrid LB whose local DP size --nnodes infers is
refused (0.33.0, 0.34.0), left alone where the inferred size is 1 or the whole DP size. tests/engine_oracle/test_lateA_rules_oracle.py has each release judge
the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_lateA import invalid_version
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip

RID = "vllm-show-hidden-metrics-version-invalid"
HYB = "vllm-elastic-ep-no-hybrid-lb-nnodes"
LATEA_DIRECT = {RID, HYB}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

DENSE = ["/models/shape-gqa-dense", "-tp", "8", "--max-num-batched-tokens", "2048"]   # the line of the late miss
SMOL = ["/models/smollm2-hf"]
FLAG = "--show-hidden-metrics-for-version"
ELASTIC = ["--enable-expert-parallel", "--enable-elastic-ep", "--enable-eplb"]
NODES = ["/models/shape-mla-moe", "--nnodes", "2", "--node-rank", "0", "-dp", "16"]   # 8 local DP ranks inferred

# (rule id, release, refused line, its env, the line flipped, its env, catalog model or shape-X)
CASES = [
    (RID, "0.34.0", DENSE + [FLAG, "auto"], {}, DENSE + [FLAG, "0.33"], {}, "shape-gqa-dense"),
    (RID, "0.33.0", DENSE + [FLAG, "auto"], {}, DENSE + [FLAG, "0.32"], {}, "shape-gqa-dense"),
    (RID, "0.29.0", SMOL + [FLAG, "latest"], {}, SMOL + [FLAG, "0.28"], {}, None),
    (RID, "0.28.0", SMOL + [FLAG, "0.7-beta!"], {}, SMOL + [FLAG, "0.27"], {}, None),
    (HYB, "0.34.0", NODES + ELASTIC + ["--data-parallel-hybrid-lb"], {}, NODES + ELASTIC, {}, "shape-mla-moe"),
    (HYB, "0.33.0", NODES + ELASTIC + ["--data-parallel-hybrid-lb"], {}, NODES + ELASTIC, {}, "shape-mla-moe"),
    (HYB, "0.34.0", NODES + ELASTIC + ["--data-parallel-start-rank", "0"], {}, NODES + ELASTIC, {}, "shape-mla-moe"),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines the rule must leave (release, line, env, catalog model or shape-X); the engine oracle judges them
NOT_REFUSED = [
    ("0.11.0", SMOL + [FLAG, "auto"], {}, None),        # 0.11.0 validates nothing at config time
    ("0.34.0", SMOL + [FLAG, "v0.7"], {}, None),        # PEP 440 allows the v prefix
    ("0.34.0", SMOL + [FLAG, "0.33.0.post1"], {}, None),
    ("0.33.0", SMOL + [FLAG, "None"], {}, None),        # optional_type reads "None" as no value
    # one DP rank per node inferred: hybrid LB switches to external LB
    ("0.34.0", ["/models/shape-mla-moe", "--nnodes", "2", "--node-rank", "0", "-dp", "2", "-tp", "8"] + ELASTIC
     + ["--data-parallel-hybrid-lb"], {}, "shape-mla-moe"),
    # the local size given: the table's entry vllm-elastic-ep-no-hybrid-lb judges it, not this rule
    ("0.34.0", NODES + ELASTIC + ["--data-parallel-hybrid-lb", "--data-parallel-size-local", "16"], {}, "shape-mla-moe"),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)


@pytest.mark.parametrize("release,line,env,model", NOT_REFUSED)
def test_the_rules_leave_these_lines(release, line, env, model):
    got = product(release, line, env, model)["rules"]
    assert RID not in got and HYB not in got, got


def test_the_rule_is_on_the_releases_that_validate():
    rule = RULES[RID]
    for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
        assert f"@{rel}" in rule.source_for("vllm", rel)
    assert [v for v in ("auto", "latest", "", "0.7-beta!") if invalid_version(v)] == ["auto", "latest", "", "0.7-beta!"]
    assert not any(invalid_version(v) for v in ("0.7", "v0.33", "1.0.0rc1", " 0.7 ", None))
