"""Pure Kubernetes API-server semantics used by the emulator: selectors, merge patches and a
simplified server-side apply (field ownership per manager). No I/O, no asyncio.

The shapes follow the API conventions:
label selectors  https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
field selectors  https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
JSON merge patch RFC 7386; strategic merge (lists of named items merged by key) and
server-side apply https://kubernetes.io/docs/reference/using-api/server-side-apply/ (simplified:
field sets are leaf paths; lists whose items all carry a unique key field are merged per item,
every other list is atomic).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

Path = tuple  # tuple of str (map keys) and (keyfield, value) pairs (keyed list items)

# Key fields tried, in order, to treat a list of maps as a map keyed by that field
# (containers/env/volumes by name, ownerReferences by uid, conditions by type, ports...).
LIST_KEYS = ("name", "uid", "type", "containerPort", "port", "key", "mountPath", "devicePath", "ip")


class SelectorError(ValueError):
    """A selector the API would reject with 400 BadRequest."""


# --------------------------------------------------------------------------- selectors

def _split_terms(sel: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in sel:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [t for t in [*out, cur.strip()] if t]


_TOKEN = r"[A-Za-z0-9_./-]"  # characters of label keys (with prefix) and values


def label_match(labels: dict[str, str], selector: str | None) -> bool:
    """Equality (=, ==, !=), set (in, notin) and existence (k, !k) requirements, ANDed."""
    for term in _split_terms(selector or ""):
        if m := re.fullmatch(rf"({_TOKEN}+)\s*(==|=|!=)\s*({_TOKEN}*)", term):
            k, op, v = m.groups()
            if (labels.get(k) == v) != (op != "!="):
                return False
        elif m := re.fullmatch(rf"({_TOKEN}+)\s+(in|notin)\s+\(([^()]*)\)", term):
            k, op, vs = m.group(1), m.group(2), {x.strip() for x in m.group(3).split(",")}
            if (labels.get(k) in vs) != (op == "in"):
                return False
        elif m := re.fullmatch(rf"!\s*({_TOKEN}+)", term):
            if m.group(1) in labels:
                return False
        elif re.fullmatch(rf"{_TOKEN}+", term):
            if term not in labels:
                return False
        else:
            raise SelectorError(f"unable to parse requirement: {term!r}")
    return True


def field_match(obj: dict[str, Any], selector: str | None) -> bool:
    for term in _split_terms(selector or ""):
        m = re.fullmatch(r"([^!=]+?)\s*(==|=|!=)\s*(.*)", term)
        if not m:
            raise SelectorError(f"invalid field selector: {term!r}")
        k, op, v = m.groups()
        cur: Any = obj
        for part in k.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        text = "" if cur is None else (str(cur).lower() if isinstance(cur, bool) else str(cur))
        if (text == v) != (op != "!="):
            return False
    return True


def matches(obj: dict[str, Any], label_selector: str | None, field_selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return label_match(labels, label_selector) and field_match(obj, field_selector)


# --------------------------------------------------------------------------- patches

def clone(obj: Any) -> Any:
    """Deep copy of JSON data (json round trip is faster than copy.deepcopy for this shape)."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = clone(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def list_key(items: list[Any]) -> str | None:
    """The key field that identifies the items of a list of maps, or None for an atomic list."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for k in LIST_KEYS:
        vals = [json.dumps(i.get(k), sort_keys=True) for i in items if k in i]
        if len(vals) == len(items) and len(set(vals)) == len(vals):
            return k
    return None


def strategic_merge(target: Any, patch: Any) -> Any:
    """Merge patch where lists of maps sharing a key field are merged item by item
    (the essential part of strategic merge patch; `$patch` directives are not supported)."""
    if isinstance(patch, dict):
        result = clone(target) if isinstance(target, dict) else {}
        for k, v in patch.items():
            if v is None:
                result.pop(k, None)
            else:
                result[k] = strategic_merge(result.get(k), v)
        return result
    if isinstance(patch, list) and isinstance(target, list):
        key = list_key(patch)
        if key is not None and (not target or list_key(target) == key):
            out = clone(target)
            index = {json.dumps(i[key], sort_keys=True): n for n, i in enumerate(out)}
            for item in patch:
                ident = json.dumps(item[key], sort_keys=True)
                if ident in index:
                    out[index[ident]] = strategic_merge(out[index[ident]], item)
                else:
                    out.append(clone(item))
            return out
    return clone(patch)


# --------------------------------------------------------------------------- field ownership

def leaf_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """Leaf field paths of a document; keyed list items become (keyfield, value) path elements."""
    if isinstance(obj, dict):
        if not obj:
            return {prefix} if prefix else set()
        out: set[Path] = set()
        for k, v in obj.items():
            out |= leaf_paths(v, (*prefix, k))
        return out
    if isinstance(obj, list):
        key = list_key(obj)
        if key is None:
            return {prefix}
        out = set()
        for item in obj:
            out |= leaf_paths(item, (*prefix, (key, json.dumps(item[key], sort_keys=True))))
        return out
    return {prefix}


def get_path(obj: Any, path: Path) -> Any:
    cur = obj
    for el in path:
        if isinstance(el, tuple):
            if not isinstance(cur, list):
                return _MISSING
            k, ident = el
            cur = next((i for i in cur if isinstance(i, dict) and json.dumps(i.get(k), sort_keys=True) == ident),
                       _MISSING)
        elif isinstance(cur, dict) and el in cur:
            cur = cur[el]
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def delete_path(obj: Any, path: Path) -> None:
    """Remove one leaf path in place; maps and keyed list items left empty are removed too."""
    if not path:
        return
    parents: list[tuple[Any, Any]] = []
    cur = obj
    for el in path[:-1]:
        if isinstance(el, tuple):
            if not isinstance(cur, list):
                return
            k, ident = el
            idx = next((n for n, i in enumerate(cur) if json.dumps(i.get(k), sort_keys=True) == ident), None)
            if idx is None:
                return
            parents.append((cur, idx))
            cur = cur[idx]
        else:
            if not isinstance(cur, dict) or el not in cur:
                return
            parents.append((cur, el))
            cur = cur[el]
    last = path[-1]
    if isinstance(last, tuple):
        if isinstance(cur, list):
            k, ident = last
            cur[:] = [i for i in cur if json.dumps(i.get(k), sort_keys=True) != ident]
    elif isinstance(cur, dict):
        cur.pop(last, None)
    # prune containers emptied by this removal (bottom-up)
    for container, where in reversed(parents):
        child = container[where]
        if child in ({}, []):
            if isinstance(container, list):
                del container[where]
            else:
                del container[where]
        else:
            break


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Render a field set as the API's FieldsV1 JSON (`f:name`, `k:{"name":"x"}`)."""
    root: dict[str, Any] = {}
    for path in paths:
        cur = root
        for el in path:
            key = f"k:{{{json.dumps(el[0])}:{el[1]}}}" if isinstance(el, tuple) else f"f:{el}"
            cur = cur.setdefault(key, {})
    return root


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]):
        self.conflicts = conflicts
        super().__init__("; ".join(f'conflict with "{m}": {render_path(p)}' for m, p in conflicts))


