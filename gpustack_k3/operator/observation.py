"""What one reconcile observed, as typed records (the input of ``gpustack_k3.operator.decide``).

* ``Observed``: the resource's owned objects (by (apiVersion, kind, name)), its pods, the cold-start
  observation of its engine pods (or None: no log tracking / no pod yet) and the API server's refusal of one of
  the desired objects in this reconcile (or None).
* ``ColdStartObservation``: the status part (``status.coldStart`` as the model) and beside it what only the
  decision reads: the milestones, the verdict, ``syncing`` (the log backlog is still being read after an
  operator restart: the status written last stands) and, for topologies, where each role's cold start is.
* ``Verdict``: a failed attempt, typed: a stall (a phase over its budget) is Degraded with reason
  PhaseOverBudget, a crash Failed with reason EngineCrashed.

Built by the pod-log bridge (``gpustack_k3.operator.coldstart_bridge.snapshot_of``) or read back from a status
(``gpustack_k3.operator.conditions.observation_from_status``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart


def coldstart_model(fields: Mapping[str, Any]) -> ColdStart:
    """``status.coldStart`` from its fields under their status names (null = unknown: left out)."""
    return ColdStart.model_validate({k: v for k, v in fields.items() if k in ColdStart.model_fields and v is not None})


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A failed cold-start attempt: the phase it makes the resource, the Ready reason and its message."""
    phase: str      # api.PHASE_FAILED (a crash) | api.PHASE_DEGRADED (a stall)
    reason: str
    message: str

    @classmethod
    def of_attempt(cls, *, stalled: bool, index: int, failed_phase: str | None, reason: str | None) -> Verdict:
        return cls(phase=api.PHASE_DEGRADED if stalled else api.PHASE_FAILED,
                   reason=api.REASON_PHASE_OVER_BUDGET if stalled else api.REASON_ENGINE_CRASHED,
                   message=f"attempt {index}: cold start failed in {failed_phase or 'an unknown phase'}: "
                           f"{reason or 'no reason printed'}")

    @property
    def said(self) -> str:
        """``reason: message`` as the phase Event says it."""
        return f"{self.reason}: {self.message}".strip(": ")


@dataclasses.dataclass(frozen=True)
class ColdStartObservation:
    status: ColdStart = dataclasses.field(default_factory=ColdStart)
    weights_loaded: bool = False
    graphs_captured: bool = False
    graphs_skipped: bool = False     # serving without CUDA graphs (an eager engine)
    serving: bool = False
    warm: bool = False
    verdict: Verdict | None = None
    syncing: bool = False
    roles: Mapping[str, str] = dataclasses.field(default_factory=dict)   # role -> "serving" | phase | "failed in X"

    @property
    def phase_word(self) -> str:
        """Where this cold start is: ``failed in <phase>``, ``serving``, the phase in progress."""
        if self.verdict is not None:
            return f"failed in {self.status.failedPhase or 'an unknown phase'}"
        if self.serving:
            return "serving"
        return self.status.current or "starting"


@dataclasses.dataclass(frozen=True)
class Observed:
    """What the cluster shows for one resource. ``owned`` maps (apiVersion, kind, name) to the live
    objects controlled by it; ``pods`` are the pods labelled ``api.LABEL_DEPLOYMENT=<name>``;
    ``apply_error`` is the API server's refusal of one of the desired objects in this reconcile (a 4xx that
    retrying cannot fix: invalid, forbidden, immutable field), or None."""
    owned: Mapping[tuple[str, str, str], dict] = dataclasses.field(default_factory=dict)
    pods: Sequence[dict] = ()
    coldstart: ColdStartObservation | None = None
    apply_error: str | None = None
    # P/D: the last KVTransfer check (gpustack_k3.operator.kvcheck.KVTransferObservation), None before the first
    kv_transfer: Any = None
