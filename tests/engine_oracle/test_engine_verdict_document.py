"""``validate --engine-verdict`` (issue 31 item 8; gpustack_k3/oracle/document.py): each line a document starts,
judged by its pinned release, beside the findings; a vLLM P/D document's pair too; a disagreement marked; an engine
refusal exits 1. Text lines of a document's verdict: unit tier; the release's verdicts: tier engine_oracle."""
from __future__ import annotations

import copy
import json

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3 import oracle
from tests.support import tiers


def test_a_documents_verdict_lists_each_role_and_the_pair():
    v = {"verdict": "refused", "release": "vllm-0.33.0", "type": "ValueError", "role": "decode",
         "message": "tp must divide", "where": "vllm/config/parallel.py:600",
         "lines": [{"role": "prefill", "verdict": "accepted"},
                   {"role": "decode", "verdict": "refused", "type": "ValueError", "message": "tp must divide",
                    "partial": "no topology flags"}],
         "pair": {"verdict": "not_decidable", "reason": "x"}}
    lines = oracle.text_lines(v, oracle.compare(False, v))
    assert lines[0].endswith("(role decode)") and "REFUSED ValueError: tp must divide" in lines[0]
    assert lines[1] == "  prefill: accepted"
    assert lines[2].startswith("  decode: REFUSED ValueError: tp must divide") and "[partial" in lines[2]
    assert lines[3] == "  prefill/decode pair: not decidable (x)"
    assert lines[-1].startswith("  DISAGREEMENT (miss)")


def _ready() -> None:
    try:
        oracle.warm("vllm-0.33.0")
    except oracle.EngineVerdictUnavailable as exc:
        tiers.unavailable(f"engine oracle vllm-0.33.0: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")


def _validate(args):
    from gpustack_k3.cli.core_cmds import validate

    return CliRunner().invoke(validate, args)


def _single_doc(tmp_path, dcp: int) -> str:
    from gpustack_k3.catalog import load_catalog

    data = copy.deepcopy(load_catalog().presets["vllm-fixed"].document)
    data["spec"]["engine"]["version"] = "0.33.0"
    data["spec"]["parallel"] = {"tp": 8, "dcp": dcp}
    p = tmp_path / "doc.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


@pytest.mark.engine_oracle
def test_validate_engine_verdict_judges_each_role_and_the_pair():
    _ready()
    r = _validate(["--preset", "kimi-k3-b300-1p1d", "--engine-verdict", "-o", "json"])
    d = json.loads(r.stdout)
    assert r.exit_code == 0, r.output
    v = d["engine_verdict"]
    assert v["verdict"] == "accepted" and v["release"] == "vllm-0.33.0", v
    assert [(ln["role"], ln["verdict"]) for ln in v["lines"]] == [("prefill", "accepted"), ("decode", "accepted")]
    # the judged lines are the launch's own: each role's kv_role from its topology flags
    assert any('"kv_role":"kv_producer"' in t for t in v["lines"][0]["argv"])
    assert any('"kv_role":"kv_consumer"' in t for t in v["lines"][1]["argv"])
    assert v["pair"]["verdict"] == "accepted" and d["engine_comparison"]["agreement"] == "agree"


@pytest.mark.engine_oracle
def test_validate_engine_verdict_refusal_exits_1_beside_our_refusal(tmp_path):
    _ready()
    r = _validate([_single_doc(tmp_path, 3), "--engine-verdict", "-o", "json"])
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    v = d["engine_verdict"]
    assert v["verdict"] == "refused" and "divisible by dcp_size" in v["message"], v
    assert v["where"].startswith("vllm/config/parallel.py:") and v["lines"][0]["role"] == "serve"
    assert d["ok"] is False and d["engine_comparison"] == {"agreement": "agree", "engine_exit": 1}


@pytest.mark.engine_oracle
def test_validate_engine_verdict_marks_a_miss_and_exits_1(tmp_path, monkeypatch):
    """Our rules made to pass the document (as a rule that misses would): the engine's refusal is shown as a
    disagreement and still exits 1."""
    import gpustack_k3.core.rules as rules

    _ready()
    monkeypatch.setattr(rules, "validate", lambda doc, **kw: [])
    r = _validate([_single_doc(tmp_path, 3), "--engine-verdict"])
    assert r.exit_code == 1, r.output
    assert "REFUSED" in r.output and "DISAGREEMENT (miss): the engine refuses what gpustack-k3 passes" in r.output


@pytest.mark.engine_oracle
def test_validate_engine_verdict_on_a_topology_we_refuse_judges_each_roles_own_arguments():
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.oracle.document import document_verdict
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    _ready()
    data = copy.deepcopy(load_catalog().presets["kimi-k3-b300-1p1d"].document)
    data["spec"]["engine"]["version"] = "0.33.0"
    data["spec"]["roles"][1]["parallel"] = {"tp": 8, "dcp": 3}
    v = document_verdict(DeploymentDocument.model_validate(data))
    assert v["verdict"] == "refused" and v["role"] == data["spec"]["roles"][1]["name"], v
    assert all(ln.get("partial") for ln in v["lines"]) and "pair" not in v
    assert [ln["verdict"] for ln in v["lines"]] == ["accepted", "refused"]


def test_an_image_build_document_is_not_judged_by_another_release():
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.oracle.document import document_verdict
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    data = copy.deepcopy(load_catalog().presets["vllm-fixed"].document)
    assert data["spec"]["engine"]["version"] == "kimi-k3"
    v = document_verdict(DeploymentDocument.model_validate(data))
    assert v["verdict"] == "not_decidable" and v["reason"] == "no-release-code", v
    assert v["lines"][0]["verdict"] == "not_decidable"
