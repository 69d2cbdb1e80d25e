"""Pydantic JSON Schema → Kubernetes *structural* OpenAPI v3 schema (and back to plain JSON Schema).

Kubernetes (apiextensions.k8s.io/v1) wants a structural schema: every node typed, no ``$ref``,
no ``anyOf`` standing in for a type, ``nullable: true`` instead of ``{"type": "null"}``, boolean
``exclusiveMinimum`` (OpenAPI 3.0), ``additionalProperties`` only for maps, and
``x-kubernetes-preserve-unknown-fields`` only where the value is free-form JSON.
Pure functions: schema in, schema out.
"""
from __future__ import annotations

import copy
from typing import Any

from gpustack_k3.errors import OperationalError

# Keys copied from a pydantic node as they are (OpenAPI 3.0 and JSON Schema agree on them).
_KEEP = ("description", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern",
         "minItems", "maxItems", "format")


class SchemaConversionError(OperationalError, ValueError):
    """The pydantic model uses a construct this converter does not map (a bug to fix here)."""


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    name = ref.rsplit("/", 1)[-1]
    if name not in defs:
        raise SchemaConversionError(f"unresolvable $ref {ref}")
    merged = dict(defs[name])
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def structural(node: dict[str, Any], defs: dict[str, Any], path: str = "") -> dict[str, Any]:
    """Convert one pydantic JSON-schema node (with its ``$defs``) into a structural schema node."""
    node = _deref(node, defs)
    out: dict[str, Any] = {}
    if "anyOf" in node:
        alts = [a for a in node["anyOf"] if a.get("type") != "null"]
        nullable = len(alts) != len(node["anyOf"])
        if len(alts) != 1:
            raise SchemaConversionError(f"{path or '<root>'}: union of {len(alts)} non-null types is not structural")
        inner = structural(alts[0], defs, path)
        if "description" in node:
            inner["description"] = node["description"]
        if nullable:
            inner["nullable"] = True
        return inner
    for k in _KEEP:
        if k in node:
            out[k] = copy.deepcopy(node[k])
    for k, v in node.items():              # Kubernetes extensions a model field declares (json_schema_extra)
        if k.startswith("x-kubernetes-"):
            out[k] = copy.deepcopy(v)
    if "const" in node:
        out["enum"] = [node["const"]]
    if "exclusiveMinimum" in node:          # draft 2020-12 number -> OpenAPI 3.0 boolean
        out["minimum"], out["exclusiveMinimum"] = node["exclusiveMinimum"], True
    if "exclusiveMaximum" in node:
        out["maximum"], out["exclusiveMaximum"] = node["exclusiveMaximum"], True
    typ = node.get("type")
    if typ is None and "enum" in out:
        kinds = {type(v) for v in out["enum"]}
        typ = "string" if kinds == {str} else None
    if typ is None:
        # Any: free-form JSON the engine receives as is.
        out["x-kubernetes-preserve-unknown-fields"] = True
        return out
    out["type"] = typ
    if typ == "object":
        props = node.get("properties")
        addl = node.get("additionalProperties")
        if props:
            out["properties"] = {k: structural(v, defs, f"{path}.{k}") for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(addl, dict):
            out["additionalProperties"] = structural(addl, defs, f"{path}.*")
        elif isinstance(node.get("patternProperties"), dict) and len(node["patternProperties"]) == 1:
            # a map with constrained keys (label keys): structural schemas cannot constrain keys, so the
            # values are typed here and the keys are checked where the spec is validated (operator, CLI)
            (value,) = node["patternProperties"].values()
            out["additionalProperties"] = structural(value, defs, f"{path}.*")
        else:
            # dict[str, Any]: free-form JSON handed to the engine as is. The API server keeps it
            # (preserve-unknown) but does not expose its keys to CEL.
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif typ == "array":
        out["items"] = structural(node.get("items", {}), defs, f"{path}[]")
    return out


def structural_from_model(model: type) -> dict[str, Any]:
    """The structural schema of a pydantic model class."""
    raw = model.model_json_schema()  # type: ignore[attr-defined]
    defs = raw.pop("$defs", {})
    return structural(raw, defs)


def walk(node: dict[str, Any], path: str = ""):
    """Yield ``(path, node)`` for every node of a structural schema (path like ``.parallel.dcp``)."""
    yield path, node
    for k, v in (node.get("properties") or {}).items():
        yield from walk(v, f"{path}.{k}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")


def to_jsonschema(node: dict[str, Any], *, closed: bool = False) -> dict[str, Any]:
    """A structural OpenAPI node as JSON Schema draft-07 (for ``jsonschema`` and Helm's values schema).

    ``nullable`` becomes a ``null`` type, the boolean ``exclusiveMinimum`` a number, preserve-unknown
    an unconstrained node. ``closed=True`` refuses unknown keys (``additionalProperties: false``)
    the way the pydantic model does; ``closed=False`` mirrors the API server, which prunes them.
    """
    out: dict[str, Any] = {}
    for k in _KEEP:
        if k in node:
            out[k] = copy.deepcopy(node[k])
    if node.get("exclusiveMinimum") is True:
        out["exclusiveMinimum"] = out.pop("minimum")
    if node.get("exclusiveMaximum") is True:
        out["exclusiveMaximum"] = out.pop("maximum")
    typ = node.get("type")
    if typ is not None:
        out["type"] = [typ, "null"] if node.get("nullable") else typ
        if node.get("nullable") and "enum" in out:
            out["enum"] = [*out["enum"], None]
    if typ == "object":
        if "properties" in node:
            out["properties"] = {k: to_jsonschema(v, closed=closed) for k, v in node["properties"].items()}
            if node.get("required"):
                out["required"] = list(node["required"])
            if closed and not node.get("x-kubernetes-preserve-unknown-fields"):
                out["additionalProperties"] = False
        elif isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = to_jsonschema(node["additionalProperties"], closed=closed)
    elif typ == "array" and isinstance(node.get("items"), dict):
        out["items"] = to_jsonschema(node["items"], closed=closed)
    return out
