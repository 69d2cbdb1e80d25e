"""The SGLang router in front of SGLang prefill/decode roles (render/router.py): one ``--prefill URL BOOTSTRAP_PORT``
per prefill instance and one ``--decode URL`` per decode instance, as the pinned router's own parser reads them
(sglang_router/router_args.py:342-366@0.3.2), a bootstrap port on each prefill instance's Service, the pinned image,
and the refusals (the vLLM router asked for SGLang P/D, a policy the router lacks, a bootstrap port that is none).
Every object passes the schemas the vLLM topologies pass (kubernetes-validate strict, the LWS v0.10.0
transcription)."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.flags import Arg
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.render.lws import render_document, render_topology, validate_topology_objects
from gpustack_k3.render.router import bootstrap_port, sglang_router_pin
from gpustack_k3.render.templates import RenderError
from tests.support import lws_schema

PORT_FLAG = "--disaggregation-bootstrap-port"
PRESETS = ("kimi-k3-b300-1p1d-sglang", "dsv41-flash-gb300-8p1d-sglang")


@pytest.fixture
def sglang_topology(monkeypatch):
    """The 8P1D document's launch with its roles' engine set to SGLang and the prefill leader's argv naming a
    bootstrap port (what matters to the router: the roles, their instances, ports and argv)."""
    topo_cat = load_catalog().engines["sglang"].topology
    monkeypatch.setitem(topo_cat, "bootstrap_port_flag", topo_cat.get("bootstrap_port_flag", PORT_FLAG))
    monkeypatch.setitem(topo_cat, "bootstrap_port", topo_cat.get("bootstrap_port", 8998))
    data = copy.deepcopy(load_catalog().presets["dsv41-flash-gb300-8p1d"].document)
    doc = DeploymentDocument.model_validate(data)
    topo = build_topology_launch(doc)[0]

    def as_sglang(r, extra):
        leader = dataclasses.replace(r.leader, engine="sglang")
        if extra:
            leader = dataclasses.replace(leader, arguments=[*leader.arguments, Arg(field="x", tokens=extra)])
        return dataclasses.replace(r, leader=leader)

    roles = [as_sglang(r, [PORT_FLAG, "9100"] if r.kind == "prefill" else []) for r in topo.roles]
    return doc, dataclasses.replace(topo, roles=roles)


def _router(objs):
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    return dep, dep["spec"]["template"]["spec"]["containers"][0]


def test_sglang_pd_gets_the_sglang_router_with_bootstrap_ports(sglang_topology):
    doc, topo = sglang_topology
    objs = render_topology(topo, doc, namespace="llm")
    dep, c = _router(objs)
    pin = sglang_router_pin()
    assert c["image"] == pin.image and c["command"] == pin.command and c["imagePullPolicy"] == "IfNotPresent"
    args = c["args"]
    assert args[0] == "--pd-disaggregation" and "--vllm-pd-disaggregation" not in args
    name = doc.metadata.name
    svcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    prefill, decode = topo.role("prefill"), topo.role("decode")
    # each --prefill is followed by its URL and the bootstrap port, each --decode by one URL
    pre = [args[i + 1:i + 3] for i, a in enumerate(args) if a == "--prefill"]
    assert pre == [[f"http://{name}-prefill-{g}.llm.svc:{prefill.leader.port}", "9100"]
                   for g in range(prefill.instances)]
    dec = [args[i + 1] for i, a in enumerate(args) if a == "--decode"]
    assert dec == [f"http://{name}-decode-{g}.llm.svc:{decode.leader.port}" for g in range(decode.instances)]
    assert args[args.index("--decode") + 2] != "9100"
    # the prefill instance's Service carries the bootstrap port (the decode reaches it at the URL's host)
    for g in range(prefill.instances):
        ports = {p["name"]: p for p in svcs[f"{name}-prefill-{g}"]["spec"]["ports"]}
        assert ports["bootstrap"]["port"] == ports["bootstrap"]["targetPort"] == 9100
        assert svcs[f"{name}-prefill-{g}"]["spec"]["selector"][api.LWS_LABEL_GROUP_INDEX] == str(g)
    assert [p["name"] for p in svcs[f"{name}-decode-0"]["spec"]["ports"]] == ["http"]
    assert svcs[name]["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert validate_topology_objects(objs) == []
    for o in objs:
        if o["kind"] in lws_schema.SCHEMAS:
            assert lws_schema.problems(o) == [], o["metadata"]["name"]


def test_the_default_bootstrap_port_is_the_catalogs(sglang_topology):
    doc, topo = sglang_topology
    roles = [dataclasses.replace(r, leader=dataclasses.replace(
        r.leader, arguments=[a for a in r.leader.arguments if PORT_FLAG not in a.tokens])) for r in topo.roles]
    _dep, c = _router(render_topology(dataclasses.replace(topo, roles=roles), doc))
    port = str(load_catalog().engines["sglang"].topology["bootstrap_port"])
    assert c["args"][c["args"].index("--prefill") + 2] == port


def test_the_vllm_router_is_refused_for_sglang_pd(sglang_topology):
    doc, topo = sglang_topology
    with pytest.raises(RenderError, match="does not route SGLang") as e:
        render_topology(topo, _with_routing(doc, target="vllm-router"))
    assert e.value.where == "spec.routing.target"


def _with_routing(doc, **routing):
    data = doc.model_dump(mode="json", exclude_none=True, by_alias=True)
    data["spec"]["routing"] = routing
    return DeploymentDocument.model_validate(data)


def test_a_policy_the_router_lacks_is_refused_naming_the_field(sglang_topology):
    doc, topo = sglang_topology
    with pytest.raises(RenderError, match="consistent_hash") as e:
        render_topology(topo, _with_routing(doc, prefillPolicy="consistent_hash"))
    assert e.value.where == "spec.routing.prefillPolicy"
    _dep, c = _router(render_topology(topo, _with_routing(doc, prefillPolicy="round_robin", decodePolicy="random")))
    assert c["args"][c["args"].index("--prefill-policy") + 1] == "round_robin"
    assert c["args"][c["args"].index("--decode-policy") + 1] == "random"


@pytest.mark.parametrize("value", ["none", "0", "70000"])
def test_a_bootstrap_port_that_is_not_a_port_is_refused(sglang_topology, value):
    doc, topo = sglang_topology
    roles = [dataclasses.replace(r, leader=dataclasses.replace(r.leader, arguments=[
        *r.leader.arguments[:-1], dataclasses.replace(r.leader.arguments[-1], tokens=[PORT_FLAG, value])]))
        if r.kind == "prefill" else r for r in topo.roles]
    with pytest.raises(RenderError, match="is not a port"):
        render_topology(dataclasses.replace(topo, roles=roles), doc)


def test_the_pin_is_a_release_and_its_policies_are_the_routers():
    pin = sglang_router_pin()
    assert pin.image.endswith(":v" + pin.version)
    assert pin.command == ["python3", "-m", "sglang_router.launch_router"]
    assert "bucket" in pin.prefill_policies and "bucket" not in pin.decode_policies


@pytest.mark.parametrize("preset", PRESETS)
def test_the_sglang_presets_are_fronted_by_the_sglang_router(preset):
    """The presets as the CLI and the operator render them (validated: kubernetes-validate strict)."""
    doc = DeploymentDocument.model_validate(copy.deepcopy(load_catalog().presets[preset].document))
    topo = build_topology_launch(doc)[0]
    objs = render_document(doc, namespace="llm", topo=topo)
    _dep, c = _router(objs)
    prefill = topo.role("prefill")
    port = bootstrap_port(prefill)
    assert port == int(load_catalog().engines["sglang"].topology["bootstrap_port"])      # the preset keeps it
    assert [c["args"][i + 2] for i, a in enumerate(c["args"]) if a == "--prefill"] == [str(port)] * prefill.instances
    for o in objs:
        if o["kind"] in lws_schema.SCHEMAS:
            assert lws_schema.problems(o) == [], o["metadata"]["name"]
