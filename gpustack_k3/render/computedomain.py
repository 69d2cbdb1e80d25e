"""Rack scale on Kubernetes: the ComputeDomain, its channel claim, RDMA and NVLink-domain placement (UCX env: launch).

docs/design/004-rack-scale.md. One ``ComputeDomain`` (``resource.nvidia.com/v1beta1``, NVIDIA DRA driver
v25.12.0) per deployment: a node joins one domain at a time
(``cmd/compute-domain-kubelet-plugin/computedomain.go:318-320@v25.12.0``) and prefill/decode exchange KV over NVLink
only inside one IMEX domain. Every engine pod claims its channel: ``spec.resourceClaims[]`` names the
ResourceClaimTemplate the driver generates (``resourceClaimTemplateName``) and the engine container lists the claim
in ``resources.claims`` (``demo/specs/imex/nvbandwidth-test-job.yaml@v25.12.0``). ``numNodes: 0``: the CRD's
recommendation with ``IMEXDaemonsWithDNSNames`` (the default); the field is deprecated.

Placement: ``colocate`` adds a required pod affinity to the deployment's own pods on the NVLink-domain label;
``exclusive`` sets LWS's exclusive-topology annotation; a group larger than one domain gets an LWS subGroupPolicy
of the pods one domain holds and the subgroup-exclusive-topology annotation.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.core.rack import RackLayout
from gpustack_k3.core.k8s_names import derived_name


def domain_name(name: str) -> str:
    return derived_name(name, "-nvlink")


def claim_template_name(name: str) -> str:
    """The ResourceClaimTemplate the DRA driver creates for the domain's channel (spec.channel.resourceClaimTemplate)."""
    return derived_name(name, "-nvlink-channel")


def compute_domain(name: str, ns: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": api.COMPUTE_DOMAIN_API_VERSION, "kind": api.COMPUTE_DOMAIN_KIND,
            "metadata": {"name": domain_name(name), "namespace": ns, "labels": labels},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": claim_template_name(name)}}}}


def patch_pod(tpl: dict, name: str, layout: RackLayout, doc: Any) -> None:
    """Add the domain's channel claim, RDMA resources and the colocation affinity to a pod template (UCX env is the
    launch spec's: core/launch.py network_env)."""
    spec = tpl["spec"]
    (c,) = spec["containers"]
    res = c["resources"]
    if layout.compute_domain:
        spec["resourceClaims"] = [{"name": api.COMPUTE_DOMAIN_CLAIM,
                                   "resourceClaimTemplateName": claim_template_name(name)}]
        res["claims"] = [{"name": api.COMPUTE_DOMAIN_CLAIM}]
    net = getattr(doc.spec, "network", None) if doc is not None else None
    if net is not None and net.rdma is not None:
        res["requests"][net.rdma.resource] = net.rdma.count
        res["limits"][net.rdma.resource] = net.rdma.count     # extended resources: request = limit
    if layout.policy == "colocate" and layout.topology_key:
        spec.setdefault("affinity", {}).setdefault("podAffinity", {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", []).append(
            {"labelSelector": {"matchLabels": {api.LABEL_DEPLOYMENT: name}}, "topologyKey": layout.topology_key})


def lws_placement(layout: RackLayout, role: str, size: int) -> tuple[dict[str, str], dict | None]:
    """(LWS annotations, subGroupPolicy or None) of one role."""
    annotations: dict[str, str] = {}
    if layout.policy == "exclusive" and layout.topology_key:
        annotations[api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY] = layout.topology_key
    sub = layout.subgroups.get(role)
    policy = None
    if sub is not None and layout.topology_key:
        policy = {"subGroupPolicyType": api.LWS_SUBGROUP_LEADER_WORKER, "subGroupSize": sub}
        annotations[api.LWS_ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] = layout.topology_key
    return annotations, policy
