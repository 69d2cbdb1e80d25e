"""Every name of the ``k3.gpustack.ai/v1alpha1`` API in one place.

Group, version, kind, plural and short names; the label and annotation keys we put on objects (one
prefix, the API group); the field manager; the phases, condition types and reasons the operator
writes into ``status``. Nothing outside ``gpustack_k3/api`` spells these strings (a test checks it):
import them from here.
"""
from __future__ import annotations

from typing import Final

from gpustack_k3.errors import (EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,  # noqa: F401 (re-exported)
                                EXIT_REFUSED)

# ----------------------------------------------------------------------------- the resource
PRODUCT: Final = "gpustack-k3"                 # CLI name, field manager, app.kubernetes.io/managed-by value
GROUP: Final = "k3.gpustack.ai"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "K3Deployment"
LIST_KIND: Final = f"{KIND}List"
PLURAL: Final = "k3deployments"
SINGULAR: Final = "k3deployment"
SHORT_NAMES: Final = ("k3dep",)
CATEGORIES: Final = ("gpustack",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
SCOPE: Final = "Namespaced"
FIELD_MANAGER: Final = PRODUCT                 # server-side apply field manager of the operator

# ----------------------------------------------------------------------------- labels and annotations
PREFIX: Final = f"{GROUP}/"                    # the one prefix of our own label and annotation keys

LABEL_DEPLOYMENT: Final = PREFIX + "deployment"          # owned objects and pods: the resource's name
LABEL_ENGINE: Final = PREFIX + "engine"                  # vllm | sglang
LABEL_HEALTH_PORT: Final = PREFIX + "health-port"        # Docker runner: where the engine answers
LABEL_HEALTH_PATH: Final = PREFIX + "health-path"
ANNOTATION_APPLIED_HASH: Final = PREFIX + "applied-hash"  # operator: hash of what it applied last
ANNOTATION_CONFIG_HASH: Final = PREFIX + "config-hash"    # pod template: hash of mounted ConfigMaps/Secrets
ANNOTATION_LAUNCH_SHA256: Final = PREFIX + "launch-sha256"  # pod template: sha256 of the launch spec
ANNOTATION_STARTUP_BUDGET: Final = PREFIX + "startup-budget-seconds"  # pod template: cold-start budget
ANNOTATION_TEMPLATE_HASH: Final = PREFIX + "template-hash"  # pod template (operator): pods of an older one roll out

LABEL_ROLE: Final = PREFIX + "role"                      # topology: the role's name (spec.roles[].name)
LABEL_ROLE_KIND: Final = PREFIX + "role-kind"            # topology: prefill | decode | serve
LABEL_API_SERVER: Final = PREFIX + "api-server"          # topology: "true" on pods that serve the OpenAI API

# Kubernetes' recommended labels (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/)
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_APP_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_APP_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_APP_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_APP_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_APP_VERSION: Final = "app.kubernetes.io/version"

# ----------------------------------------------------------------------------- LeaderWorkerSet (kubernetes-sigs/lws v0.10.0)
# api/leaderworkerset/v1/leaderworkerset_types.go@v0.10.0 (labels :37-60, env :67-75, policies :325-361) and
# api/disaggregatedset/v1/disaggregatedset_types.go@v0.10.0 (:24-42); docs/design/002-topologies.md.
LWS_GROUP: Final = "leaderworkerset.x-k8s.io"
LWS_API_VERSION: Final = f"{LWS_GROUP}/v1"
LWS_KIND: Final = "LeaderWorkerSet"
LWS_PLURAL: Final = "leaderworkersets"
LWS_LABEL_GROUP_INDEX: Final = "leaderworkerset.sigs.k8s.io/group-index"
LWS_LABEL_WORKER_INDEX: Final = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_ENV_LEADER_ADDRESS: Final = "LWS_LEADER_ADDRESS"
LWS_ENV_GROUP_SIZE: Final = "LWS_GROUP_SIZE"
LWS_ENV_WORKER_INDEX: Final = "LWS_WORKER_INDEX"
LWS_RESTART_RECREATE_AFTER_START: Final = "RecreateGroupAfterStart"
LWS_STARTUP_LEADER_CREATED: Final = "LeaderCreated"
DS_GROUP: Final = "disaggregatedset.x-k8s.io"
DS_API_VERSION: Final = f"{DS_GROUP}/v1"
DS_KIND: Final = "DisaggregatedSet"
DS_PLURAL: Final = "disaggregatedsets"

LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY: Final = "leaderworkerset.sigs.k8s.io/exclusive-topology"   # types.go:27-29
LWS_ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: Final = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
LWS_SUBGROUP_LEADER_WORKER: Final = "LeaderWorker"        # SubGroupPolicyType, leaderworkerset_types.go:227-244

# ----------------------------------------------------------------------------- rack scale (docs/design/004-rack-scale.md)
# NVIDIA DRA driver for GPUs v25.12.0: ComputeDomain (deployments/helm/nvidia-dra-driver-gpu/crds/)
COMPUTE_DOMAIN_GROUP: Final = "resource.nvidia.com"
COMPUTE_DOMAIN_API_VERSION: Final = f"{COMPUTE_DOMAIN_GROUP}/v1beta1"
COMPUTE_DOMAIN_KIND: Final = "ComputeDomain"
COMPUTE_DOMAIN_PLURAL: Final = "computedomains"
COMPUTE_DOMAIN_CLAIM: Final = "compute-domain-channel"    # the pod's resourceClaims[].name (demo/specs/imex)
# Gateway API Inference Extension v1.6.0: InferencePool (config/crd/bases/)
INFERENCE_POOL_GROUP: Final = "inference.networking.k8s.io"
INFERENCE_POOL_API_VERSION: Final = f"{INFERENCE_POOL_GROUP}/v1"
INFERENCE_POOL_KIND: Final = "InferencePool"
INFERENCE_POOL_PLURAL: Final = "inferencepools"
# Every kind a deployment renders into (single engine or spec.roles): (apiVersion, kind, plural, optional). The one
# list: the operator owns, watches, prunes and deletes these (operator/kinds.py); optional kinds come from CRDs a
# cluster may lack (watched only when served).
CHILD_KINDS: Final = (
    ("apps/v1", "Deployment", "deployments", False),
    ("apps/v1", "StatefulSet", "statefulsets", False),
    ("v1", "Service", "services", False),
    ("v1", "ConfigMap", "configmaps", False),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", False),
    ("v1", "ServiceAccount", "serviceaccounts", False),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", False),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", False),
    (LWS_API_VERSION, LWS_KIND, LWS_PLURAL, True),
    (DS_API_VERSION, DS_KIND, DS_PLURAL, True),
    (COMPUTE_DOMAIN_API_VERSION, COMPUTE_DOMAIN_KIND, COMPUTE_DOMAIN_PLURAL, True),
    (INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND, INFERENCE_POOL_PLURAL, True),
)

