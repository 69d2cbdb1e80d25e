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


class CompileCache(_Status):
    """Compile cache of this start, from the engine's own lines (``gpustack-k3 coldstart``: compile_cache)."""
    state: Literal["hit", "miss", "partial"] = Field(description="hit: compiled graphs loaded from the cache; "
                                                     "miss: compiled; partial: both.")
    hits: int = Field(ge=0, description="Cache-hit lines.")
    misses: int = Field(ge=0, description="Lines that compiled or failed to load from the cache.")
    compileSeconds: float | None = Field(default=None, description="Seconds of the compile phase.")


# Field names are the tracker's figure names (gpustack_k3.coldstart.catalog.FIGURES), aliases the status keys.
class EngineMemory(_Status):
    """The engine's own memory figures from its start-up log (``gpustack-k3 coldstart``: memory)."""
    model_config = ConfigDict(extra="forbid", defer_build=True, populate_by_name=True)
    kv_cache_gib: float | None = Field(default=None, alias="kvCacheGiB", description="KV cache memory (vLLM available KV cache memory; SGLang KV pool).")
    kv_cache_tokens: int | None = Field(default=None, alias="kvCacheTokens", description="KV cache capacity in tokens.")
    max_concurrency: float | None = Field(default=None, alias="maxConcurrency", description="vLLM: requests of concurrencyLen tokens that fit at once.")
    concurrency_len: int | None = Field(default=None, alias="concurrencyLen", description="vLLM: the request length maxConcurrency is stated for.")
    max_running_requests: int | None = Field(default=None, alias="maxRunningRequests", description="SGLang: max_running_requests.")
    context_len: int | None = Field(default=None, alias="contextLen", description="SGLang: context_len.")
    mamba_cache_size: int | None = Field(default=None, alias="mambaCacheSize", description="SGLang: Mamba/state pool slots.")
    mamba_state_gib: float | None = Field(default=None, alias="mambaStateGiB", description="SGLang: Mamba/state pool size.")
    kv_cache_blocks: int | None = Field(default=None, alias="kvCacheBlocks", description="vLLM V0: KV cache blocks.")


class Warmup(_Status):
    """The post-Ready warm-up of ``spec.startup.warmup``, sent with the probe's code (gpustack_k3.probe.warmup)."""
    ok: bool | None = Field(default=None, description="All warm-up requests answered; null while running.")
    running: bool | None = None
    seconds: float | None = None
    requests: int | None = None
    completed: int | None = None
    errors: int | None = None
    ttftMsP50: float | None = None
    ttftMsMax: float | None = None
    tpotMsP50: float | None = None
    engine: str | None = None
    reason: str | None = None


class ColdStart(_Status):
    """Cold-start progress from the engine log (``gpustack-k3 coldstart``) of the newest pod."""
    attempt: int | None = Field(default=None, ge=1, description="Start attempt of the engine container (1 = first).")
    compileCacheWarm: bool | None = Field(default=None, description="True when compiled graphs were loaded from the cache.")
    compileCache: CompileCache | None = None
    memory: EngineMemory | None = None
    current: str | None = Field(default=None, description="Phase in progress.")
    failedPhase: str | None = None
    reason: str | None = Field(default=None, description="Why the attempt failed: the first causal error in the engine log.")
    pod: str | None = None
    engine: str | None = None
    totalSeconds: float | None = Field(default=None, description="Seconds from container start to the engine serving.")
    phases: list[ColdStartPhase] = Field(default_factory=list)
    warmup: Warmup | None = None


class PlanSummary(_Status):
    """Memory/KV plan summary (``gpustack-k3 plan``)."""
    engine: str
    maxModelLen: int
    kvTokens: int
    maxConcurrency: float
    kvCacheDtype: str
    headroomGiB: float
    kvCacheGiB: float | None = Field(default=None, description="KV cache memory the plan expects the engine to allocate.")
    maxRunningRequests: int | None = Field(default=None, description="SGLang: planned max running requests.")

    def planned(self) -> EngineMemory:
        """The engine figures this plan predicts, as the engine would state them (``status.planCheck``)."""
        return EngineMemory(kv_cache_gib=self.kvCacheGiB, kv_cache_tokens=self.kvTokens,
                            max_concurrency=self.maxConcurrency, max_running_requests=self.maxRunningRequests,
                            concurrency_len=self.maxModelLen)


class PlanCheckFigure(_Status):
    figure: str = Field(description="A status.coldStart.memory key.")
    planned: float
    engine: float
    driftPct: float | None = Field(default=None, description="(engine - planned) / planned x 100.")


class PlanCheck(_Status):
    """The plan next to the engine's own figures (``gpustack-k3 coldstart --spec``: plan_check)."""
    figures: list[PlanCheckFigure] = Field(default_factory=list)
    maxAbsDriftPct: float | None = None
    notPrinted: list[str] = Field(default_factory=list, description="Planned figures the engine has not printed.")


