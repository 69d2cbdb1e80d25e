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
    "size": {**INT32, "minimum": 1},                                      # :165 *int32, default 1 (min 1: :158-159)
    "restartPolicy": {"enum": ["Default", "RecreateGroupOnPodRestart",  # :170-173 Enum
                               "RecreateGroupAfterStart", "None"]},
    "subGroupPolicy": _obj({                                              # :178 -> SubGroupPolicy :208-225
        "subGroupPolicyType": {"enum": ["LeaderWorker", "LeaderExcluded"]},   # :213-216
        "subGroupSize": INT32,                                            # :224
    }),
    "volumeClaimTemplates": {"type": "array", "items": {"type": "object"}},   # :185 []corev1.PersistentVolumeClaim
    "persistentVolumeClaimRetentionPolicy": _obj({                        # :190 appsv1.StatefulSetPVCRetentionPolicy
        "whenDeleted": {"enum": ["Retain", "Delete"]},
        "whenScaled": {"enum": ["Retain", "Delete"]},
    }),
}, required=("workerTemplate",))

LWS_SPEC = _obj({
    "replicas": {**INT32, "minimum": 0, "maximum": 1_000_000},           # :120-124
    "leaderWorkerTemplate": LEADER_WORKER_TEMPLATE,                       # :127 (required)
    "rolloutStrategy": _obj({                                             # :132 -> RolloutStrategy :195-205
        "type": {"enum": ["RollingUpdate"]},                              # :198-200
        "rollingUpdateConfiguration": _obj({                              # :204 -> :269-314
            "partition": {**INT32, "minimum": 0},                          # :280-282
            "maxUnavailable": INT_OR_STRING,                               # :295-297
            "maxSurge": INT_OR_STRING,                                     # :311-313
        }),
    }, required=("type",)),
    "startupPolicy": {"enum": ["LeaderCreated", "LeaderReady"]},          # :134-138
    "networkConfig": _obj({                                               # :142 -> NetworkConfig :246-251
        "subdomainPolicy": {"enum": ["Shared", "UniquePerReplica"]},      # :249-250
    }),
}, required=("leaderWorkerTemplate",))

LEADER_WORKER_SET = _obj({                                                # :426-435
    "apiVersion": {"const": "leaderworkerset.x-k8s.io/v1"},
    "kind": {"const": "LeaderWorkerSet"},
    "metadata": OBJECT_META,
    "spec": LWS_SPEC,
    "status": {"type": "object"},
}, required=("apiVersion", "kind", "metadata", "spec"))

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
}, required=("apiVersion", "kind", "metadata", "spec"))

SCHEMAS = {"LeaderWorkerSet": LEADER_WORKER_SET, "DisaggregatedSet": DISAGGREGATED_SET}


def problems(obj: dict) -> list[str]:
    """Schema errors of an LWS or DS object (``path: message``), plus the list-map key rule of DS roles
    (``+listType=map +listMapKey=name``: role names unique)."""
    schema = SCHEMAS[obj["kind"]]
    out = [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
           for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
    if obj["kind"] == "DisaggregatedSet":
        names = [r.get("name") for r in (obj.get("spec") or {}).get("roles") or []]
        out += [f"spec.roles: duplicate name {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    return out
