"""The schema family: field bounds on the spec model. The CLI reads a violation as unusable input (exit 2, naming
the field); the operator reports it as findings of rule spec.schema."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from gpustack_k3.core.rules import RULES, schema_findings
from tests.support.documents import merge

from .conftest import preset_doc

# a document the model refuses -> the field the finding names
SCHEMA_CASES = [
    ({"memory": {"fraction": -0.5}}, "spec.memory.fraction"),
    ({"memory": {"mambaFullMemoryRatio": 0}}, "spec.memory.mambaFullMemoryRatio"),
    ({"parallel": {"tp": 0}}, "spec.parallel.tp"),
    ({"extraArgs": ["--x", 3]}, "spec.extraArgs[1]"),
]


def raw(patch: dict) -> dict:
    return merge(preset_doc("vllm-seed").model_dump(mode="json", exclude_none=True), {"spec": patch})


@pytest.mark.parametrize("patch,field", SCHEMA_CASES)
def test_schema_rule_fires_naming_the_field(patch, field):
    found = schema_findings(raw(patch))
    assert [f.field for f in found] == [field]
    assert found[0].rule == "spec.schema" and found[0].severity == "error"
    assert found[0].source == RULES["spec.schema"].source and found[0].fix == RULES["spec.schema"].fix


def test_schema_rule_quiet_on_a_valid_document():
    assert schema_findings(raw({"memory": {"fraction": 1.0, "mambaFullMemoryRatio": 0.5}})) == []


def test_operator_reports_schema_findings():
    from gpustack_k3.operator.hooks import validate

    found = validate(raw({"memory": {"fraction": -0.5}}))
    assert [(f.rule, f.field) for f in found] == [("spec.schema", "spec.memory.fraction")]


@pytest.mark.parametrize("patch,field", SCHEMA_CASES[:3])
def test_cli_exits_2_naming_the_field(tmp_path, patch, field):
    path = tmp_path / "doc.yaml"
    path.write_text(yaml.safe_dump(raw(patch)))
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "validate", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert field in p.stderr
