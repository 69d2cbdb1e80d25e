"""Evaluate a CRD's ``x-kubernetes-validations`` offline with cel-python (``celpy``), the way the
API server does, so tests can check the CEL rules without a cluster.

What the API server does before CEL, reproduced here: explicit ``null`` on a declared property is
absent (``has()`` is false), ``number`` values are doubles and ``integer`` values ints, and a rule
runs only where its node is present. Free-form (``x-kubernetes-preserve-unknown-fields``) values are
passed as they are. Needs the ``cel-python`` test dependency.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CelResult:
    path: str            # the node the rule is attached to (".spec")
    rule: str
    message: str
    field_path: str | None
    error: str | None    # compile/evaluation error (the API server refuses the object then too)

    @property
    def rule_id(self) -> str | None:
        """The catalog rule id in the message's ``[rule ID]`` suffix."""
        if "[rule " in self.message and self.message.endswith("]"):
            return self.message.rsplit("[rule ", 1)[1][:-1]
        return None


@functools.lru_cache(maxsize=1)
def _env():
    import celpy

    return celpy.Environment()


@functools.lru_cache(maxsize=4096)
def _program(expr: str):
    env = _env()
    return env.program(env.compile(expr))


def prepare(value: Any, schema: dict[str, Any]) -> Any:
    """The value as the API server hands it to CEL (see the module docstring)."""
    if value is None:
        return None
    if schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema:
        return value
    typ = schema.get("type")
    if typ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ == "object" and isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            out = {}
            for k, v in value.items():
                if v is None:
                    continue
                out[k] = prepare(v, props[k]) if k in props else v
            return out
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            return {k: prepare(v, addl) for k, v in value.items()}
        return value
    if typ == "array" and isinstance(value, list):
        items = schema.get("items") or {}
        return [prepare(v, items) for v in value]
    return value


def _evaluate(expr: str, self_value: Any) -> tuple[bool, str | None]:
    import celpy

    try:
        result = _program(expr).evaluate({"self": celpy.json_to_cel(self_value)})
    except Exception as exc:  # celpy raises CELEvalError (and lark errors at compile time)
        return False, f"{type(exc).__name__}: {exc}"
    if isinstance(result, celpy.CELEvalError):
        return False, str(result)
    if not isinstance(result, celpy.celtypes.BoolType):
        return False, f"rule returned {type(result).__name__}, not bool"
    return bool(result), None


def _walk(schema: dict[str, Any], value: Any, path: str, out: list[CelResult]) -> None:
    if value is None:
        return
    for v in schema.get("x-kubernetes-validations") or []:
        ok, err = _evaluate(v["rule"], value)
        if not ok:
            out.append(CelResult(path, v["rule"], v.get("message", ""), v.get("fieldPath"), err))
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k in value:
                _walk(sub, value[k], f"{path}.{k}", out)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict) and not schema.get("properties"):
            for k, v in value.items():
                _walk(addl, v, f"{path}[{k!r}]", out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            _walk(schema["items"], v, f"{path}[{i}]", out)


def evaluate(crd: dict[str, Any], obj: dict[str, Any], version: str | None = None) -> list[CelResult]:
    """Every failing (or erroring) CEL rule of ``crd`` for the custom resource ``obj``."""
    versions = crd["spec"]["versions"]
    ver = next((v for v in versions if v["name"] == version), None) if version else versions[0]
    if ver is None:
        raise KeyError(f"CRD {crd['metadata']['name']} has no version {version}")
    schema = ver["schema"]["openAPIV3Schema"]
    out: list[CelResult] = []
    _walk(schema, prepare(obj, schema), "", out)
    return out
