"""The CRD's structural schema, generated from DeploymentSpec: shape, ranges, enums, and agreement
with the pydantic model on the presets and on a table of bad documents."""
from __future__ import annotations

import types
import typing

import jsonschema
import pytest
from crd_helpers import DELETE, preset_doc
from pydantic import BaseModel, ValidationError

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, DeploymentSpec
from gpustack_k3.catalog import load_catalog
from gpustack_k3.crd.schema import to_jsonschema, walk


def _spec(root_schema):
    return root_schema["properties"]["spec"]


def _pydantic_fields(model: type[BaseModel], prefix: str = ""):
    """(path, FieldInfo, bare annotation) for every field of the model tree."""
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        union = typing.get_origin(ann) in (typing.Union, types.UnionType)
        bare = args[0] if (union and len(args) == 1) else ann
        yield f"{prefix}.{name}", info, bare
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            yield from _pydantic_fields(bare, f"{prefix}.{name}")
        elif typing.get_origin(bare) is list and isinstance(item := typing.get_args(bare)[0], type) \
                and issubclass(item, BaseModel):    # a list of objects (spec.roles[]): its fields too
            yield from _pydantic_fields(item, f"{prefix}.{name}[]")


def _node(schema, path):
    node = schema
    for part in path.strip(".").split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def test_schema_is_structural(root_schema):
    for path, node in walk(root_schema):
        assert "$ref" not in node and "anyOf" not in node and "oneOf" not in node, path
        assert node.get("type") or node.get("x-kubernetes-preserve-unknown-fields"), f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("additionalProperties") is not False, path
        assert "default" not in node, f"{path}: defaults stay with the catalog (unset = engine default)"


def test_every_model_field_is_in_the_schema_with_its_constraints(root_schema):
    spec = _spec(root_schema)
    seen = 0
    for path, info, bare in _pydantic_fields(DeploymentSpec):
        node = _node(spec, path)
        seen += 1
        optional = type(None) in typing.get_args(info.annotation)
        assert bool(node.get("nullable")) == optional, f"{path}: nullable must follow Optional"
        for m in info.metadata:
            for attr, key in (("ge", "minimum"), ("le", "maximum"), ("gt", "minimum"), ("lt", "maximum")):
                if getattr(m, attr, None) is not None:
                    assert node[key] == getattr(m, attr), f"{path}.{key}"
                    if attr in ("gt", "lt"):
                        assert node[f"exclusive{key.capitalize()}"] is True, path
            if getattr(m, "pattern", None):
                assert node["pattern"] == m.pattern, path
        if typing.get_origin(bare) is typing.Literal:
            assert node["enum"] == list(typing.get_args(bare)), f"{path}: enum"
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            assert node["type"] == "object" and "properties" in node, path
        if info.is_required():
            parent = _node(spec, path.rsplit(".", 1)[0]) if path.count(".") > 1 else spec
            assert path.rsplit(".", 1)[1] in parent.get("required", []), f"{path} must be required"
    assert seen > 60


def test_free_form_only_where_the_model_is_free_form(root_schema):
    """preserve-unknown-fields appears exactly under dict[str, Any] fields (attentionConfig,
    extraConfig); dict[str, str] fields and label maps are typed maps, tolerations typed objects."""
    spec = _spec(root_schema)
    free = {p for p, n in walk(spec) if n.get("x-kubernetes-preserve-unknown-fields")}
    expected = set()
    for path, _info, bare in _pydantic_fields(DeploymentSpec):
        ann = bare
        if typing.get_origin(ann) is list:
            ann = typing.get_args(ann)[0]
            path = path + "[]"
        if typing.get_origin(ann) is dict and typing.get_args(ann)[1] is typing.Any:
            expected.add(path)
    assert free == expected
    assert {".vllm.attentionConfig", ".speculative.extraConfig"} <= free
    assert _node(spec, ".placement.nodeSelector")["additionalProperties"]["type"] == "string"
    assert "key" in _node(spec, ".placement.tolerations")["items"]["properties"]
    for p in free:  # the form the API server accepts and CEL tolerates: a typed object, no subschema
        node = dict(walk(spec))[p]
        assert node["type"] == "object" and "properties" not in node and "additionalProperties" not in node
    assert _node(spec, ".env")["additionalProperties"] == {"type": "string"}


