"""Roles: how a document with ``spec.roles`` becomes one effective single-engine document per role.

A document without roles is one implicit ``serve`` role whose effective document is the document itself (so
every single-node document renders byte for byte as before). With roles, each role's sections override the
shared ones field by field (a field the role leaves unset inherits), ``hardware.gpuCount`` becomes the role's
``gpusPerPod`` and ``metadata.name`` ``<name>-<role>``; every single-engine rule, the planner and the flag table
then apply per role unchanged, and findings carry the role's field path. Topology rules (DP layout, load
balancing, P/D compatibility) look across the views (docs/design/002-topologies.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, Parallel, Role

# Role sections that override the shared section of the same name field by field
MERGED_SECTIONS = ("parallel", "memory", "scheduling", "vllm", "sglang", "placement")


@dataclass(frozen=True)
class RoleView:
    """One role of a document and its effective single-engine document."""
    index: int | None            # position in spec.roles; None: the implicit serve role of a roleless document
    role: Role
    document: DeploymentDocument

    @property
    def field_prefix(self) -> str:
        """Where the role's own fields are: ``spec.roles[i]`` (``spec`` for the implicit role)."""
        return "spec" if self.index is None else f"spec.roles[{self.index}]"

    @property
    def implicit(self) -> bool:
        return self.index is None

    @property
    def pods(self) -> int:
        """Pods of one instance (LWS size)."""
        return self.role.podsPerInstance

    @property
    def dp(self) -> int:
        return self.document.spec.parallel.dp or 1

    @property
    def dp_local(self) -> int:
        """DP ranks per pod: the role's dpLocal, else DP spread evenly over the pods (DP = pods x dpLocal)."""
        p = self.document.spec.parallel
        if p.dpLocal is not None:
            return p.dpLocal
        return max(1, self.dp // self.pods)

    @property
    def gpus(self) -> int:
        """GPUs of the whole role: instances x pods x GPUs per pod."""
        return self.role.instances * self.role.podsPerInstance * self.role.gpusPerPod


def _merge(base: BaseModel, over: BaseModel | None) -> BaseModel:
    if over is None:
        return base
    update: dict[str, Any] = {k: getattr(over, k) for k in over.model_fields_set}
    return base.model_copy(update=update)


def effective_document(doc: DeploymentDocument, role: Role) -> DeploymentDocument:
    """The single-engine document one role runs (not re-validated: its parts are validated models)."""
    spec = doc.spec
    update: dict[str, Any] = {name: _merge(getattr(spec, name), getattr(role, name)) for name in MERGED_SECTIONS}
    update["hardware"] = spec.hardware.model_copy(update={"gpuCount": role.gpusPerPod})
    update["env"] = {**spec.env, **role.env}
    update["extraArgs"] = [*spec.extraArgs, *role.extraArgs]
    update["roles"] = []
    # every role serves the deployment's model name (a P/D router sends one name to both roles)
    update["model"] = spec.model.model_copy(update={"servedModelName": spec.model.servedModelName or doc.metadata.name})
    return doc.model_copy(update={
        "spec": spec.model_copy(update=update),
        "metadata": doc.metadata.model_copy(update={"name": f"{doc.metadata.name}-{role.name}"}),
    })


def implicit_role(doc: DeploymentDocument) -> Role:
    """The serve role a document without ``spec.roles`` describes: one instance, one pod, hardware.gpuCount GPUs."""
    return Role.model_construct(name="serve", role="serve", instances=1, podsPerInstance=1,
                                gpusPerPod=doc.spec.hardware.gpuCount, parallel=doc.spec.parallel
                                if isinstance(doc.spec.parallel, Parallel) else Parallel.model_construct(),
                                loadBalancing="internal", apiServerCount=None, memory=None, scheduling=None,
                                vllm=None, sglang=None, env={}, extraArgs=[], placement=None)


def role_views(doc: DeploymentDocument) -> list[RoleView]:
    """Every role of the document with its effective document, in document order."""
    if not doc.spec.roles:
        return [RoleView(None, implicit_role(doc), doc)]
    return [RoleView(i, r, effective_document(doc, r)) for i, r in enumerate(doc.spec.roles)]