def render_path(path: Path) -> str:
    parts = []
    for el in path:
        parts.append(f"[{el[0]}={json.loads(el[1])}]" if isinstance(el, tuple) else f".{el}")
    return "".join(parts)


def apply(current: dict[str, Any] | None, config: dict[str, Any], owners: dict[str, set[Path]],
          manager: str, *, force: bool) -> tuple[dict[str, Any], dict[str, set[Path]]]:
    """Server-side apply of ``config`` by ``manager`` onto ``current`` (None when creating).

    ``owners`` maps every manager to the leaf paths it owns. Returns (new object, new owners).
    Raises ApplyConflict when another manager owns a field set to a different value and not force.
    Fields the manager applied before but no longer applies are removed unless someone else owns them.
    """
    owners = {m: set(p) for m, p in owners.items()}
    base = clone(current) if current is not None else {}
    cfg_paths = leaf_paths(config)
    conflicts = []
    for other, paths in owners.items():
        if other == manager:
            continue
        for p in paths & cfg_paths:
            if get_path(base, p) != get_path(config, p):
                conflicts.append((other, p))
    if conflicts and not force:
        raise ApplyConflict(sorted(conflicts, key=lambda c: (c[0], render_path(c[1]))))
    for other, p in conflicts:
        owners[other].discard(p)
    previously = owners.get(manager, set())
    still_owned = set().union(*[p for m, p in owners.items() if m != manager]) if owners else set()
    for p in sorted(previously - cfg_paths, key=len, reverse=True):
        if p not in still_owned:
            delete_path(base, p)
    merged = strategic_merge(base, config)
    owners[manager] = cfg_paths
    for other in [m for m in owners if m != manager]:
        owners[other] -= cfg_paths
    return merged, {m: p for m, p in owners.items() if p}