# ----------------------------------------------------------------------------- status.phase
PHASE_PENDING: Final = "Pending"
PHASE_INVALID: Final = "Invalid"
PHASE_DEPLOYING: Final = "Deploying"
PHASE_STARTING: Final = "Starting"
PHASE_READY: Final = "Ready"
PHASE_WARM: Final = "Warm"
PHASE_DEGRADED: Final = "Degraded"
PHASE_FAILED: Final = "Failed"
PHASES: Final = (PHASE_PENDING, PHASE_INVALID, PHASE_DEPLOYING, PHASE_STARTING, PHASE_READY, PHASE_WARM,
                 PHASE_DEGRADED, PHASE_FAILED)
WARNING_PHASES: Final = frozenset({PHASE_INVALID, PHASE_DEGRADED, PHASE_FAILED})   # their Events are Warnings

# ----------------------------------------------------------------------------- status.conditions[].type
CONDITION_VALID: Final = "Valid"
CONDITION_RENDERED: Final = "Rendered"
CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_WEIGHTS_LOADED: Final = "WeightsLoaded"
CONDITION_GRAPHS_CAPTURED: Final = "GraphsCaptured"
CONDITION_READY: Final = "Ready"
CONDITION_WARM: Final = "Warm"
# topologies only: True while an LWS group keeps being recreated (lws#877, a bounded group restart, is not merged)
CONDITION_GROUP_RESTART_LOOP: Final = "GroupRestartLoop"
# P/D only: does KV move from prefill to decode (docs/design/010-pd-rollouts.md §4; the verdict and its reasons:
# gpustack_k3/probe/kvtransfer.py and probe/data/kvtransfer.yaml)
CONDITION_KV_TRANSFER: Final = "KVTransfer"
CONDITION_TYPES: Final = (CONDITION_VALID, CONDITION_RENDERED, CONDITION_SCHEDULED, CONDITION_WEIGHTS_LOADED,
                          CONDITION_GRAPHS_CAPTURED, CONDITION_READY, CONDITION_WARM, CONDITION_GROUP_RESTART_LOOP,
                          CONDITION_KV_TRANSFER)

