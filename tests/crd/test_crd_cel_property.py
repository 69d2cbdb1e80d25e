"""Property-based parity: for random mutations of the presets over the fields the hard-error rules
read, the set of rules CEL refuses with equals the set of CEL-expressible rules the Python checks
refuse with (both directions: no CEL false alarm, no CEL miss)."""
from __future__ import annotations

import os

import celpy  # noqa: F401 - a test dependency: missing means failed
import hypothesis
import pytest
from crd_helpers import DELETE, merge, preset_doc
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic import ValidationError

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import validate
from gpustack_k3.core.rules.registry import of_family
from gpustack_k3.crd.cel import NOT_IN_CEL  # noqa: E402
from tests.support.celeval import evaluate  # noqa: E402

CAT = load_catalog()
CEL_COVERED = {r.id for r in of_family("spec", "args") if r.severity == "error"} - set(NOT_IN_CEL)
VERSIONS = sorted({k for e in CAT.engines.values() for k in e.versions}) + ["0.0.0-unknown"]
DTYPES = sorted({d for e in CAT.engines.values() for v in e.versions.values() for d in v.kv_cache_dtypes}) + ["int3"]
DRAFTS = sorted({n for m in CAT.models.values() for f in m.engines.values() if f.draft
                 for n in (f.draft.modelscope, f.draft.config_name, f.draft.path)}) + ["/data/Kimi-K3-DSpark//", "", "my/draft"]
BACKENDS = ["FLASHINFER_MLA", "TRITON_MLA", "FLEX_ATTENTION", "CUTLASS_MLA", "FLASH_ATTN_MLA", "ROCM_AITER_MLA",
            "TOKENSPEED_MLA", "cutedsl_mla", "aiter", "tokenspeed_mla", "flashinfer"]


def opt(values):
    """A value, or DELETE (unset), or None (explicit null = unset)."""
    return st.one_of(st.just(DELETE), st.just(None), st.sampled_from(values))


def req(values):
    """A value or DELETE, for fields that are not Optional (null is refused by the model)."""
    return st.one_of(st.just(DELETE), st.sampled_from(values))


def section(**fields):
    return st.fixed_dictionaries({}, optional={k: v for k, v in fields.items()})


spec_patch = st.fixed_dictionaries({}, optional={
    "engine": section(version=opt(VERSIONS)),
    "model": section(name=req(["kimi-k3", "smollm2-135m", "llama"])),
    "parallel": section(tp=opt([1, 2, 3, 4, 8, 16]), pp=opt([1, 2]), dp=opt([1, 2, 4]), dcp=opt([1, 2, 3, 4, 8]),
                        ep=opt([8]), expertParallel=opt([True])),
    "hardware": section(gpuType=req(["b300", "gb300", "h200", "cpu", "a100"]), gpuCount=req([1, 4, 8, 16])),
    # out-of-range fractions and ratios are schema errors now (tests/crd/test_crd_schema.py), not CEL rules
    "memory": section(fraction=opt([0.5, 0.92, 1]), kvCacheDtype=opt(DTYPES),
                      mambaFullMemoryRatio=opt([0.86, 2]), kvCacheBytes=opt([10 << 30])),
    "speculative": section(method=req(["dspark", "mtp", "eagle3", "ngram", "none"]), draftModel=opt(DRAFTS),
                           draftTensorParallelSize=opt([1, 2, 8]), attentionBackend=opt(BACKENDS),
                           extraConfig=req([{}, {"tensor_parallel_size": 2}, {"method": "x"}, {"foo": 1}])),
    "scheduling": section(maxModelLen=opt([4096, 262144, 1000000, 2000000]), maxNumSeqs=opt([32, 1024, 20000]),
                          maxNumBatchedTokens=opt([2048, 16384, 32768]), chunkedPrefill=opt([True, False]),
                          longPrefillTokenThreshold=opt([0, 4096, 300000]), maxPrefillTokens=opt([16384])),
    "sglang": section(decodeAttentionBackend=opt(BACKENDS), symmMem=opt([True])),
    "vllm": section(moeBackend=opt(["auto"]), enforceEager=opt([True]), attentionBackend=opt(BACKENDS)),
    "env": st.sampled_from([DELETE, {}, {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
                            {"SGLANG_RAGGED_VERIFY_MODE": "compact"}, {"SGLANG_RAGGED_VERIFY_MODE": "static"}]),
})


@pytest.fixture(autouse=True, scope="module")
def _compiled(crd):
    """Compile every rule before hypothesis runs (the CEL parser raises the recursion limit once)."""
    evaluate(crd, preset_doc(CAT.default_preset))


@settings(max_examples=int(os.environ.get("GPUSTACK_K3_CEL_EXAMPLES", "60")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(preset=st.sampled_from(sorted(CAT.presets)), patch=spec_patch)
def test_cel_and_python_refuse_the_same_rules(crd, preset, patch):
    doc = preset_doc(preset)
    doc["spec"] = merge(doc["spec"], patch)
    try:
        model = DeploymentDocument.model_validate(doc)
    except ValidationError:
        hypothesis.assume(False)
        return
    py = {f.rule for f in validate(model) if f.severity == "error"} & CEL_COVERED
    if model.spec.roles:
        # a document with roles is checked per role by the CLI and the operator; the CRD's spec rules stand aside
        # for it (gpustack_k3/crd/cel.py ROLES_PRESENT): CEL refuses none of them
        py = set()
    results = evaluate(crd, doc)
    assert not [r for r in results if r.error], [(r.message, r.error) for r in results if r.error]
    assert {r.rule_id for r in results} == py, f"spec={doc['spec']}"
