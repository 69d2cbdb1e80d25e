"""tools/check_lws_crds.py, the check of the rendered LWS/DS objects against the upstream LWS CRDs: its conversion
of a structural schema, its differential against tests/support/lws_schema.py and its exit codes, on small CRDs
written here (our own text, not upstream's), so every check can fail. Then, where the upstream v0.10.0 CRDs lie
beside the checkout (shared/lws-crds/v0.10.0, see its SOURCE.txt), the real run: every rendered object passes."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import lws_schema
from tools import check_lws_crds as tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "check_lws_crds.py"
INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}

# A small LeaderWorkerSet-shaped structural schema with one field of each kind the conversion handles.
LWS_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {
            "type": "object", "required": ["leaderWorkerTemplate"],
            "properties": {
                "replicas": {"type": "integer", "format": "int32", "minimum": 0},
                "startupPolicy": {"type": "string", "enum": ["LeaderCreated", "LeaderReady"]},
                "leaderWorkerTemplate": {
                    "type": "object", "required": ["workerTemplate"],
                    "properties": {
                        "size": {"type": "integer", "format": "int32"},
                        "workerTemplate": {"type": "object", "properties": {
                            "metadata": {"type": "object", "properties": {
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
                "maxSurge": INT_OR_STRING,
                "note": {"type": "string", "nullable": True},
                "claim": {"type": "object", "x-kubernetes-embedded-resource": True,
                          "x-kubernetes-preserve-unknown-fields": True},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"],
                                    "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            }},
    }}
DS_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["roles"],
                 "x-kubernetes-validations": [{"rule": "self.roles.size() >= 2", "message": "two roles at least"}],
                 "properties": {"roles": {"type": "array", "items": {
                     "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}}}}


def crd(kind: str, group: str, schema: dict, *, served: bool = True) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.lower()}s.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": f"{kind.lower()}s", "singular": kind.lower()},
                     "versions": [{"name": "v1", "served": served, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def write_crds(d: Path, lws: dict = LWS_SCHEMA, ds: dict = DS_SCHEMA) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "lws.yaml").write_text(yaml.safe_dump(crd("LeaderWorkerSet", "leaderworkerset.x-k8s.io", lws)))
    (d / "ds.yaml").write_text(yaml.safe_dump(crd("DisaggregatedSet", "disaggregatedset.x-k8s.io", ds)))
    return d


@pytest.fixture
def crds(tmp_path):
    return tool.load_crds(write_crds(tmp_path / "crds"))


def lws(**spec) -> dict:
    base = {"replicas": 2, "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"metadata": {"labels": {"a": "b"}},
                                                                   "spec": {"containers": [{"name": "c"}]}}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "x", "namespace": "llm", "labels": {"k": "v"}}, "spec": {**base, **spec}}


def test_a_valid_object_passes_and_unknown_fields_are_refused_with_their_path(crds):
    assert tool.validate(crds, lws()) == []
    bad = lws(bogus=1)
    bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["generateName"] = "x-"
    found = tool.validate(crds, bad)
    assert found == [
        "spec: Additional properties are not allowed ('bogus' was unexpected)",
        ("spec.leaderWorkerTemplate.workerTemplate.metadata: Additional properties are not allowed "
         "('generateName' was unexpected)")]


def test_preserve_unknown_fields_keeps_them_and_the_root_metadata_is_the_servers(crds):
    o = lws()
    o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["anything"] = {"goes": [1]}
    o["metadata"]["annotations"] = {"x": "y"}
    assert tool.validate(crds, o) == []


@pytest.mark.parametrize("value", [1, "10%"])
def test_int_or_string_accepts_both(crds, value):
    assert tool.validate(crds, lws(maxSurge=value)) == []


@pytest.mark.parametrize("value", [1.5, [1], True])
def test_int_or_string_refuses_the_rest_naming_the_path(crds, value):
    (msg,) = tool.validate(crds, lws(maxSurge=value))
    assert msg.startswith("spec.maxSurge: ") and "not valid under any of the given schemas" in msg


def test_an_enum_violation_is_named_with_its_path(crds):
    assert tool.validate(crds, lws(startupPolicy="Eventually")) == [
        "spec.startupPolicy: 'Eventually' is not one of ['LeaderCreated', 'LeaderReady']"]


def test_a_missing_required_field_is_named(crds):
    o = lws()
    del o["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert tool.validate(crds, o) == ["spec.leaderWorkerTemplate: 'workerTemplate' is a required property"]


def test_bounds_and_the_int32_format_are_ranges(crds):
    assert tool.validate(crds, lws(replicas=-1)) == ["spec.replicas: -1 is less than the minimum of 0"]
    assert tool.validate(crds, lws(replicas=2**31)) == [
        f"spec.replicas: {2**31} is greater than the maximum of {2**31 - 1}"]


def test_nullable_embedded_resources_and_list_types(crds):
    assert tool.validate(crds, lws(note=None)) == []
    assert tool.validate(crds, lws(claim={"apiVersion": "v1", "kind": "PersistentVolumeClaim", "x": 1})) == []
    assert tool.validate(crds, lws(claim={"spec": {}})) == [
        "spec.claim: 'apiVersion' is a required property", "spec.claim: 'kind' is a required property"]
    assert tool.validate(crds, lws(ports=[{"name": "a", "port": 1}, {"name": "a", "port": 2}])) == [
        "spec.ports[1]: duplicate key {'name': 'a'} in a list of type map"]
    assert tool.validate(crds, lws(tags=["x", "y", "x"])) == ["spec.tags[2]: duplicate value 'x' in a list of type set"]
    assert tool.validate(crds, lws(ports=[{"name": "a"}, {"name": "b"}], tags=["x", "y"])) == []


def test_the_crds_cel_rules_are_evaluated(crds):
    ds = {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet", "metadata": {"name": "d"},
          "spec": {"roles": [{"name": "prefill"}, {"name": "decode"}]}}
    assert tool.validate(crds, ds) == []
    ds["spec"]["roles"].pop()
    assert tool.validate(crds, ds) == ["spec: CEL rule 'self.roles.size() >= 2' failed: two roles at least"]


def test_an_unserved_api_version_is_refused(crds):
    o = lws()
    o["apiVersion"] = "leaderworkerset.x-k8s.io/v2"
    assert tool.validate(crds, o) == [("apiVersion: 'leaderworkerset.x-k8s.io/v2' is not a served version of "
                                       "leaderworkerset.x-k8s.io (v1)")]


# ------------------------------------------------------------------------------------------------ differential

def _transcription(**overrides) -> dict:
    """A transcription of LWS_SCHEMA's spec in lws_schema's style, with ``overrides`` (path -> node or None)."""
    obj = lws_schema._obj
    spec = {
        "replicas": {**lws_schema.INT32, "minimum": 0},
        "startupPolicy": {"enum": ["LeaderCreated", "LeaderReady"]},
        "leaderWorkerTemplate": obj({"size": lws_schema.INT32, "workerTemplate": {"type": "object"}},
                                    required=("workerTemplate",)),
        "maxSurge": lws_schema.INT_OR_STRING,
        "note": {"type": "string"},
        "claim": {"type": "object"},
        "ports": {"type": "array", "items": obj({"name": {"type": "string"}, "port": {"type": "integer"}},
                                                required=("name",))},
        "tags": {"type": "array", "items": {"type": "string"}},
    }
    for path, node in overrides.items():
        *parents, last = path.split(".")
        where = spec
        for p in parents:
            where = where[p]["properties"]
        if node is None:
            del where[last]
        else:
            where[last] = node
    return {"LeaderWorkerSet": obj({"apiVersion": {"const": "leaderworkerset.x-k8s.io/v1"},
                                    "kind": {"const": "LeaderWorkerSet"}, "metadata": {"type": "object"},
                                    "spec": obj(spec, required=("leaderWorkerTemplate",))},
                                   required=("apiVersion", "kind", "metadata"))}


def test_a_faithful_transcription_has_no_mismatch(crds):
    checked, mismatches = tool.differential(_transcription(), crds)
    assert mismatches == [] and checked == 19      # every node of the transcription: 5 + 8 + 2 + 3 + 1


@pytest.mark.parametrize(("override", "expected"), [
    ({"startupPolicy": {"enum": ["LeaderCreated"]}},
     ("spec.startupPolicy", "enum", ["LeaderCreated"], ["LeaderCreated", "LeaderReady"])),
    ({"leaderWorkerTemplate.size": {**lws_schema.INT32, "minimum": 1}},
     ("spec.leaderWorkerTemplate.size", "minimum", 1, -(2**31))),
    ({"replicas": {"type": "string"}}, ("spec.replicas", "type", ["string"], ["integer"])),
    ({"maxSurge": {"type": "integer"}}, ("spec.maxSurge", "type", ["integer"], ["integer", "string"])),
    ({"leaderWorkerTemplate": lws_schema._obj({"size": lws_schema.INT32, "workerTemplate": {"type": "object"}})},
     ("spec.leaderWorkerTemplate", "required", [], ["workerTemplate"])),
    ({"subdomain": {"type": "string"}}, ("spec.subdomain", "absent upstream", "declared", None)),
    ({"tags": None}, ("spec.tags", "not transcribed", None, "declared")),
    ({"leaderWorkerTemplate.workerTemplate": lws_schema._obj({"spec": lws_schema._obj({})})},
     ("spec.leaderWorkerTemplate.workerTemplate.spec", "unknown fields", "refused", "preserved")),
])
def test_each_transcription_mismatch_is_reported_with_its_path(crds, override, expected):
    _, mismatches = tool.differential(_transcription(**override), crds)
    got = [(m["path"], m["mismatch"], m["transcription"], m["upstream"]) for m in mismatches]
    assert expected in got, got


# -------------------------------------------------------------------------------------- input and exit codes

def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], check=False, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=300)


@pytest.mark.parametrize(("case", "needle"), [
    ("missing", "no such directory"),
    ("not-yaml", "not YAML"),
    ("no-ds", "no CustomResourceDefinition of DisaggregatedSet"),
    ("unserved", "has no served version with an openAPIV3Schema"),
])
def test_unusable_crd_input_exits_2_naming_it(tmp_path, case, needle):
    d = tmp_path / "crds"
    if case != "missing":
        write_crds(d)
    if case == "not-yaml":
        (d / "ds.yaml").write_text("spec: [unclosed\n")
    elif case == "no-ds":
        (d / "ds.yaml").unlink()
    elif case == "unserved":
        (d / "ds.yaml").write_text(yaml.safe_dump(crd("DisaggregatedSet", "disaggregatedset.x-k8s.io", DS_SCHEMA,
                                                      served=False)))
    r = run("--crds", str(d))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith("error: ") and needle in r.stderr and "Traceback" not in r.stderr


def structural(t: dict) -> dict:
    """A structural schema from a transcription node (our own CRD for the end-to-end runs below): closed objects
    become plain ones (structural pruning), opaque objects keep unknown fields, int-or-string and enums carry
    over. The LWS webhook's and the DS CEL rules are not schema, so they are not here."""
    if "anyOf" in t:
        return {"x-kubernetes-int-or-string": True}
    out = {k: t[k] for k in ("type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern",
                             "minItems", "maxItems") if k in t}
    if "const" in t or "enum" in t:
        out["type"] = "string"
    if "properties" in t:
        out["properties"] = {k: structural(v) for k, v in t["properties"].items()}
        if t.get("required"):
            out["required"] = list(t["required"])
    elif t.get("type") == "object":
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "items" in t:
        out["items"] = structural(t["items"])
    return out


