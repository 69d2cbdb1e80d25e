"""JSON Schemas of LeaderWorkerSet and DisaggregatedSet as of kubernetes-sigs/lws v0.10.0, for the tests.

No PyPI or npm package ships the LWS CRDs (searched: docs/design/002-topologies.md), and files of a fetched
repository are not committed here, so this is our own transcription of the Go types, field by field, with the
kubebuilder markers that become CRD validation (enum, minimum/maximum, defaults are not needed to validate),
each citing ``api/leaderworkerset/v1/leaderworkerset_types.go@v0.10.0`` (LWS) or
``api/disaggregatedset/v1/disaggregatedset_types.go@v0.10.0`` (DS) by line. Unknown fields are errors (a CRD's
structural schema prunes them; a strict apply refuses them). Pod templates are ``{"type": "object"}`` here:
the tests validate them against the official ``PodTemplateSpec`` of Kubernetes (kubernetes-validate, strict).
Only the fields we render or could render are transcribed in depth; ``networkConfig`` and ``subGroupPolicy``
are included because a user could expect them.

The schemas hold what the CRD validates, nothing more: ``tools/check_lws_crds.py`` compares every path here with
the upstream CRD files (enum, bounds, required lists, types) and reports each difference. What LWS's admission
webhook refuses on top (``pkg/webhooks/leaderworkerset_webhook.go@v0.10.0``) is in :data:`WEBHOOK_RULES`, checked
by :func:`problems` for every LWS spec, also each DisaggregatedSet role's (the DS controller creates LWS objects
from them, which pass the same webhook).
"""
from __future__ import annotations

from typing import Any

import jsonschema

POD_TEMPLATE: dict[str, Any] = {"type": "object"}          # corev1.PodTemplateSpec: validated separately
INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}   # +kubebuilder:validation:XIntOrString
OBJECT_META = {"type": "object"}                                         # metav1.ObjectMeta (server-checked)


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


LEADER_WORKER_TEMPLATE = _obj({
    "leaderTemplate": POD_TEMPLATE,                                       # :153 *corev1.PodTemplateSpec, omitempty
    "workerTemplate": POD_TEMPLATE,                                       # :156 corev1.PodTemplateSpec (required)
    "size": INT32,                                                        # :165 *int32, default 1 (min 1: webhook)
    "restartPolicy": {"enum": ["Default", "RecreateGroupOnPodRestart",  # :170-173 Enum
                               "RecreateGroupAfterStart", "None"]},
    "subGroupPolicy": _obj({                                              # :178 -> SubGroupPolicy :208-225
        "subGroupPolicyType": {"enum": ["LeaderWorker", "LeaderExcluded"]},   # :213-216
        "subGroupSize": INT32,                                            # :224
    }),
    "volumeClaimTemplates": {"type": "array", "items": {"type": "object"}},   # :185 []corev1.PersistentVolumeClaim
    "persistentVolumeClaimRetentionPolicy": _obj({                        # :190 appsv1.StatefulSetPVCRetentionPolicy:
        "whenDeleted": {"type": "string"},                                #   no enum in the CRD (Retain/Delete are
        "whenScaled": {"type": "string"},                                 #   checked when the StatefulSet is created)
    }),
}, required=("workerTemplate",))

LWS_SPEC = _obj({
    "replicas": {**INT32, "minimum": 0, "maximum": 1_000_000},           # :120-124
    "leaderWorkerTemplate": LEADER_WORKER_TEMPLATE,                       # :127 (required)
    "rolloutStrategy": _obj({                                             # :132 -> RolloutStrategy :195-205
        "type": {"enum": ["RollingUpdate"]},                              # :198-200
        "rollingUpdateConfiguration": _obj({                              # :204 -> :269-314
            "partition": INT32,                                            # :280-282 (>= 0: webhook)
            "maxUnavailable": INT_OR_STRING,                               # :295-297
            "maxSurge": INT_OR_STRING,                                     # :311-313
        }),
    }, required=("type",)),
    "startupPolicy": {"enum": ["LeaderCreated", "LeaderReady"]},          # :134-138
    "networkConfig": _obj({                                               # :142 -> NetworkConfig :246-251
        "subdomainPolicy": {"enum": ["Shared", "UniquePerReplica"]},      # :249-250 (no omitempty: required)
    }, required=("subdomainPolicy",)),
}, required=("leaderWorkerTemplate",))

