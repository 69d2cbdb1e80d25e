"""Kubernetes' own limits on names, label values and annotations, checked before the API server sees an object.

Neither the ``kubernetes`` client nor ``kubernetes-validate`` carries these: the OpenAPI schemas they use say
nothing of a name's length or pattern, which the API server's Go validation enforces (k8s.io/apimachinery
``pkg/util/validation/validation.go`` and ``pkg/api/validation/objectmeta.go``, the same in every release since
1.16). The figures below are those constants; what a controller derives from a name (a StatefulSet's
``controller-revision-hash`` label ``<name>-<hash>``, LeaderWorkerSet's group StatefulSets ``<lws>-<group>``) is
counted as the controller builds it.

Two uses, one set of limits:

* ``validate`` (rule ``k8s-name-length`` in gpustack_k3/core/rules/render.py): the names a document's
  ``metadata.name`` and ``spec.roles[i].name`` become, before anything is rendered;
* after every Kubernetes render (:func:`object_problems`): every object's name, label keys and values (its own,
  its pod template's, its selectors') and annotations, so no object the API server refuses is ever printed.

Names the user did not choose (the ``-api``, ``-headless``, per-instance, router and NVLink suffixes) are built
with :func:`derived_name`: past the limit they are shortened with a stable hash suffix, never refused.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api

# k8s.io/apimachinery pkg/util/validation/validation.go
DNS1123_LABEL_MAX = 63          # DNS1123LabelMaxLength
DNS1123_SUBDOMAIN_MAX = 253     # DNS1123SubdomainMaxLength
DNS1035_LABEL_MAX = 63          # DNS1035LabelMaxLength
LABEL_VALUE_MAX = 63            # LabelValueMaxLength
QUALIFIED_NAME_MAX = 63         # qualifiedNameMaxLength (the name part of a label/annotation key)
# k8s.io/apimachinery pkg/api/validation/objectmeta.go TotalAnnotationSizeLimitB
ANNOTATIONS_TOTAL_MAX = 256 * 1024
# k8s.io/kubernetes pkg/controller/history/controller_history.go ControllerRevisionName / HashControllerRevision:
# a StatefulSet's pods carry the label controller-revision-hash=<statefulset name>-<hash>, the hash a
# rand.SafeEncodeString of a 32-bit FNV hash: at most 10 characters. The label value must fit 63.
REVISION_HASH_SUFFIX = 1 + 10
STATEFULSET_NAME_MAX = LABEL_VALUE_MAX - REVISION_HASH_SUFFIX     # 52

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(rf"({_NAME.pattern})?")

HASH_LEN = 8


def derived_name(base: str, suffix: str, limit: int = DNS1035_LABEL_MAX) -> str:
    """``<base><suffix>`` (suffix with its dash), or where that exceeds ``limit`` the base cut short and
    ``-<hash of the full name>`` before the suffix: stable (the same inputs give the same name) and distinct for
    distinct full names. Only for names the user did not choose."""
    full = base + suffix
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:HASH_LEN]
    keep = limit - len(suffix) - 1 - HASH_LEN
    return f"{base[:keep].rstrip('-.')}-{digest}{suffix}"


# metadata.name of each kind as the API server validates it (k8s.io/kubernetes pkg/apis/*/validation):
# Service names are DNS-1035 labels (ValidateServiceName = NameIsDNS1035Label); Namespaces DNS-1123 labels;
# the rest DNS-1123 subdomains. Beyond the API server: a StatefulSet's name is a label value once the revision
# hash is added (above), and a LeaderWorkerSet is a StatefulSet of its leaders (plus one per group of workers,
# named <lws>-<group>: see lws_name_max) and a headless Service named like it (DNS-1035).
def name_problem(kind: str, name: str) -> str | None:
    if not isinstance(name, str) or not name:
        return "has no name"
    if kind in ("Service", api.LWS_KIND):
        limit, pattern, what = DNS1035_LABEL_MAX, DNS1035_LABEL, "a DNS-1035 label (a-z first, then a-z, 0-9, -)"
    elif kind == "Namespace":
        limit, pattern, what = DNS1123_LABEL_MAX, DNS1123_LABEL, "a DNS-1123 label"
    else:
        limit, pattern, what = DNS1123_SUBDOMAIN_MAX, DNS1123_SUBDOMAIN, "a DNS-1123 subdomain"
    if kind in ("StatefulSet", api.LWS_KIND):
        limit = min(limit, STATEFULSET_NAME_MAX)
    if len(name) > limit:
        return f"name {name!r} has {len(name)} characters, a {kind} name at most {limit}"
    if not pattern.fullmatch(name):
        return f"name {name!r} is not {what}"
    return None


def lws_name_max(instances: int, pods_per_instance: int) -> int:
    """The longest LeaderWorkerSet name whose StatefulSets all fit: the leaders' ``<lws>`` and, with workers, one
    per group ``<lws>-<group index>`` (kubernetes-sigs/lws pkg/controllers/pod_controller.go@v0.10.0 names the
    worker StatefulSet after its leader pod, ``<lws>-<group>``), each plus the revision hash label."""
    if pods_per_instance <= 1:
        return STATEFULSET_NAME_MAX
    return STATEFULSET_NAME_MAX - 1 - len(str(max(instances - 1, 0)))


def label_problems(labels: Any, where: str) -> Iterator[str]:
    for k, v in (labels or {}).items():
        p = key_problem(k)
        if p:
            yield f"{where} key {k!r}: {p}"
        if not isinstance(v, str) or len(v) > LABEL_VALUE_MAX or not LABEL_VALUE.fullmatch(v):
            yield (f"{where} {k}={v!r}: a label value is at most {LABEL_VALUE_MAX} characters of A-Z, a-z, 0-9, "
                   "-, _, . beginning and ending alphanumeric")


def key_problem(key: str) -> str | None:
    """A label or annotation key: ``[prefix/]name``, the prefix a DNS-1123 subdomain, the name at most 63."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "its prefix is not a DNS-1123 subdomain"
    if len(name) > QUALIFIED_NAME_MAX or not _NAME.fullmatch(name):
        return f"its name part is not a qualified name (at most {QUALIFIED_NAME_MAX} characters)"
    return None


