"""Rack scale (docs/design/004-rack-scale.md): the ComputeDomain and its channel claims, RDMA and UCX, placement in
NVLink domains, per-instance routing, the InferencePool, and the rack rules that refuse or warn — each with a
firing and a quiet case, from the GB300 8P1D preset and edits of it."""
from __future__ import annotations

import copy

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import Refused
from gpustack_k3.core.rack import subgroup_fits
from gpustack_k3.core.rules import validate
from gpustack_k3.render.lws import render_document

DSV = "dsv41-flash-gb300-8p1d"
KIMI = "kimi-k3-b300-1p1d"


def data(preset: str = DSV) -> dict:
    return copy.deepcopy(load_catalog().presets[preset].document)


def doc(d: dict) -> DeploymentDocument:
    return DeploymentDocument.model_validate(d)


def serve_only(d: dict) -> dict:
    """The decode role alone as a serve role (a wide-EP DEP32 without P/D)."""
    d["spec"]["roles"] = [dict(d["spec"]["roles"][1], role="serve", name="wide")]
    d["spec"].pop("disaggregation", None)
    return d


def kinds(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def templates(objs):
    for o in kinds(objs, api.LWS_KIND):
        lwt = o["spec"]["leaderWorkerTemplate"]
        for k in ("leaderTemplate", "workerTemplate"):
            if k in lwt:
                yield o, lwt[k]


def rules_fired(d: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in validate(doc(d)):
        out.setdefault(f.rule, []).append(f)
    return out


# ------------------------------------------------------------------------------------------ ComputeDomain

def test_nvlink_rack_gets_one_compute_domain_claimed_by_every_pod():
    objs = render_document(doc(data()))
    (cdom,) = kinds(objs, api.COMPUTE_DOMAIN_KIND)
    assert objs[0] is cdom                                   # applied first: the claims name its template
    tpl_name = cdom["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert cdom["spec"]["numNodes"] == 0 and cdom["apiVersion"] == "resource.nvidia.com/v1beta1"
    seen = 0
    for _, tpl in templates(objs):
        assert tpl["spec"]["resourceClaims"] == [{"name": api.COMPUTE_DOMAIN_CLAIM, "resourceClaimTemplateName": tpl_name}]
        (c,) = tpl["spec"]["containers"]
        assert c["resources"]["claims"] == [{"name": api.COMPUTE_DOMAIN_CLAIM}]
        seen += 1
    assert seen == 2            # prefill (size 1) and decode (leader = worker template)


def test_opting_out_renders_no_domain_and_warns():
    d = data()
    d["spec"]["placement"] = {"nvlink": "none"}
    objs = render_document(doc(d))
    assert not kinds(objs, api.COMPUTE_DOMAIN_KIND)
    assert all("resourceClaims" not in t["spec"] for _, t in templates(objs))
    fired = rules_fired(d)
    assert fired["rack-nvlink-opt-out"][0].severity == "warning"
    assert "rack-nvlink-opt-out" not in rules_fired(data())


def test_no_nvlink_domain_no_compute_domain_and_asking_for_one_is_refused():
    objs = render_document(doc(data(KIMI)))          # B300 nodes: NVLink stays inside a node
    assert not kinds(objs, api.COMPUTE_DOMAIN_KIND)
    d = data(KIMI)
    d["spec"]["placement"] = {"nvlink": "computeDomain"}
    assert rules_fired(d)["rack-nvlink-unsupported"][0].severity == "error"
    with pytest.raises(Refused):
        render_document(doc(d))
    assert "rack-nvlink-unsupported" not in rules_fired(data(KIMI))


def test_a_role_cannot_choose_its_own_nvlink():
    d = data()
    d["spec"]["roles"][0]["placement"] = {"nvlink": "none"}
    (f,) = rules_fired(d)["rack-nvlink-deployment-wide"]
    assert f.field == "spec.roles[].placement.nvlink" and "prefill: none" in f.message


# ------------------------------------------------------------------------------------------ network

def test_rdma_and_ucx_reach_every_engine_container():
    d = data()
    d["spec"]["network"] = {"rdma": {"resource": "rdma/ib", "count": 2},
                            "ucx": {"transports": "rc,cuda_copy,cuda_ipc", "netDevices": "mlx5_0:1"}}
    objs = render_document(doc(d))
    for _, tpl in templates(objs):
        (c,) = tpl["spec"]["containers"]
        assert c["resources"]["requests"]["rdma/ib"] == c["resources"]["limits"]["rdma/ib"] == 2
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["UCX_TLS"] == "rc,cuda_copy,cuda_ipc" and env["UCX_NET_DEVICES"] == "mlx5_0:1"
    plain = render_document(doc(data()))
    for _, tpl in templates(plain):
        env = {e["name"] for e in tpl["spec"]["containers"][0]["env"]}
        assert "UCX_TLS" not in env


def test_side_channel_range_past_the_port_space_is_refused():
    d = data()
    d["spec"]["disaggregation"]["sideChannelPort"] = 65530       # decode DP 32: 65530..65561
    (f,) = rules_fired(d)["rack-nixl-port-range"]
    assert "65561" in f.message and f.field == "spec.disaggregation.sideChannelPort"
    assert "rack-nixl-port-range" not in rules_fired(data())


# ------------------------------------------------------------------------------------------ placement

def test_colocate_is_the_default_and_keeps_every_pod_in_one_domain():
    objs = render_document(doc(data()))
    for lws, tpl in templates(objs):
        terms = tpl["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms == [{"labelSelector": {"matchLabels": {api.LABEL_DEPLOYMENT: "dsv41-flash-8p1d"}},
                          "topologyKey": "nvidia.com/gpu.clique"}]
        # not exclusive: that would repel the other role's groups from the rack (pod_webhook.go:184-227@v0.10.0)
        assert api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY not in lws["metadata"]["annotations"]


def test_exclusive_needs_a_domain_per_group():
    d = data()
    d["spec"]["placement"] = {"rack": {"policy": "exclusive"}}
    (f,) = rules_fired(d)["rack-fit"]
    assert "9 groups" in f.message and f.field == "spec.placement.rack.racks"
    d["spec"]["placement"]["rack"]["racks"] = 9
    assert "rack-fit" not in rules_fired(d)
    objs = render_document(doc(d))
    for lws in kinds(objs, api.LWS_KIND):
        assert lws["metadata"]["annotations"][api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY] == "nvidia.com/gpu.clique"
    for _, tpl in templates(objs):
        assert "affinity" not in tpl["spec"]
    ds = render_document(doc(d), form="disaggregatedset")
    (dset,) = kinds(ds, api.DS_KIND)
    assert all(r["metadata"]["annotations"][api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY] for r in dset["spec"]["roles"])
    assert api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY not in dset["metadata"]["annotations"]


def test_colocate_refuses_more_gpus_than_one_domain():
    d = data()
    d["spec"]["roles"][0]["instances"] = 20                  # 40 + 32 = 72: fits
    assert "rack-fit" not in rules_fired(d)
    d["spec"]["roles"][0]["instances"] = 21                  # 74 GPUs
    (f,) = rules_fired(d)["rack-fit"]
    assert "74 GPUs" in f.message


def test_group_larger_than_a_domain_gets_subgroups_of_one_domain():
    d = serve_only(data())
    wide = d["spec"]["roles"][0]
    wide.update(podsPerInstance=36, parallel=dict(wide["parallel"], dp=144))     # 144 GPUs: two NVL72
    d["spec"]["placement"] = {"rack": {"policy": "exclusive", "racks": 2}}
    fired = rules_fired(d)
    (f,) = fired["rack-group-spans-domains"]
    assert f.severity == "warning" and "2 NVLink domains" in f.message
    objs = render_document(doc(d))
    (lws,) = kinds(objs, api.LWS_KIND)
    assert lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] == {"subGroupPolicyType": "LeaderWorker",
                                                                     "subGroupSize": 18}
    assert lws["metadata"]["annotations"][api.LWS_ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] == "nvidia.com/gpu.clique"
    wide.update(podsPerInstance=20, parallel=dict(wide["parallel"], dp=80))       # 20 pods: not 18k or 18k+1
    errs = [f for f in rules_fired(d)["rack-group-spans-domains"] if "cannot form" in f.message]
    assert errs


@pytest.mark.parametrize(("size", "sub", "ok"), [(36, 18, True), (37, 18, True), (20, 18, False), (8, 18, False)])
def test_subgroup_divisibility_is_lws_own(size, sub, ok):
    assert subgroup_fits(size, sub) is ok


# ------------------------------------------------------------------------------------------ routing

def test_inference_pool_fronts_a_serve_topology():
    d = serve_only(data())
    d["spec"]["routing"] = {"target": "inferencePool"}
    objs = render_document(doc(d))
    (pool,) = kinds(objs, api.INFERENCE_POOL_KIND)
    epp = next(o for o in kinds(objs, "Deployment") if o["metadata"]["name"] == pool["spec"]["endpointPickerRef"]["name"])
    svc = next(o for o in kinds(objs, "Service") if o["metadata"]["name"] == pool["spec"]["endpointPickerRef"]["name"])
    assert svc["spec"]["ports"][0]["port"] == pool["spec"]["endpointPickerRef"]["port"]["number"] == 9002
    c = epp["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][c["args"].index("--pool-name") + 1] == pool["metadata"]["name"]
    assert c["image"] == load_catalog().routing.endpoint_picker.image
    (role,) = kinds(objs, "Role")
    assert {"pods"} <= {r for rule in role["rules"] for r in rule["resources"]}
    assert pool["spec"]["selector"]["matchLabels"][api.LABEL_API_SERVER] == "true"
    assert not [o for o in kinds(objs, "Deployment") if o["metadata"]["name"].endswith("-router")]


def test_inference_pool_with_pd_is_refused_and_the_router_without_pd_too():
    d = data()
    d["spec"]["routing"] = {"target": "inferencePool"}
    assert rules_fired(d)["rack-routing-target"][0].severity == "error"
    s = serve_only(data())
    s["spec"]["routing"] = {"target": "vllm-router"}
    assert "rack-routing-target" in rules_fired(s)
    assert "rack-routing-target" not in rules_fired(data())


def test_router_policies_come_from_the_spec():
    d = data()
    d["spec"]["routing"] = {"prefillPolicy": "round_robin", "decodePolicy": "cache_aware"}
    objs = render_document(doc(d))
    router = next(o for o in kinds(objs, "Deployment") if o["metadata"]["name"].endswith("-router"))
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--prefill-policy") + 1] == "round_robin"
    assert args[args.index("--decode-policy") + 1] == "cache_aware"


def test_topology_kinds_list_every_kind_a_topology_renders():
    d = data()
    d["spec"]["placement"] = {"rack": {"policy": "exclusive", "racks": 9}}
    s = serve_only(data())
    s["spec"]["routing"] = {"target": "inferencePool"}
    rendered = {(o["apiVersion"], o["kind"]) for x, forms in ((d, ("leaderworkerset", "disaggregatedset")),
                                                              (s, ("leaderworkerset",)))
                for form in forms for o in render_document(doc(x), form=form)}
    listed = {(av, k) for av, k, _plural, _opt in api.CHILD_KINDS}
    assert rendered <= listed


# ------------------------------------------------------------------------------------------ registry cases
# (firing document, quiet document) per rack rule, merged into tests/core/test_rules_topology.py TOPOLOGY_CASES so
# the registry's coverage test sees them.

def _case(preset: str, *edits):
    def build() -> DeploymentDocument:
        d = data(preset)
        for e in edits:
            e(d)
        return doc(d)
    return build


def _put(path: str, value):
    def fn(d: dict) -> None:
        cur = d["spec"]
        *head, last = path.split(".")
        for p in head:
            cur = cur.setdefault(p, {})
        cur[last] = value
    return fn


def _wide(pods: int):
    def fn(d: dict) -> None:
        serve_only(d)
        w = d["spec"]["roles"][0]
        w.update(podsPerInstance=pods, parallel=dict(w["parallel"], dp=pods * 4))
        d["spec"]["placement"] = {"rack": {"policy": "exclusive", "racks": 2}}
    return fn


RACK_CASES = {
    "rack-nvlink-deployment-wide": (
        _case(DSV, lambda d: d["spec"]["roles"][0].__setitem__("placement", {"nvlink": "none"})), _case(DSV)),
    "rack-nvlink-opt-out": (_case(DSV, _put("placement.nvlink", "none")), _case(DSV)),
    "rack-nvlink-unsupported": (_case(KIMI, _put("placement.nvlink", "computeDomain")), _case(KIMI)),
    "rack-fit": (_case(DSV, _put("placement.rack", {"policy": "exclusive"})),
                 _case(DSV, _put("placement.rack", {"policy": "exclusive", "racks": 9}))),
    "rack-group-spans-domains": (_case(DSV, _wide(36)), _case(DSV, _wide(8))),
    "rack-nixl-port-range": (_case(DSV, _put("disaggregation.sideChannelPort", 65530)), _case(DSV)),
    "rack-routing-target": (_case(DSV, _put("routing", {"target": "inferencePool"})), _case(DSV)),
    # B300 (no NVLink domain): policy none, nothing renders the key; with colocate the pod affinity carries it
    "rack-topology-key-unused": (_case(KIMI, _put("placement.rack", {"topologyKey": "example.com/rack"})),
                                 _case(KIMI, _put("placement.rack", {"topologyKey": "example.com/rack",
                                                                     "policy": "colocate"}))),
}


def _long_name(n: int):
    def fn(d: dict) -> None:
        d["metadata"]["name"] = "k" * n
    return fn


# rule k8s-name-length (core/rules/render.py, a topology-family check of every role's Kubernetes names): its cases
# join the topology rules' table here, beside the other rules whose objects the Kubernetes render builds
RACK_CASES["k8s-name-length"] = (_case(KIMI, _long_name(53)), _case(KIMI, _long_name(52 - 1 - len("prefill"))))


def _single_with_disaggregation(d: dict) -> None:
    d["spec"]["disaggregation"] = {"connector": "NixlConnector"}


RACK_CASES["topology-fields-need-roles"] = (_case("vllm-fixed", _single_with_disaggregation), _case("vllm-fixed"))