LEADER_WORKER_SET = _obj({                                                # :426-435
    "apiVersion": {"const": "leaderworkerset.x-k8s.io/v1"},
    "kind": {"const": "LeaderWorkerSet"},
    "metadata": OBJECT_META,
    "spec": LWS_SPEC,
    "status": {"type": "object"},
}, required=("apiVersion", "kind", "metadata"))                           # spec: :433 omitempty, not required

DS_ROLE = _obj({                                                          # DS :75-94
    "name": {"type": "string", "minLength": 1, "maxLength": 63,          # :77-81
             "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
    "scaling": _obj({"mode": {"enum": ["Static", "External"]}}),          # :63-69, :87
    "metadata": OBJECT_META,                                              # :93 inline LeaderWorkerSetTemplateSpec
    "spec": LWS_SPEC,                                                     #     (leaderworkerset_types.go:447-455)
}, required=("name",))

DISAGGREGATED_SET = _obj({                                                # DS :211-225
    "apiVersion": {"const": "disaggregatedset.x-k8s.io/v1"},
    "kind": {"const": "DisaggregatedSet"},
    "metadata": OBJECT_META,
    "spec": _obj({                                                        # :103-129
        "roles": {"type": "array", "items": DS_ROLE, "minItems": 2, "maxItems": 10},   # :106-111 (listMapKey name)
        "slices": {**INT32, "minimum": 1, "maximum": 100},                # :116-120
        "placementPolicy": _obj({                                         # :128 -> :147-158
            "type": {"enum": ["None", "ExclusiveSlice", "ExclusiveTopology"]},
            "topology": {"type": "string"},
        }),
    }, required=("roles",)),
    "status": {"type": "object"},
}, required=("apiVersion", "kind", "metadata", "spec"))                   # spec: :219-220 +required

SCHEMAS = {"LeaderWorkerSet": LEADER_WORKER_SET, "DisaggregatedSet": DISAGGREGATED_SET}


MAX_INT32 = 2**31 - 1
# pkg/webhooks/leaderworkerset_webhook.go@v0.10.0 (validation after defaulting: replicas, size default 1)
WEBHOOK_RULES = (
    ("leaderWorkerTemplate.size", "size must be equal or greater than 1",                       # :139-140
     lambda s: s["leaderWorkerTemplate"].get("size", 1) >= 1),
    ("replicas", f"the product of replicas and worker replicas must not exceed {MAX_INT32}",     # :142-143
     lambda s: s.get("replicas", 1) * s["leaderWorkerTemplate"].get("size", 1) <= MAX_INT32),
    ("rolloutStrategy.rollingUpdateConfiguration.partition", "must be greater than or equal to 0",  # :162-165
     lambda s: ((s.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("partition", 0) >= 0),
)


def _static_replicas_agree(spec: dict) -> bool:
    """The DS spec's CEL rule (disaggregatedset_types.go:102@v0.10.0): the replicas of every non-External role
    are all zero (absent counts as zero) or all non-zero."""
    roles = [r for r in spec.get("roles") or [] if (r.get("scaling") or {}).get("mode") != "External"]
    reps = [(r.get("spec") or {}).get("replicas") for r in roles]
    return all(not n for n in reps) or all(n is not None and n > 0 for n in reps)


def problems(obj: dict) -> list[str]:
    """Schema errors of an LWS or DS object (``path: message``), plus what the schema cannot say: the list-map key
    rule of DS roles (``+listType=map +listMapKey=name``: role names unique), the DS CEL rule and the LWS webhook's
    rules (:data:`WEBHOOK_RULES`) on every LWS spec. The extra checks run only on a schema-valid object."""
    schema = SCHEMAS[obj["kind"]]
    out = [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
           for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
    if out:
        return out
    specs = [("spec", obj.get("spec"))]
    if obj["kind"] == "DisaggregatedSet":
        names = [r.get("name") for r in obj["spec"]["roles"]]
        out += [f"spec.roles: duplicate name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
        if not _static_replicas_agree(obj["spec"]):
            out.append("spec: replicas must be zero for all non-External roles or non-zero for all non-External roles")
        specs = [(f"spec.roles.{i}.spec", r.get("spec")) for i, r in enumerate(obj["spec"]["roles"])]
    for where, spec in specs:
        if spec is None:
            continue
        out += [f"{where}.{path}: {message} (LWS webhook)" for path, message, ok in WEBHOOK_RULES if not ok(spec)]
    return out
