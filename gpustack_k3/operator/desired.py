"""The desired children of a ``K3Deployment`` and whether each must be written (pure).

``prepare`` turns what the renderers made into the objects the operator server-side applies (field manager
``gpustack-k3``): namespaced into the resource's namespace, labelled, owned by it (a controller ownerReference:
garbage-collected with it), the config hash on pod templates and the hash of what is applied in an
annotation. "Desired equals actual" is decided on the fields we own (``apply_reason``): an object is
re-applied when the hash of what we would apply differs from the hash we applied last (annotation
``api.ANNOTATION_APPLIED_HASH``: catches fields we stopped setting) or when the live object no longer carries a
value we set (drift; quantities compared as quantities, ``kubernetes.utils.parse_quantity``).
"""
from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from gpustack_k3.api.v1alpha1 import constants as api


# Objects a namespaced resource cannot own (ownerReferences must stay in-namespace).
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                        "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass",
                        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    return (obj.get("apiVersion", ""), obj.get("kind", ""), (obj.get("metadata") or {}).get("name", ""))


def document_of(cr: Mapping[str, Any]) -> dict:
    """The deployment document of a resource: what a user wrote, without server-set fields."""
    meta = cr.get("metadata") or {}
    doc_meta = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    for k in ("labels", "annotations"):
        if meta.get(k):
            doc_meta[k] = copy.deepcopy(meta[k])
    return {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
            "metadata": doc_meta, "spec": copy.deepcopy(cr.get("spec") or {})}


def _clone(obj: Any) -> Any:
    """Deep copy of JSON data (a JSON round trip is several times faster than copy.deepcopy)."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def quantity(v: Any) -> Decimal | None:
    """A Kubernetes resource quantity ("8", "500m", "16Gi", 8) as a number (``kubernetes.utils.parse_quantity``);
    None if it is not one."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        return parse_quantity(v.strip() if isinstance(v, str) else v)
    except (ValueError, ArithmeticError):
        return None


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, str) != isinstance(b, str) and (isinstance(a, (int, float)) or isinstance(b, (int, float))):
        # the API server answers quantities as strings (8 -> "8", 0.5 -> "500m")
        qa, qb = quantity(a), quantity(b)
        return qa is not None and qa == qb
    if isinstance(a, str) and isinstance(b, str) and a != b and (_has_suffix(a) or _has_suffix(b)):
        # the API server stores quantities in canonical form ("1024Gi" -> "1Ti", "0.5" -> "500m")
        qa, qb = quantity(a), quantity(b)
        return qa is not None and qa == qb
    return a == b


def _has_suffix(v: str) -> bool:
    """A quantity with a unit suffix ("16Gi", "500m"): a plain number string ("0.10") is not compared as one."""
    return v.strip()[-1:].isalpha() and quantity(v) is not None


def contains(actual: Any, desired: Any) -> bool:
    """True when every value set in ``desired`` is present and equal in ``actual`` (extra fields in
    ``actual``, e.g. server defaults or other managers' fields, are ignored)."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(actual) == len(desired) and all(
            contains(a, d) for a, d in zip(actual, desired))
    return _same_scalar(actual, desired)


def _pod_templates(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job") and isinstance(spec.get("template"), dict):
        return [spec["template"]]
    if kind == api.LWS_KIND:
        return _lws_templates(spec)
    if kind == api.DS_KIND:
        return [t for r in spec.get("roles") or [] if isinstance(r, dict) for t in _lws_templates(r.get("spec") or {})]
    if kind == "Pod":
        return [obj]
    return []


def _lws_templates(spec: Mapping[str, Any]) -> list[dict]:
    lwt = spec.get("leaderWorkerTemplate") or {}
    return [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if isinstance(t, dict)]


def prepare(rendered: Sequence[dict], cr: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """Desired objects: namespaced into the resource's namespace, labelled, owned by it, with the
    config hash on pod templates and the applied hash annotation. Returns (objects, warnings)."""
    meta = cr.get("metadata") or {}
    name, ns, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    owner = {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
             "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}
    labels = {api.LABEL_APP_MANAGED_BY: api.FIELD_MANAGER, api.LABEL_DEPLOYMENT: name}
    out, warnings = [], []
    config = [o for o in rendered if o.get("kind") in ("ConfigMap", "Secret")]
    config_hash = stable_hash([[o.get("kind"), (o.get("metadata") or {}).get("name"), o.get("data"),
                                o.get("stringData"), o.get("binaryData")] for o in config]) if config else None
    for src in rendered:
        kind = src.get("kind", "")
        if kind in CLUSTER_SCOPED_KINDS:
            warnings.append(f"{kind}/{(src.get('metadata') or {}).get('name')} is cluster-scoped: "
                            "the operator does not manage it (install it with the chart)")
            continue
        obj = _clone(dict(src))
        m = obj.setdefault("metadata", {})
        m["namespace"] = ns
        m["labels"] = {**(m.get("labels") or {}), **labels}
        m["ownerReferences"] = [owner]
        for tpl in _pod_templates(obj):
            tm = tpl.setdefault("metadata", {})
            tm["labels"] = {**(tm.get("labels") or {}), **labels}
            if config_hash and tpl is not obj:
                tm["annotations"] = {**(tm.get("annotations") or {}), api.ANNOTATION_CONFIG_HASH: config_hash}
            if tpl is not obj:
                # the pods made from this template carry its hash: a pod with another one runs an older spec
                annotations = {k: v for k, v in (tm.get("annotations") or {}).items()
                               if k != api.ANNOTATION_TEMPLATE_HASH}
                tm["annotations"] = {**annotations, api.ANNOTATION_TEMPLATE_HASH: stable_hash(
                    {**tpl, "metadata": {**tm, "annotations": annotations}})}
        m.setdefault("annotations", {})
        m["annotations"].pop(api.ANNOTATION_APPLIED_HASH, None)
        m["annotations"][api.ANNOTATION_APPLIED_HASH] = stable_hash(obj)
        out.append(obj)
    return out, warnings


def template_hashes(desired: Sequence[dict]) -> set[str]:
    """The template hashes ``prepare`` stamped on the desired pod templates."""
    return {h for o in desired for tpl in _pod_templates(o) if tpl is not o
            if (h := ((tpl.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_TEMPLATE_HASH))}


def apply_reason(desired: dict, actual: dict | None) -> str | None:
    """Why ``desired`` must be applied over ``actual`` (None: nothing to write)."""
    if actual is None:
        return "create"
    have = ((actual.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_APPLIED_HASH)
    if have != desired["metadata"]["annotations"][api.ANNOTATION_APPLIED_HASH]:
        return "update"
    body = {k: v for k, v in desired.items() if k != "status"}
    if not contains(actual, body):
        return "drift"
    return None


def endpoint(desired: Sequence[dict], name: str | None = None) -> str | None:
    """The URL of the Service named like the resource (a topology: the router or every role's API servers),
    else of the first Service."""
    services = [o for o in desired if o.get("kind") == "Service"]
    for o in sorted(services, key=lambda o: o["metadata"]["name"] != name):   # stable: the first otherwise
        ports = (o.get("spec") or {}).get("ports") or []
        if ports:
            m = o["metadata"]
            return f"http://{m['name']}.{m['namespace']}.svc:{ports[0].get('port')}"
    return None