def test_roles_are_a_list_map_keyed_by_name(root_schema):
    """Role names are unique server-side (a list map), and server-side apply merges roles by name; the status
    roles and their groups likewise."""
    roles = _node(_spec(root_schema), ".roles")
    assert (roles["x-kubernetes-list-type"], roles["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    assert "name" in roles["items"]["required"]
    status = root_schema["properties"]["status"]["properties"]["roles"]
    assert status["x-kubernetes-list-map-keys"] == ["name"]
    assert status["items"]["properties"]["groups"]["x-kubernetes-list-map-keys"] == ["index"]


def test_crd_metadata_status_and_columns(crd, root_schema):
    spec = crd["spec"]
    assert spec["group"] == "k3.gpustack.ai" and spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == "k3deployments" and spec["names"]["kind"] == "K3Deployment"
    assert "k3dep" in spec["names"]["shortNames"]
    (ver,) = spec["versions"]
    assert ver["name"] == "v1alpha1" and ver["storage"] and ver["subresources"] == {"status": {}}
    cols = {c["name"]: c for c in ver["additionalPrinterColumns"]}
    assert {"Engine", "Phase", "Ready", "ColdStart", "Age"} <= set(cols)
    assert cols["Engine"]["jsonPath"] == ".spec.engine.name" and cols["Age"]["type"] == "date"
    assert cols["ColdStart"]["type"] == "number"
    status = root_schema["properties"]["status"]["properties"]
    assert {"phase", "conditions", "coldStart", "plan", "warnings", "endpoint", "observedGeneration"} <= set(status)
    for col in cols.values():  # every column points at a declared field
        path = col["jsonPath"].split("[")[0].strip(".").split(".")
        node = root_schema
        for part in path:
            node = node["properties"][part] if part != "metadata" else {"properties": {"creationTimestamp": {}}}
        assert node is not None, col


def test_crd_passes_kubernetes_validate_strict(crd):
    import kubernetes_validate as kv
    for version in ("1.30", "1.33"):
        kv.validate(crd, version, strict=True)


@pytest.mark.parametrize("name", list(load_catalog().presets))
@pytest.mark.parametrize("closed", [False, True], ids=["as-apiserver", "closed"])
def test_presets_match_the_crd_schema(root_schema, name, closed):
    schema = to_jsonschema(root_schema, closed=closed)
    jsonschema.Draft7Validator(schema).validate(preset_doc(name))


BAD = [
    ("tp zero", {"parallel": {"tp": 0}}),
    ("tp above 64", {"parallel": {"tp": 65}}),
    ("engine unknown", {"engine": {"name": "tgi"}}),
    ("engine missing", {"engine": DELETE}),
    ("num tokens above range", {"speculative": {"numTokens": 65}}),
    # a method's name is checked per release by rule spec-method-unsupported (CEL): the schema bounds its length only
    ("method name too long", {"speculative": {"method": "m" * 129}}),
    ("port zero", {"serving": {"port": 0}}),
    ("gpu count wrong type", {"hardware": {"gpuCount": "eight"}}),
    ("unknown field", {"parallel": {"tensorParallel": 8}}),
    ("bandwidth zero (exclusive minimum)", {"startup": {"storageBandwidthGiBps": 0}}),
    ("budget below minimum", {"startup": {"budgetSeconds": 10}}),
    ("secret env name pattern", {"secretEnv": [{"name": "1BAD", "secretName": "s", "key": "k"}]}),
    ("volume kind unknown", {"storage": {"model": {"kind": "nfs"}}}),
    ("env value not a string", {"env": {"A": 1}}),
    ("memory fraction negative", {"memory": {"fraction": -0.1}}),
    ("mamba ratio zero (exclusive minimum)", {"memory": {"mambaFullMemoryRatio": 0}}),
]


@pytest.mark.parametrize("label,patch", BAD, ids=[b[0] for b in BAD])
def test_bad_documents_refused_by_pydantic_and_closed_schema(root_schema, label, patch):
    doc = preset_doc("vllm-fixed", patch)
    with pytest.raises(ValidationError):
        DeploymentDocument.model_validate(doc)
    errors = list(jsonschema.Draft7Validator(to_jsonschema(root_schema, closed=True)).iter_errors(doc))
    assert errors, f"{label}: the CRD schema admits what the model refuses"
    if label != "unknown field":  # the API server prunes unknown fields instead of refusing them
        assert list(jsonschema.Draft7Validator(to_jsonschema(root_schema, closed=False)).iter_errors(doc)), label


def test_single_field_ranges_are_schema_bounds_not_cel(root_schema):
    """The memory fraction's [0, 1] and the Mamba ratio's > 0 are bounds of the model fields: the structural
    schema carries them and no CEL rule restates them (the fraction's CEL enumerated every version, model and GPU).
    0 itself is refused per release by rule vllm-config-bounds (vLLM 0.11.0 has no bound)."""
    mem = root_schema["properties"]["spec"]["properties"]["memory"]["properties"]
    assert mem["fraction"]["minimum"] == 0 and not mem["fraction"].get("exclusiveMinimum")
    assert "maximum" not in mem["fraction"]        # per engine and release: vllm-config-bounds, sglang-mem-fraction-above-one
    assert mem["mambaFullMemoryRatio"].get("exclusiveMinimum") in (True, 0)
    rules = root_schema["properties"]["spec"]["x-kubernetes-validations"]
    assert not [v for v in rules if "memory.fraction" in v["rule"]]
    assert not [v for v in rules if "self.memory.mambaFullMemoryRatio <" in v["rule"]
                or "self.memory.mambaFullMemoryRatio >" in v["rule"]]


def test_cli_crd_prints_the_generated_manifest():
    import yaml
    from click.testing import CliRunner

    from gpustack_k3.cli.crd_cmd import crd as crd_cmd
    from gpustack_k3.crd.manifest import crd_manifest, crd_yaml

    res = CliRunner().invoke(crd_cmd, [])
    assert res.exit_code == 0, res.output
    assert res.output == crd_yaml()
    assert res.output.startswith("# GENERATED FILE") and "python3 tools/generate.py" in res.output.splitlines()[1]
    assert yaml.safe_load(res.output) == crd_manifest()
    res = CliRunner().invoke(crd_cmd, ["--rules"])
    assert res.exit_code == 0 and "[rule dcp-divides-tp]" in res.output and "fixed-memory-exceeds-budget" in res.output
    res = CliRunner().invoke(crd_cmd, ["-o", "json"])
    import json

    assert json.loads(res.output) == crd_manifest()