# ----------------------------------------------------------------------------- condition reasons
# (CamelCase, as metav1.Condition wants). Event reasons are phases and the ones below.
REASON_VALIDATED: Final = "Validated"
REASON_VALIDATION_FAILED: Final = "ValidationFailed"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_RENDERED: Final = "Rendered"
REASON_RENDER_FAILED: Final = "RenderFailed"
REASON_APPLY_FAILED: Final = "ApplyFailed"
REASON_NO_PODS: Final = "NoPods"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_SCHEDULED: Final = "Scheduled"
REASON_SCHEDULING: Final = "Scheduling"
REASON_DONE: Final = "Done"
REASON_NOT_USED: Final = "NotUsed"
REASON_IN_PROGRESS: Final = "InProgress"
REASON_NO_COLDSTART_DATA: Final = "NoColdStartData"
REASON_PODS_READY: Final = "PodsReady"
REASON_PODS_NOT_READY: Final = "PodsNotReady"
REASON_ROLLING_OUT: Final = "RollingOut"
REASON_COLDSTART_FAILED: Final = "ColdStartFailed"
REASON_ENGINE_CRASHED: Final = "EngineCrashed"
REASON_PHASE_OVER_BUDGET: Final = "PhaseOverBudget"
REASON_WARM: Final = "Warm"
REASON_NOT_WARM: Final = "NotWarm"
REASON_WARMUP_FAILED: Final = "WarmupFailed"
REASON_FAILED: Final = "Failed"
REASON_POD_FAILED: Final = "PodFailed"
REASON_GROUPS_NOT_READY: Final = "GroupsNotReady"        # pods ready, but an LWS does not count its groups ready yet
REASON_GROUPS_RECREATED: Final = "GroupsRecreated"
REASON_GROUPS_STABLE: Final = "GroupsStable"
REASON_KV_TRANSFER_FAILED: Final = "KVTransferFailed"    # Ready False: KVTransfer False on consecutive checks
# (the KVTransfer condition's own reasons are the verdict's: gpustack_k3/probe/data/kvtransfer.yaml)
# The kubelet's own waiting/termination reasons, passed through as the Ready condition's reason when a pod is
# the problem (kubernetes pkg/kubelet/images/types.go, pkg/kubelet/container/sync_result.go, and
# ContainerStateTerminated reasons).
# A spec change is needed to get out of these: the workload has failed.
KUBELET_FATAL_WAITING: Final = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                                          "CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
KUBELET_CRASH_WAITING: Final = frozenset({"CrashLoopBackOff"})
KUBELET_OOM_KILLED: Final = "OOMKilled"
KUBELET_CRASH_TERMINATED: Final = frozenset({KUBELET_OOM_KILLED, "Error", "ContainerCannotRun", "StartError"})
CONDITION_REASONS: Final = frozenset({
    REASON_VALIDATED, REASON_VALIDATION_FAILED, REASON_INVALID_SPEC, REASON_RENDERED, REASON_RENDER_FAILED,
    REASON_APPLY_FAILED, REASON_NO_PODS, REASON_UNSCHEDULABLE, REASON_SCHEDULED, REASON_SCHEDULING, REASON_DONE,
    REASON_NOT_USED, REASON_IN_PROGRESS, REASON_NO_COLDSTART_DATA, REASON_PODS_READY, REASON_PODS_NOT_READY,
    REASON_ROLLING_OUT, REASON_COLDSTART_FAILED, REASON_ENGINE_CRASHED, REASON_PHASE_OVER_BUDGET, REASON_WARM,
    REASON_NOT_WARM, REASON_WARMUP_FAILED, REASON_FAILED, REASON_POD_FAILED, REASON_GROUPS_NOT_READY,
    REASON_GROUPS_RECREATED, REASON_GROUPS_STABLE, REASON_KV_TRANSFER_FAILED,
}) | KUBELET_FATAL_WAITING | KUBELET_CRASH_WAITING | KUBELET_CRASH_TERMINATED

# ----------------------------------------------------------------------------- Event reasons besides phases
EVENT_COLDSTART_ATTEMPT: Final = "ColdStartAttempt"
EVENT_COLDSTART_PHASE: Final = "ColdStartPhase"
# a change of the KVTransfer condition (operator/kvcheck.py); its False is REASON_KV_TRANSFER_FAILED
EVENT_KV_TRANSFER_VERIFIED: Final = "KVTransferVerified"
EVENT_KV_TRANSFER_UNKNOWN: Final = "KVTransferUnknown"

# ----------------------------------------------------------------------------- kubectl get columns
PRINTER_COLUMNS: Final = (
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine.name"},
    {"name": "Version", "type": "string", "jsonPath": ".spec.engine.version", "priority": 1},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Ready", "type": "string", "jsonPath": f'.status.conditions[?(@.type=="{CONDITION_READY}")].status'},
    {"name": "ColdStart", "type": "number", "jsonPath": ".status.coldStart.totalSeconds",
     "description": "Cold-start seconds (container start to serving)"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)

# ----------------------------------------------------------------------------- facts used across the package
# Each is spelled here once (tests/architecture/test_facts.py fails on a second spelling: a literal elsewhere).
# The engines (catalog/data/engines/<name>.yaml holds each one's data: versions, default port, flag tables).
ENGINE_VLLM: Final = "vllm"
ENGINE_SGLANG: Final = "sglang"
ENGINES: Final = (ENGINE_VLLM, ENGINE_SGLANG)
# Units of memory (binary, as the engines and Kubernetes count them).
MIB: Final = 1 << 20
GIB: Final = 1 << 30
# The CLI's exit codes (README "Commands"): defined beside the exception classes that carry them
# (gpustack_k3/errors.py: 0 no errors, 1 refused, 2 unusable input or an operational failure, 3 an internal error,
# 130 interrupted), named here too for the package's readers of the contract.
# from gpustack_k3.errors (imported at the top).
