"""tools/check_upstream_crds.py: the rack-scale objects (ComputeDomain, InferencePool, and the LWS/DS objects with
exclusive topology, subgroups and claims) against their upstream CRDs. First on small CRDs written here (our own
text), so every check can fail; then, where the upstream files lie in shared/ beside the checkout, the real run."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools import check_lws_crds as lws_tool
from tools import check_upstream_crds as tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "check_upstream_crds.py"

# A ComputeDomain-shaped schema with an immutable spec (a transition rule) and a required channel.
CD_SCHEMA = {"type": "object", "properties": {
    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
    "spec": {"type": "object", "required": ["channel", "numNodes"],
             "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}],
             "properties": {"numNodes": {"type": "integer"},
                            "channel": {"type": "object", "required": ["resourceClaimTemplate"], "properties": {
                                "resourceClaimTemplate": {"type": "object", "required": ["name"],
                                                          "properties": {"name": {"type": "string"}}}}}}}}}
POOL_SCHEMA = {"type": "object", "properties": {
    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
    "spec": {"type": "object", "required": ["targetPorts"], "properties": {"targetPorts": {
        "type": "array", "items": {"type": "object", "properties": {"number": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": "self.all(p1, self.exists_one(p2, p1.number==p2.number))",
                                      "message": "unique"}]}}}}}
ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def crd(kind: str, group: str, version: str, schema: dict) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.lower()}s.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": f"{kind.lower()}s"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def write(d: Path, *, pool: bool = True) -> Path:
    d.mkdir(parents=True)
    docs = [crd("ComputeDomain", "resource.nvidia.com", "v1beta1", CD_SCHEMA),
            crd("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", ANY),
            crd("DisaggregatedSet", "disaggregatedset.x-k8s.io", "v1", ANY)]
    if pool:
        docs.append(crd("InferencePool", "inference.networking.k8s.io", "v1", POOL_SCHEMA))
    (d / "crds.yaml").write_text(yaml.safe_dump_all(docs))
    return d


def cd_obj(name="x-nvlink", nodes=0, **extra) -> dict:
    spec = {"numNodes": nodes, "channel": {"resourceClaimTemplate": {"name": "x-nvlink-channel"}}, **extra}
    return {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain", "metadata": {"name": name},
            "spec": spec}


def test_a_missing_kind_or_directory_is_unusable(tmp_path):
    with pytest.raises(tool.Unusable, match="InferencePool"):
        tool.load([write(tmp_path / "c", pool=False)])
    with pytest.raises(tool.Unusable, match="no such directory"):
        tool.load([tmp_path / "nowhere"])
    r = subprocess.run([sys.executable, str(TOOL), "--crds", str(tmp_path / "nowhere")], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 2 and "no such directory" in r.stderr and r.stdout == ""


def test_schema_and_cel_problems_are_named_and_transition_rules_wait_for_an_update(tmp_path):
    crds = tool.load([write(tmp_path / "c")])
    create = {k: tool._without_transition_rules(c) for k, c in crds.items()}
    assert lws_tool.validate(create, cd_obj()) == []                        # create: oldSelf rules do not run
    assert lws_tool.validate(create, cd_obj(extra=1)) == [
        "spec: Additional properties are not allowed ('extra' was unexpected)"]
    bad = copy.deepcopy(cd_obj())
    del bad["spec"]["channel"]
    assert lws_tool.validate(create, bad) == ["spec: 'channel' is a required property"]
    # update: the same spec passes, another spec is refused (the ComputeDomain spec is immutable)
    assert tool._transition_problems(crds["ComputeDomain"], cd_obj(), cd_obj()) == []
    (p,) = tool._transition_problems(crds["ComputeDomain"], cd_obj(nodes=2), cd_obj())
    assert p.startswith("spec: transition rule 'self == oldSelf' failed")
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool", "metadata": {"name": "p"},
            "spec": {"targetPorts": [{"number": 8000}, {"number": 8000}]}}
    (msg,) = lws_tool.validate(create, pool)
    assert "spec.targetPorts: CEL rule" in msg


def test_every_kind_must_be_seen_for_the_run_to_pass(tmp_path, monkeypatch):
    crds = tool.load([write(tmp_path / "c")])
    monkeypatch.setattr(tool, "variants", lambda: [])
    assert tool.check(crds) == []


# ------------------------------------------------------------------------------------------- the upstream CRDs

@pytest.mark.upstream_crds
def test_every_rack_scale_object_passes_its_upstream_crd_where_the_files_are_beside_the_checkout():
    """Runs wherever shared/crds (NVIDIA DRA driver v25.12.0, GAIE v1.6.0) and shared/lws-crds/v0.10.0 lie beside or
    above the checkout; elsewhere it skips saying so, unless GPUSTACK_K3_REQUIRE_LWS_CRDS=1."""
    missing = [d for d in tool.default_dirs() if not d.is_dir()]
    if missing:
        assert os.environ.get("GPUSTACK_K3_REQUIRE_LWS_CRDS", "") not in ("1", "true", "yes"), missing
        pytest.skip(f"no upstream CRD files at {', '.join(map(str, missing))} (docs/design/004-rack-scale.md)")
    r = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["ok"] and all(f["pinned"] for f in out["crds"])
    # the 8P1D preset's ComputeDomain in both forms, the InferencePool of the serve variant, every LWS/DS
    assert out["summary"]["per_kind"]["ComputeDomain"] >= 2 and out["summary"]["per_kind"]["InferencePool"] >= 1
    names = {(o["preset"], o["kind"]) for o in out["objects"]}
    assert ("dsv41-flash-gb300-8p1d", "ComputeDomain") in names
    assert ("dsv41-flash-gb300-8p1d", "LeaderWorkerSet") in names


@pytest.mark.upstream_crds
def test_the_upstream_crds_refuse_what_the_renderer_must_not_write():
    """The real CRDs catch a wrong object (so the passing run above is not vacuous)."""
    missing = [d for d in tool.default_dirs() if not d.is_dir()]
    if missing:
        assert os.environ.get("GPUSTACK_K3_REQUIRE_LWS_CRDS", "") not in ("1", "true", "yes"), missing
        pytest.skip(f"no upstream CRD files at {', '.join(map(str, missing))}")
    crds = tool.load(tool.default_dirs())
    create = {k: tool._without_transition_rules(c) for k, c in crds.items()}
    data = next(d for n, f, d in tool.variants() if n == "dsv41-flash-gb300-8p1d" and f == "leaderworkerset")
    objs = tool.rendered(data, "leaderworkerset")
    (cd,) = [o for o in objs if o["kind"] == "ComputeDomain"]
    assert lws_tool.validate(create, cd) == []
    wrong = copy.deepcopy(cd)
    wrong["spec"]["channel"]["allocationMode"] = "Many"
    assert any("allocationMode" in p for p in lws_tool.validate(create, wrong))
    lws = next(o for o in objs if o["kind"] == "LeaderWorkerSet")
    wrong = copy.deepcopy(lws)
    wrong["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {"subGroupPolicyType": "Everyone", "subGroupSize": 2}
    assert any("subGroupPolicyType" in p for p in lws_tool.validate(create, wrong))
