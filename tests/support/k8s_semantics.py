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
import json
import re
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


def canonical_quantity(v: Any) -> Any:
    """The API server stores resource quantities as strings: 8 -> "8", 0.5 -> "500m"."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return v
    if float(v).is_integer():
        return str(int(v))
    milli = round(v * 1000)
    return f"{milli}m" if abs(milli - v * 1000) < 1e-9 else repr(v)


def canonicalize_quantities(obj: Any, parent: str | None = None) -> Any:
    """Numbers in quantity positions (resources.limits/requests, emptyDir.sizeLimit, ...) become the
    strings the API server answers with, as Kubernetes does when it decodes into resource.Quantity."""
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
