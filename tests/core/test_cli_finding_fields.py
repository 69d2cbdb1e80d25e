"""Issue 33 (minor): a finding names a field that exists. A role's finding of a shared section (spec.engine,
spec.model, ...) is the shared field, not ``spec.roles[i].engine.image``, which no schema has."""
from __future__ import annotations

import re

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import validate
from tests.contract.test_field_coverage import LEAVES


def _exists(field: str) -> bool:
    """``field`` is a leaf of the document schema or a section holding leaves (``spec.model``), list indexes and
    map keys of a free-form field (``spec.env.X``) allowed."""
    key = re.sub(r"\[\d+\]", "[]", field)
    return any(p == key or p.startswith(key + ".") or key.startswith(p + ".") for p in LEAVES) or key == "spec"


@pytest.mark.parametrize("preset", sorted(load_catalog().presets))
def test_every_finding_of_a_preset_names_a_field_of_the_schema(preset):
    doc = DeploymentDocument.model_validate(load_catalog().presets[preset].document)
    bad = sorted({f.field for f in validate(doc) if f.field.startswith("spec") and not _exists(f.field)})
    assert not bad, f"{preset}: findings name fields no schema has: {bad}"


def test_a_roles_shared_field_finding_names_the_shared_field():
    doc = DeploymentDocument.model_validate(load_catalog().presets["kimi-k3-b300-1p1d"].document)
    fields = {f.field for f in validate(doc) if f.rule == "engine-image"}
    assert fields == {"spec.engine.image"}, fields
