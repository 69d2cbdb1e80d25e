"""`explain` answers for every rule id a command or the operator prints: the ids are collected from what validate,
check-args, render, doctor and coldstart print over the test corpora (presets, fixture specs, invalid examples,
the rule tables' documents, the argv corpora, tests/fixtures/logs) and from the operator's conditions and events,
then each is explained (exit 0, with why, fix, the versions it applies to and a source per version)."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import cli
from gpustack_k3.core.rules import RULES

from .conftest import preset_doc
from .test_flags import SEED_SGLANG, SEED_VLLM
from .test_rules import CASES
from .test_rules_render import RENDER_CASES
from .test_rules_topology import TOPOLOGY_CASES
from .test_schema_rule import SCHEMA_CASES, raw

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "tests" / "fixtures" / "logs"
SPECS = sorted((REPO / "tests" / "render" / "fixtures" / "specs").glob("*.yaml"))
INVALID = sorted((REPO / "manifests" / "examples").glob("invalid-*.yaml"))
ID_IN_TEXT = re.compile(r"\[([a-z][a-z0-9.-]*[a-z0-9])\]")
ARGV = [("vllm", SEED_VLLM), ("vllm", [*SEED_VLLM, "-dcp", "8"]), ("sglang", SEED_SGLANG),
        ("sglang", [*SEED_SGLANG, "--decode-attention-backend", "trtllm_mla"]),
        ("vllm", [*SEED_VLLM, "--no-such-flag", "1"])]


def ids_in(text: str) -> set[str]:
    """Rule ids in JSON findings ("rule": ...) and in text findings ([rule-id] field: ...)."""
    out = set(re.findall(r'"rule": "([^"]+)"', text))
    out |= {m for m in ID_IN_TEXT.findall(text) if m in RULES or "-" in m}
    return out


def invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output)
    return res.output


def documents(tmp: Path) -> list[Path]:
    """Fixture specs, invalid examples, and every firing document of the spec and render rule tables."""
    out = [*SPECS, *INVALID]
    cases = [(p, patch) for (p, patch), _ in CASES.values()]
    cases += [("vllm-fixed", {"storage": fires}) for fires, _ in RENDER_CASES.values()]
    for i, (preset, patch) in enumerate(cases):
        path = tmp / f"case-{i}.yaml"
        path.write_text(yaml.safe_dump(preset_doc(preset, patch).model_dump(mode="json", exclude_none=True)))
        out.append(path)
    for i, (fire, _) in enumerate(TOPOLOGY_CASES.values()):   # the topology rules' documents (not their tweaks)
        d = fire()
        if isinstance(d, DeploymentDocument):
            path = tmp / f"topology-{i}.yaml"
            path.write_text(yaml.safe_dump(d.model_dump(mode="json", exclude_none=True)))
            out.append(path)
    return out


def printed_by_commands(tmp: Path) -> set[str]:
    found: set[str] = set()
    docs = documents(tmp)
    for name in load_catalog().presets:
        found |= ids_in(invoke("validate", "--preset", name, "-o", "json"))
        found |= ids_in(invoke("render", "--preset", name, "--target", "all", "--out", str(tmp / "out" / name)))
    for i, path in enumerate(docs):
        found |= ids_in(invoke("validate", str(path), "-o", "json"))
        found |= ids_in(invoke("validate", str(path), "--strict"))
        found |= ids_in(invoke("render", str(path), "--target", "all", "--out", str(tmp / "out" / f"doc-{i}")))
    for engine, argv in ARGV:
        found |= ids_in(invoke("check-args", "--engine", engine, "-o", "json", "--", *argv))
    for log in sorted(LOGS.glob("*.log")):
        found |= ids_in(invoke("doctor", str(log), "-o", "json"))
        found |= ids_in(invoke("coldstart", str(log), "-o", "json"))
    return found


def printed_by_the_operator() -> set[str]:
    from gpustack_k3.operator import decide as d
    from gpustack_k3.operator import hooks

    found: set[str] = set()
    docs = [preset_doc(p, patch).model_dump(mode="json", exclude_none=True) for (p, patch), _ in CASES.values()]
    docs += [raw(patch) for patch, _ in SCHEMA_CASES]
    docs += [load_catalog().presets[n].document for n in load_catalog().presets]
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    for doc in docs:
        cr = {**doc, "metadata": {"name": "kimi", "namespace": "llm", "uid": "u", "generation": 1}}
        dec = d.decide(cr, d.Observed(), validate=hooks.validate, render=hooks.render, plan=hooks.plan, now=now)
        texts = [c["message"] for c in dec.status.get("conditions", [])] + list(dec.status.get("warnings", []))
        texts += [a.message for a in dec.actions if isinstance(a, d.Emit)]
        for t in texts:
            found |= {m for m in ID_IN_TEXT.findall(t)}
    return found


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict[str, set[str]]:
    return {"commands": printed_by_commands(tmp_path_factory.mktemp("explain")), "operator": printed_by_the_operator()}


def test_the_corpora_reach_every_family(printed):
    every = printed["commands"] | printed["operator"]
    fams = {RULES[i].family for i in every if i in RULES}
    assert fams == {"spec", "args", "render", "log", "schema", "topology"}
    assert {"spec.schema", "jit-after-ready", "coldstart-failed", "render-model-emptydir",
            "vllm-dcp-with-dspark", "extra-arg-unknown"} <= every
    assert "spec.schema" in printed["operator"]


def test_explain_answers_every_printed_id(printed):
    every = sorted(printed["commands"] | printed["operator"])
    unknown = [i for i in every if i not in RULES]
    assert unknown == [], f"printed ids the registry does not know: {unknown}"
    for rid in every:
        res = CliRunner().invoke(cli, ["explain", rid, "-o", "json"], catch_exceptions=False)
        assert res.exit_code == 0, (rid, res.output)
        d = json.loads(res.output)
        assert d["rule"] == rid and d["why"] and d["fix"] and d["source"], rid
        assert d["applies_to"] and all(s["source"] for s in d["sources"]), rid
        text = CliRunner().invoke(cli, ["explain", rid], catch_exceptions=False)
        assert text.exit_code == 0 and f"{rid} (" in text.output and "source:" in text.output


def test_explain_shows_the_source_per_engine_version():
    res = CliRunner().invoke(cli, ["explain", "vllm-dcp-with-dspark"], catch_exceptions=False)
    assert "applies to: vllm kimi-k3, vllm 0.28.0" in res.output
    assert "vllm kimi-k3: docs/sources.md#vllm-dcp-dspark" in res.output
    assert "vllm 0.28.0: vllm config/speculative.py:1050-1057@0.28.0" in res.output
    d = json.loads(CliRunner().invoke(cli, ["explain", "sglang-kimi-k3-dcp-decode-backend", "-o", "json"]).output)
    per = {s["version"]: s["source"] for s in d["sources"]}
    assert "@0.5.22" in per["0.5.22"] and "@0.5.23" in per["0.5.23"]
    listing = CliRunner().invoke(cli, ["explain", "-o", "json"]).output
    from gpustack_k3.probe.catalog import load_findings

    assert {i["rule"] for i in json.loads(listing)} == set(RULES) | set(load_findings())   # and what probe prints
