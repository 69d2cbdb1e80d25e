"""The kinds of child objects the operator creates, owns, watches, prunes and deletes: one list.

Each entry is a kind the renderers may emit for a ``K3Deployment``. The manager runs an informer per entry
(label ``app.kubernetes.io/managed-by=gpustack-k3``), so a child changed or deleted by someone else is seen at
once, and a child the desired set no longer holds is pruned; the API client knows its plural without asking
discovery. ``optional``: a kind of a CRD a cluster may not serve (LeaderWorkerSet, DisaggregatedSet): watched
only when discovery finds its group/version, so an operator on a cluster without it still starts; applying one
there is refused with the API server's 404, reported in the status.

Adding a kind: one entry in ``api/v1alpha1/constants.py`` ``CHILD_KINDS`` (the list the renderers' tests
check too); the chart's RBAC rule for it (``charts/gpustack-k3/templates/
_helpers.tpl``, checked against this list by ``tests/helm/test_chart_render.py``); and, for the tests, the kind
in the API emulator (``tests/support/k8s_emulator.py`` ``DEFAULT_RESOURCES``, plus a reaction if a controller
of that kind must act on it).
"""
from __future__ import annotations

import dataclasses

from gpustack_k3.api.v1alpha1 import constants as api


@dataclasses.dataclass(frozen=True)
class ChildKind:
    api_version: str
    kind: str
    plural: str
    optional: bool = False      # a CRD the cluster may not serve: watched only when discovery finds it

    @property
    def key(self) -> tuple[str, str]:
        return (self.api_version, self.kind)


CHILD_KINDS: tuple[ChildKind, ...] = tuple(ChildKind(*entry) for entry in api.CHILD_KINDS)