class GroupStatus(_Status):
    """One LWS group (one engine instance) of a role, as the operator last saw its leader pod."""
    index: int = Field(ge=0, description="Group index (LWS leaderworkerset.sigs.k8s.io/group-index).")
    leader: str = Field(description="The group's leader pod (<lws>-<index>).")
    leaderUid: str = Field(description="uid of that leader pod: a new uid means LWS recreated the group.")
    ready: bool = False
    recreations: int = Field(default=0, ge=0, description="Times the group was recreated since the operator saw it first.")


class RoleStatus(_Status):
    """A role of a topology: its LeaderWorkerSet's status (re-read every reconcile, kserve#6043) and its groups."""
    name: str = Field(description="spec.roles[].name")
    kind: str | None = Field(default=None, description="LeaderWorkerSet (or DisaggregatedSet) holding the role.")
    instances: int = Field(ge=0, description="Desired groups (spec.roles[].instances = LWS replicas).")
    podsPerInstance: int = Field(ge=1, description="Pods per group (LWS size).")
    replicas: int = Field(default=0, ge=0, description="Groups created (LWS status.replicas).")
    readyReplicas: int = Field(default=0, ge=0, description="Ready groups (LWS status.readyReplicas).")
    updatedReplicas: int = Field(default=0, ge=0, description="Groups on the current template (LWS status.updatedReplicas).")
    leaderColdStartSeconds: float | None = Field(default=None, description=(
        "The slowest ready leader's cold start: its engine container's start to its Ready condition."))
    groupRecreations: int = Field(default=0, ge=0, description="Group recreations of this role observed in total.")
    coldStartPhase: str | None = Field(default=None, description=(
        "Where the role's cold start is, read from its own pods' engine logs (its slowest pod): a phase, "
        "serving, or failed in <phase>."))
    groups: list[GroupStatus] = Field(default_factory=list, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["index"]})
    revision: str | None = Field(default=None, description=(
        "P/D: the pair revision these groups run (label k3.gpustack.ai/revision; docs/design/010-pd-rollouts.md §2)."))


class RouteRole(_Status):
    """The instances a P/D router sends one kind of request to: the --prefill or --decode URLs of its arguments."""
    role: Literal["prefill", "decode"]
    instances: list[str] = Field(default_factory=list, description="In-cluster URLs of the instance Services.")


class RouterStatus(_Status):
    """The P/D router that serves: its Deployment's readiness and the instances it routes to, per role."""
    name: str = Field(description="The router's Deployment.")
    revision: str | None = Field(default=None, description="The pair revision whose instances it routes to.")
    replicas: int = Field(default=0, ge=0, description="Router pods (Deployment status.replicas).")
    readyReplicas: int = Field(default=0, ge=0, description="Ready router pods (Deployment status.readyReplicas).")
    ready: bool = Field(default=False, description="At least one router pod ready.")
    routes: list[RouteRole] = Field(default_factory=list, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["role"]})


class RolloutStatus(_Status):
    """A P/D rollout (docs/design/010-pd-rollouts.md §3, Surge): the new pair revision comes up beside the serving
    one and the stable Service switches to its router once every role and the router are ready."""
    phase: Literal["Idle", "Starting", "Draining", "Failed"] = Field(description=(
        "Idle: one revision; Starting: the target comes up beside the serving one; Draining: switched, the "
        "previous revision is deleted after the drain; Failed: the target failed, the serving revision serves."))
    servingRevision: str = Field(description="The revision the stable Service routes to.")
    targetRevision: str = Field(description="The revision of the current spec.")
    previousRevision: str | None = Field(default=None, description="Draining: the revision switched away from.")
    startedAt: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    switchedAt: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    message: str = ""
    roles: list[RoleStatus] = Field(default_factory=list, description="The target revision's roles while it starts.",
                                    json_schema_extra={"x-kubernetes-list-type": "map",
                                                       "x-kubernetes-list-map-keys": ["name"]})


class K3DeploymentStatus(_Status):
    """Observed state, written by the operator through the status subresource."""
    phase: Phase | None = Field(default=None, description="Pending, Invalid, Deploying, Starting, Ready, Warm, Degraded or Failed.")
    observedGeneration: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    conditions: list[Condition] = Field(default_factory=list, json_schema_extra={
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    coldStart: ColdStart | None = None
    plan: PlanSummary | None = None
    planCheck: PlanCheck | None = None
    warnings: list[str] = Field(default_factory=list, description="Warning findings of the rule catalog.")
    endpoint: str | None = Field(default=None, description="In-cluster URL of the OpenAI-compatible API.")
    roles: list[RoleStatus] = Field(default_factory=list, description="Topologies: one entry per role.",
                                    json_schema_extra={"x-kubernetes-list-type": "map",
                                                       "x-kubernetes-list-map-keys": ["name"]})
    router: RouterStatus | None = Field(default=None, description="P/D: the serving router.")
    rollout: RolloutStatus | None = Field(default=None, description="P/D: the pair revisions and the rollout.")
