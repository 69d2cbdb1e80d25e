"""Role views: a roleless document is its own serve role; a role's sections override field by field."""
from gpustack_k3.core.topology import role_views
from .conftest import preset_doc


def test_roleless_document_is_its_own_serve_role():
    doc = preset_doc("vllm-seed")
    (v,) = role_views(doc)
    assert v.index is None and v.document is doc and v.field_prefix == "spec"
    assert v.role.gpusPerPod == doc.spec.hardware.gpuCount and v.gpus == doc.spec.hardware.gpuCount


def test_role_overrides_field_by_field_and_inherits_the_rest():
    doc = preset_doc("vllm-seed", {"memory": {"fraction": 0.9, "kvCacheDtype": "fp8"}, "env": {"A": "1", "B": "shared"},
                "extraArgs": ["--x"],
                "roles": [{"name": "prefill", "role": "prefill", "instances": 8, "gpusPerPod": 2,
                           "parallel": {"tp": 1, "dp": 2, "dpLocal": 2, "expertParallel": True},
                           "memory": {"fraction": 0.95}, "env": {"B": "role"}, "extraArgs": ["--y"]},
                          {"name": "decode", "role": "decode", "podsPerInstance": 8, "gpusPerPod": 4,
                           "parallel": {"tp": 1, "dp": 32, "dpLocal": 4}}],
                "disaggregation": {"connector": "NixlPushConnector"}})
    p, d = role_views(doc)
    assert (p.field_prefix, d.field_prefix) == ("spec.roles[0]", "spec.roles[1]")
    pe = p.document.spec
    assert pe.memory.fraction == 0.95 and pe.memory.kvCacheDtype == "fp8"    # overridden, inherited
    assert pe.env == {**doc.spec.env, "B": "role"} and doc.spec.env["B"] == "shared"
    assert pe.extraArgs == [*doc.spec.extraArgs, "--y"] and "--x" in doc.spec.extraArgs
    assert pe.hardware.gpuCount == 2 and pe.roles == [] and p.document.metadata.name.endswith("-prefill")
    assert pe.parallel.tp == 1 and pe.parallel.dp == 2 and p.dp_local == 2 and p.gpus == 16
    de = d.document.spec
    assert de.memory.fraction == 0.9 and de.hardware.gpuCount == 4 and d.dp == 32 and d.dp_local == 4
    assert d.gpus == 32
    # the shared sections are the same objects for both roles where no role overrides them
    assert pe.speculative == de.speculative == doc.spec.speculative
    assert doc.spec.memory.fraction == 0.9          # the document itself is unchanged


def test_topology_launch_of_a_roleless_document_is_its_launch():
    from gpustack_k3.core.launch import build_launch, build_topology_launch

    doc = preset_doc("vllm-seed")
    topo, findings, _ = build_topology_launch(doc)
    launch, single, _ = build_launch(doc)
    (role,) = topo.roles
    assert role.leader == launch and role.worker is None and findings == single and topo.disaggregation == ""


def test_role_findings_point_at_the_role():
    import pytest

    from gpustack_k3.core.launch import Refused, build_topology_launch

    doc = preset_doc("vllm-seed", {"roles": [{"name": "a", "role": "serve", "gpusPerPod": 8,
                                              "memory": {"fraction": 0.2}}]})
    with pytest.raises(Refused) as exc:
        build_topology_launch(doc)
    assert any(f.field.startswith("spec.roles[0].") for f in exc.value.findings), exc.value.findings


def test_topology_launch_resolves_each_role_once(monkeypatch):
    """The topology rules read the same resolved role documents the launches were built from."""
    from gpustack_k3.core import launch as launch_mod
    from gpustack_k3.core import topology as topology_mod

    doc = preset_doc("dsv41-flash-gb300-8p1d")
    seen: list = []
    real = launch_mod.resolve
    for mod in (launch_mod, topology_mod):
        monkeypatch.setattr(mod, "resolve", lambda d, **kw: seen.append(d) or real(d, **kw))
    topo, _, _ = launch_mod.build_topology_launch(doc)
    names = [f"{doc.metadata.name}-{role.name}" for role in doc.spec.roles]
    assert len(names) == 2 and [d.metadata.name for d in seen] == names
    assert [r.role for r in topo.roles] == [role.name for role in doc.spec.roles]