def _topology_roles() -> dict[str, int]:
    """Every catalog preset with roles -> its role count: the run renders one LeaderWorkerSet per role and one
    DisaggregatedSet per preset."""
    from gpustack_k3.catalog import load_catalog

    return {name: len(pr.document["spec"]["roles"]) for name, pr in load_catalog().presets.items()
            if pr.document["spec"].get("roles")}


def test_the_run_renders_every_topology_preset_in_both_forms_and_passes_against_a_matching_crd(tmp_path):
    d = write_crds(tmp_path / "crds", structural(lws_schema.LEADER_WORKER_SET),
                   structural(lws_schema.DISAGGREGATED_SET))
    r = run(env={tool.ENV: str(d)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    out = json.loads(r.stdout)
    roles = _topology_roles()
    n = len(roles) + sum(roles.values())
    assert len(roles) >= 5 and out["summary"] == {"objects": n, "passed": n, "failed": 0, "mismatches": 0, "ok": True}
    assert {(o["preset"], o["form"]) for o in out["objects"]} == {(p, f) for p in roles for f in tool.FORMS}
    assert sorted(o["kind"] for o in out["objects"]) == ["DisaggregatedSet"] * len(roles) + ["LeaderWorkerSet"] * sum(roles.values())
    assert out["differential"]["paths_checked"] > 60
    assert {f["pinned"] for f in out["crds"]["files"]} == {False} and out["crds"]["source_tag"] is None


def test_a_rendered_field_the_crd_lacks_fails_the_objects_and_the_differential(tmp_path):
    lws_crd = structural(lws_schema.LEADER_WORKER_SET)
    del lws_crd["properties"]["spec"]["properties"]["startupPolicy"]
    ds_crd = structural(lws_schema.DISAGGREGATED_SET)
    ds_crd["properties"]["spec"]["properties"]["roles"]["items"]["properties"]["spec"] = copy.deepcopy(
        lws_crd["properties"]["spec"])
    r = run("--crds", str(write_crds(tmp_path / "crds", lws_crd, ds_crd)))
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    roles = _topology_roles()
    assert out["summary"]["failed"] == len(roles) + sum(roles.values()) and not out["summary"]["ok"]
    lws_obj = next(o for o in out["objects"] if o["name"] == "kimi-k3-1p1d-decode")
    assert lws_obj["problems"] == ["spec: Additional properties are not allowed ('startupPolicy' was unexpected)"]
    ds_obj = next(o for o in out["objects"] if o["name"] == "kimi-k3-1p1d")
    assert ds_obj["problems"] == [f"spec.roles[{i}].spec: Additional properties are not allowed ('startupPolicy' "
                                  f"was unexpected)" for i in (0, 1)]
    assert {(m["kind"], m["path"], m["mismatch"]) for m in out["differential"]["mismatches"]} == {
        ("LeaderWorkerSet", "spec.startupPolicy", "absent upstream"),
        ("DisaggregatedSet", "spec.roles[].spec.startupPolicy", "absent upstream")}


# ------------------------------------------------------------------------------------------- the upstream CRDs

@pytest.mark.upstream_crds
def test_every_rendered_object_passes_the_upstream_v0_10_0_crds_where_they_are_beside_the_checkout():
    """Runs wherever shared/lws-crds/v0.10.0 lies beside or above the checkout (or GPUSTACK_K3_LWS_CRDS names a
    directory). Elsewhere it skips, saying so (a tier that may skip: no registry CI reaches ships the CRDs, and
    their files are not committed here), unless GPUSTACK_K3_REQUIRE_LWS_CRDS=1."""
    where = tool.crd_dir(None)
    if not where.is_dir():
        assert os.environ.get("GPUSTACK_K3_REQUIRE_LWS_CRDS", "") not in ("1", "true", "yes"), \
            f"GPUSTACK_K3_REQUIRE_LWS_CRDS=1 but {where} does not exist"
        pytest.skip(f"no upstream LWS v0.10.0 CRD files at {where} (docs/design/002-topologies.md, 'Validation')")
    r = run()
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr
    out = json.loads(r.stdout)
    roles = _topology_roles()
    assert out["summary"]["ok"] and out["summary"]["objects"] == len(roles) + sum(roles.values())
    assert all(f["pinned"] for f in out["crds"]["files"]), out["crds"]
