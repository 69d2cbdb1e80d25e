"""``status`` of a ``K3Deployment``: what the operator writes through the status subresource.

The CRD's status schema is generated from these models (``gpustack_k3.crd.manifest``), so the API server
prunes anything the operator writes that is not declared here; the operator's status is checked against
them in the tests. Condition types, reasons and phases are the names of ``constants``.
"""
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpustack_k3.api.v1alpha1.constants import CONDITION_TYPES, PHASES

# metav1.Condition limits (k8s.io/apimachinery/pkg/apis/meta/v1/types.go)
MAX_CONDITION_TYPE = 316
MAX_CONDITION_REASON = 1024
MAX_CONDITION_MESSAGE = 32768
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

Phase = Literal[PHASES]                  # type: ignore[valid-type]
ConditionType = Literal[CONDITION_TYPES]  # type: ignore[valid-type]


class _Status(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Condition(_Status):
    """metav1.Condition. ``lastTransitionTime`` moves only when ``status`` flips."""
    type: ConditionType = Field(max_length=MAX_CONDITION_TYPE)
    status: Literal["True", "False", "Unknown"]
    observedGeneration: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    lastTransitionTime: str = Field(json_schema_extra={"format": "date-time"})
    reason: str = Field(max_length=MAX_CONDITION_REASON, pattern=CONDITION_REASON_PATTERN)
    message: str = Field(default="", max_length=MAX_CONDITION_MESSAGE)


class ColdStartPhase(_Status):
    name: str = Field(description="Cold-start phase (gpustack-k3 coldstart): container_start, weights_load, ...")
    start: str | None = Field(default=None, description="RFC 3339 time the phase began.")
    end: str | None = Field(default=None, description="RFC 3339 time the phase ended; unset while it runs.")
    seconds: float | None = None


class ColdStart(_Status):
    """Cold-start progress from the engine log (``gpustack-k3 coldstart``) of the newest pod."""
    attempt: int | None = Field(default=None, ge=1, description="Start attempt of the engine container (1 = first).")
    compileCacheWarm: bool | None = Field(default=None, description="True when compiled graphs were loaded from the cache.")
    current: str | None = Field(default=None, description="Phase in progress.")
    failedPhase: str | None = None
    reason: str | None = Field(default=None, description="Why the attempt failed, from the engine log.")
    pod: str | None = None
    engine: str | None = None
    totalSeconds: float | None = Field(default=None, description="Seconds from container start to the engine serving.")
    phases: list[ColdStartPhase] = Field(default_factory=list)


class PlanSummary(_Status):
    """Memory/KV plan summary (``gpustack-k3 plan``)."""
    engine: str
    maxModelLen: int
    kvTokens: int
    maxConcurrency: float
    kvCacheDtype: str
    headroomGiB: float


class K3DeploymentStatus(_Status):
    """Observed state, written by the operator through the status subresource."""
    phase: Phase | None = Field(default=None, description="Pending, Invalid, Deploying, Starting, Ready, Warm, Degraded or Failed.")
    observedGeneration: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    conditions: list[Condition] = Field(default_factory=list, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    coldStart: ColdStart | None = None
    plan: PlanSummary | None = None
    warnings: list[str] = Field(default_factory=list, description="Warning findings of the rule catalog.")
    endpoint: str | None = Field(default=None, description="In-cluster URL of the OpenAI-compatible API.")