def record_update(old: dict[str, Any] | None, new: dict[str, Any], owners: dict[str, set[Path]],
                  manager: str) -> dict[str, set[Path]]:
    """Ownership after a non-apply write: changed/added leaves go to ``manager``, removed leaves to nobody."""
    old_leaves = leaf_paths(old) if old is not None else set()
    new_leaves = leaf_paths(new)
    changed = {p for p in new_leaves if p not in old_leaves or get_path(old, p) != get_path(new, p)}
    removed = old_leaves - new_leaves
    out: dict[str, set[Path]] = {}
    for m, paths in owners.items():
        kept = paths - removed - (changed if m != manager else set())
        if kept:
            out[m] = kept
    if changed:
        out[manager] = out.get(manager, set()) | changed
    return out


# --------------------------------------------------------------------------- quantities

QUANTITY_MAPS = {"limits", "requests", "capacity", "allocatable", "hard", "used"}
QUANTITY_FIELDS = {"sizeLimit", "storage"}
_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE])|([eE][+-]?[0-9]+))?$")
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {e: s for s, e in _DECIMAL_EXP.items()}
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


class QuantityError(ValueError):
    """Not a resource quantity (the API server answers 422)."""


def canonical_quantity(v: Any) -> Any:
    """A resource quantity in the form the API server stores and answers with (apimachinery
    resource.Quantity: parsed with nano precision, rounded up, printed by ``CanonicalizeBytes``): the
    suffix kind of the input is kept (binary Ki..Ei, decimal n..E, or an exponent), the mantissa is the
    smallest integer with the largest suffix: 8 -> "8", 0.5 -> "500m", "1024Mi" -> "1Gi", "1536Mi" stays,
    "2000" -> "2k", "1000m" -> "1", "0.5Gi" -> "512Mi", "1e3" -> "1e3"; a binary value below 1024 or not
    whole is printed in decimal ("100Ki" stays, "0.5Ki" -> "512")."""
    from decimal import ROUND_CEILING, Decimal

    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return v
    text = repr(v) if isinstance(v, float) else str(v)
    m = _QUANTITY.match(text.strip())
    if not m:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    sign, digits, binary, decimal, exponent = m.groups()
    value = Decimal(sign + digits)
    if binary:
        value *= 1024 ** _BINARY.index(binary)
        fmt = "binary"
    elif exponent:
        value *= Decimal(10) ** int(exponent[1:])
        fmt = "exponent"
    else:
        value *= Decimal(10) ** _DECIMAL_EXP[decimal or ""]
        fmt = "decimal"
    nanos = (value * 10**9).to_integral_value(rounding=ROUND_CEILING)   # nano precision, rounded up
    if nanos == 0:
        return "0"
    if fmt == "binary" and (abs(nanos) < 1024 * 10**9 or nanos % 10**9):
        fmt = "decimal"
    if fmt == "binary":
        n, e = int(nanos // 10**9), 0
        while n % 1024 == 0 and e < len(_BINARY) - 1:
            n, e = n // 1024, e + 1
        return f"{n}{_BINARY[e]}"
    n, e = int(nanos), -9
    while n % 1000 == 0 and e < 18:
        n, e = n // 1000, e + 3
    if fmt == "exponent":
        return f"{n}e{e}" if e else str(n)
    return f"{n}{_DECIMAL_SUFFIX[e]}"


def canonicalize_quantities(obj: Any, parent: str | None = None) -> Any:
    """Numbers and strings in quantity positions (resources.limits/requests, emptyDir.sizeLimit, ...) become
    the canonical strings the API server answers with, as Kubernetes does when it decodes into
    resource.Quantity. Raises QuantityError for a value that is not a quantity."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if parent in QUANTITY_MAPS or k in QUANTITY_FIELDS:
                out[k] = canonical_quantity(v) if not isinstance(v, (dict, list)) else canonicalize_quantities(v, k)
            else:
                out[k] = canonicalize_quantities(v, k)
        return out
    if isinstance(obj, list):
        return [canonicalize_quantities(v, parent) for v in obj]
    return obj


# --------------------------------------------------------------------------- how built-in objects are stored

# Status counts the API server leaves out when they are 0 (Go ``omitempty`` on int fields) and those it
# always writes, from k8s.io/api apps/v1/types.go (DeploymentStatus, StatefulSetStatus, ReplicaSetStatus).
STATUS_OMITEMPTY = {
    "Deployment": ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                   "unavailableReplicas"),
    "StatefulSet": ("observedGeneration", "readyReplicas", "currentReplicas", "updatedReplicas"),
    "ReplicaSet": ("observedGeneration", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"),
}
STATUS_ALWAYS = {"StatefulSet": ("replicas", "availableReplicas"), "ReplicaSet": ("replicas",)}


def encode_status(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The status as the API server serialises it: zero-valued ``omitempty`` counts left out, the counts
    without ``omitempty`` always present (0 when unset)."""
    st = obj.get("status")
    if not isinstance(st, dict) or kind not in STATUS_OMITEMPTY:
        return obj
    st = dict(st)
    for k in STATUS_OMITEMPTY[kind]:
        if st.get(k) == 0:
            del st[k]
    for k in STATUS_ALWAYS.get(kind, ()):
        st.setdefault(k, 0)
    return {**obj, "status": st}


def _image_pull_policy(image: str) -> str:
    """pkg/apis/core/v1/defaults.go SetDefaults_Container: Always for :latest or no tag, else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _probe_defaults(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for k, v in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        probe.setdefault(k, v)
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("scheme", "HTTP")


def pod_spec_defaults(spec: Any) -> None:
    """SetDefaults_PodSpec / _Container / _Volume (k8s pkg/apis/core/v1/defaults.go), in place."""
    if not isinstance(spec, dict):
        return
    for k, v in (("restartPolicy", "Always"), ("terminationGracePeriodSeconds", 30), ("dnsPolicy", "ClusterFirst"),
                 ("securityContext", {}), ("schedulerName", "default-scheduler"), ("enableServiceLinks", True)):
        spec.setdefault(k, v)
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        if isinstance(c.get("image"), str):
            c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
        for port in c.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            _probe_defaults(c.get(probe))
        for env in c.get("env") or []:
            ref = ((env or {}).get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None
            if isinstance(ref, dict):
                ref.setdefault("apiVersion", "v1")
    for vol in spec.get("volumes") or []:
        if not isinstance(vol, dict):
            continue
        for src in ("configMap", "secret"):
            if isinstance(vol.get(src), dict):
                vol[src].setdefault("defaultMode", 420)
        if isinstance(vol.get("hostPath"), dict):
            vol["hostPath"].setdefault("type", "")


def apply_defaults(kind: str, obj: dict[str, Any], *, cluster_ip: Callable[[], str] | None = None) -> dict[str, Any]:
    """The defaults the API server fills in on write for the built-in kinds the operator manages
    (pkg/apis/apps/v1/defaults.go, core/v1/defaults.go, networking/v1/defaults.go; the Service's cluster IP
    from ``cluster_ip``). Returns a new object."""
    obj = clone(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    if kind in ("Deployment", "StatefulSet"):
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        pod_spec_defaults(((spec.get("template") or {}).get("spec")))
    if kind == "Deployment":
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
        else:
            strategy.pop("rollingUpdate", None)
    elif kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
        retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
        for claim in spec.get("volumeClaimTemplates") or []:
            if isinstance(claim, dict):
                claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif kind == "Pod":
        pod_spec_defaults(spec)
    elif kind == "Service":
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        if spec["type"] != "ExternalName":
            if "clusterIP" not in spec and cluster_ip is not None:
                spec["clusterIP"] = cluster_ip()
            if "clusterIP" in spec:
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
    elif kind == "NetworkPolicy":
        spec.setdefault("policyTypes", ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])
        for rule in (spec.get("ingress") or []) + (spec.get("egress") or []):
            for port in (rule or {}).get("ports") or [] if isinstance(rule, dict) else []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
    return obj


# --------------------------------------------------------------------------- custom resources: structural schema

class SchemaError(ValueError):
    """A custom resource the CRD's structural schema refuses (the API server answers 422 Invalid)."""

    def __init__(self, causes: list[tuple[str, str]]):
        self.causes = causes
        super().__init__(", ".join(f"{field}: {msg}" for field, msg in causes))


_JSON_TYPE = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(schema: dict[str, Any], v: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(v, (int, str)) and not isinstance(v, bool)
    t = schema.get("type")
    if t is None:
        return True
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, _JSON_TYPE.get(t, object))


def _type_name(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(v), type(v).__name__)


def structural(schema: dict[str, Any], obj: Any, path: str = "") -> tuple[dict[str, Any], list[str]]:
    """What the API server stores for a custom resource under a structural schema, and the unknown fields it
    pruned (their paths): unknown fields pruned (unless ``x-kubernetes-preserve-unknown-fields``), nulls of
    non-nullable fields dropped, ``default`` values filled in, then every value checked against its ``type``
    (SchemaError listing each mismatch, as the 422 names them). Other constraints (enum, patterns, CEL
    rules) are not enforced here."""
    causes: list[tuple[str, str]] = []
    pruned: list[str] = []

    def walk(s: dict[str, Any], v: Any, at: str) -> Any:
        if v is None:
            return None
        if not _type_ok(s, v):
            shown = json.dumps(v) if isinstance(v, str) else _type_name(v)
            causes.append((at or "<root>", f'Invalid value: "{_type_name(v)}": {at or "body"} in body must be of '
                                         f'type {s.get("type")}: {shown}'))
            return v
        if isinstance(v, dict):
            props, extra = s.get("properties") or {}, s.get("additionalProperties")
            keep_unknown = bool(s.get("x-kubernetes-preserve-unknown-fields")) or extra is True
            out = {}
            for k, item in v.items():
                sub = props.get(k) or (extra if isinstance(extra, dict) else None)
                if sub is None:
                    if keep_unknown:
                        out[k] = item
                    else:
                        pruned.append(f"{at}.{k}" if at else k)   # an unknown field: pruned
                    continue
                if item is None and not sub.get("nullable"):
                    continue            # null of a non-nullable field: dropped (then defaulted)
                out[k] = walk(sub, item, f"{at}.{k}" if at else k)
            for k, sub in props.items():
                if k not in out and "default" in sub:
                    out[k] = clone(sub["default"])
            return out
        if isinstance(v, list) and isinstance(s.get("items"), dict):
            return [walk(s["items"], item, f"{at}[{i}]") for i, item in enumerate(v)]
        return v

    root = dict(obj)
    kept = {k: root.pop(k) for k in ("apiVersion", "kind", "metadata") if k in root}
    out = walk({**schema, "properties": {k: v for k, v in (schema.get("properties") or {}).items()
                                         if k not in kept}}, root, path)
    if causes:
        raise SchemaError(causes)
    return {**kept, **out}, pruned


# --------------------------------------------------------------------------- RBAC

@dataclasses.dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        return "system:masters" in self.groups


@dataclasses.dataclass(frozen=True)
class Attributes:
    """What a resource request asks (the authorizer's view): verb, API group, resource, subresource,
    namespace (None: cluster scope) and name."""
    verb: str
    group: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None


def _subject_matches(subject: dict[str, Any], user: User, binding_ns: str | None) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def rule_allows(rule: dict[str, Any], a: Attributes) -> bool:
    """One PolicyRule (rbac/v1) against a resource request (k8s plugin/pkg/auth/authorizer/rbac/rbac.go)."""
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    verbs, groups, resources = rule.get("verbs") or [], rule.get("apiGroups") or [], rule.get("resources") or []
    if not ("*" in verbs or a.verb in verbs):
        return False
    if not ("*" in groups or a.group in groups):
        return False
    if not ("*" in resources or resource in resources or (a.subresource and f"*/{a.subresource}" in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (a.name in names and a.verb not in ("list", "watch", "create", "deletecollection"))


def rbac_allows(user: User, a: Attributes, roles: dict[tuple[str | None, str], dict],
                bindings: list[dict]) -> bool:
    """Whether RBAC grants the request: ``roles`` maps (namespace or None for a ClusterRole, name) to the
    role object; ``bindings`` are every ClusterRoleBinding and RoleBinding. A RoleBinding grants only in its
    own namespace (also when it refers to a ClusterRole); a ClusterRoleBinding grants everywhere."""
    if user.admin:
        return True
    for b in bindings:
        b_ns = (b.get("metadata") or {}).get("namespace") if b.get("kind") == "RoleBinding" else None
        if b.get("kind") == "RoleBinding" and b_ns != a.namespace:
            continue
        if not any(_subject_matches(s, user, b_ns) for s in b.get("subjects") or []):
            continue
        ref = b.get("roleRef") or {}
        role = roles.get((b_ns if ref.get("kind") == "Role" else None, ref.get("name", "")))
        if role and any(rule_allows(r, a) for r in role.get("rules") or []):
            return True
    return False


def forbidden_message(user: User, a: Attributes) -> str:
    """The API server's wording of a 403 Forbidden."""
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    what = f'{a.resource}{"." + a.group if a.group else ""}' + (f' "{a.name}"' if a.name else "")
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    return (f'{what} is forbidden: User "{user.name}" cannot {a.verb} resource "{resource}" in API group '
            f'"{a.group}" {where}')
