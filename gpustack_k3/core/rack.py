"""Rack-scale facts of a topology: NVLink domain, ComputeDomain, placement policy (docs/design/004-rack-scale.md).

Pure: the effective placement of the deployment, the GPU type's catalog entry and each role's shape in, one
:class:`RackLayout` out. The Kubernetes renderer (``render/computedomain.py``, ``render/lws.py``) renders from it
and the rack rules (``core/rules/rack.py``) check it, so both read the same decision.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.catalog import load_catalog


class RoleShape:
    """One role as placement sees it (plain class: docs/architecture.md, Start-up)."""

    __slots__ = ("name", "instances", "pods", "gpus_per_pod")

    def __init__(self, name: str, instances: int, pods: int, gpus_per_pod: int) -> None:
        self.name, self.instances, self.pods, self.gpus_per_pod = name, instances, pods, gpus_per_pod

    @property
    def gpus_per_group(self) -> int:
        return self.pods * self.gpus_per_pod

    def __repr__(self) -> str:
        return f"RoleShape({self.name!r}, {self.instances}, {self.pods}, {self.gpus_per_pod})"


class RackLayout:
    """What the deployment gets: ``domain`` (the GPU type's NVLink domain or None), ``compute_domain`` (render
    one), ``policy`` (colocate | exclusive | none), the domain label and the racks, and per role the subgroup size
    (pods per NVLink domain) when a group is larger than a domain."""

    __slots__ = ("domain", "nvlink", "compute_domain", "policy", "topology_key", "racks", "roles", "subgroups",
                 "spans_nodes")

    def __init__(self, domain: Any, nvlink: str | None, compute_domain: bool, policy: str, topology_key: str | None,
                 racks: int, roles: list[RoleShape], subgroups: dict[str, int], spans_nodes: bool) -> None:
        self.domain, self.nvlink, self.compute_domain, self.policy = domain, nvlink, compute_domain, policy
        self.topology_key, self.racks, self.roles, self.subgroups = topology_key, racks, roles, subgroups
        self.spans_nodes = spans_nodes

    @property
    def gpus(self) -> int:
        return sum(r.instances * r.gpus_per_group for r in self.roles)

    @property
    def groups(self) -> int:
        return sum(r.instances for r in self.roles)


def rack_layout(placement: Any, hardware: Any, roles: list[RoleShape]) -> RackLayout:
    """The layout of a deployment of ``roles`` with the spec's (shared) ``placement`` on ``hardware`` (a catalog
    HardwareProfile or None)."""
    domain = getattr(hardware, "nvlink_domain", None) if hardware is not None else None
    pods = sum(r.instances * r.pods for r in roles)
    spans_nodes = pods > 1 or any(r.pods > 1 for r in roles)
    nvlink = getattr(placement, "nvlink", None)
    if nvlink is None:
        compute_domain = domain is not None and spans_nodes
    else:
        compute_domain = nvlink == "computeDomain"
    rack = getattr(placement, "rack", None)
    policy = rack.policy if rack is not None and rack.policy is not None else (
        "colocate" if compute_domain and domain is not None else "none")
    key = (rack.topologyKey if rack is not None and rack.topologyKey else None) or (domain.label if domain else None)
    racks = rack.racks if rack is not None else 1
    subgroups: dict[str, int] = {}
    if domain is not None:
        for r in roles:
            if r.gpus_per_group > domain.gpus and r.gpus_per_pod <= domain.gpus:
                subgroups[r.name] = domain.gpus // r.gpus_per_pod
    return RackLayout(domain, nvlink, compute_domain, policy, key, racks, roles, subgroups, spans_nodes)


def document_layout(doc: Any) -> RackLayout:
    """The layout of a document with ``spec.roles`` (the shared placement; the GPU type's catalog entry)."""
    hw = load_catalog().hardware.get(doc.spec.hardware.gpuType)
    roles = [RoleShape(r.name, r.instances, r.podsPerInstance, r.gpusPerPod) for r in doc.spec.roles]
    return rack_layout(doc.spec.placement, hw, roles)


def subgroup_fits(size: int, subgroup: int) -> bool:
    """LWS: the group size must be divisible by subGroupSize, or size - 1 must be (the leader is the extra pod)
    (``leaderworkerset_types.go:218-224@v0.10.0``)."""
    return subgroup <= size and (size % subgroup == 0 or (size - 1) % subgroup == 0)