def annotation_problems(annotations: Any, where: str) -> Iterator[str]:
    total = 0
    for k, v in (annotations or {}).items():
        p = key_problem(k.lower())
        if p:
            yield f"{where} key {k!r}: {p}"
        total += len(k) + len(v)
    if total > ANNOTATIONS_TOTAL_MAX:
        yield f"{where}: {total} bytes, at most {ANNOTATIONS_TOTAL_MAX}"


def _metas(obj: dict) -> Iterator[tuple[str, dict]]:
    """Every metadata block of an object: its own, its pod templates' (workloads, LWS, DisaggregatedSet roles) and
    its claim templates'."""
    yield "metadata", obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    specs = [("spec", spec)]
    if "roles" in spec and isinstance(spec["roles"], list):
        for i, r in enumerate(spec["roles"]):
            if isinstance(r, dict):
                if r.get("metadata"):
                    yield f"spec.roles[{i}].metadata", r["metadata"]
                specs.append((f"spec.roles[{i}].spec", r.get("spec") or {}))
    for path, s in specs:
        if isinstance(s.get("template"), dict):
            yield f"{path}.template.metadata", s["template"].get("metadata") or {}
        lwt = s.get("leaderWorkerTemplate") or {}
        for k in ("leaderTemplate", "workerTemplate"):
            if isinstance(lwt.get(k), dict):
                yield f"{path}.leaderWorkerTemplate.{k}.metadata", lwt[k].get("metadata") or {}
        for j, c in enumerate(s.get("volumeClaimTemplates") or lwt.get("volumeClaimTemplates") or []):
            yield f"{path}.volumeClaimTemplates[{j}].metadata", c.get("metadata") or {}


def object_problems(objs: list[dict]) -> list[str]:
    """What the API server (or the controller building on it) would refuse in these objects' names, label keys
    and values, selectors and annotations; an empty list: nothing."""
    out: list[str] = []
    for o in objs:
        kind = o.get("kind", "?")
        md = o.get("metadata") or {}
        what = f"{kind}/{md.get('name')}"
        p = name_problem(kind, md.get("name"))
        if p:
            out.append(f"{what}: {p}")
        for path, meta in _metas(o):
            out += [f"{what}: {x}" for x in label_problems(meta.get("labels"), f"{path}.labels")]
            out += [f"{what}: {x}" for x in annotation_problems(meta.get("annotations"), f"{path}.annotations")]
        sel = (o.get("spec") or {}).get("selector")
        if isinstance(sel, dict):
            out += [f"{what}: {x}" for x in label_problems(sel.get("matchLabels", sel), "spec.selector")]
    return out
