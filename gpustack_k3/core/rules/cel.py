"""The CEL toolkit rule definitions use for their ``cel=`` translations (pure string building over the catalog).

Kubernetes CEL semantics the builders respect: ``has()`` on a field whose parent is absent is an error (so every
access is guarded by a ``has`` chain), a field explicitly set to ``null`` counts as absent (``has`` is false;
comparing with ``null`` does not compile), ``number`` fields are doubles. A rule's ``cel=`` returns the "bad"
condition for one engine; ``gpustack_k3.crd.cel.generate`` adds the version applicability and the catalog guard,
mirroring how ``Resolved.value`` fills an unset field (spec value -> version default -> model context ->
GPU-memory scheduler default).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from gpustack_k3.catalog.loader import Catalog

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.rules.registry import Rule


class CelRule:
    """One x-kubernetes-validations entry. (Plain classes here: this module is imported at every CLI start with the
    rule definitions that use it; a dataclass would generate its methods each time.)"""

    __slots__ = ("rule_id", "expression", "message", "field_path", "scope")

    def __init__(self, rule_id: str, expression: str, message: str, field_path: str | None,
                 scope: str = "spec") -> None:
        self.rule_id = rule_id          # registry rule id (or "metadata-name" for the root rule)
        self.expression = expression    # true = admitted
        self.message = message
        self.field_path = field_path    # relative to the node the rule is attached to (".parallel.dcp")
        self.scope = scope              # "spec" or "root"

    def __repr__(self) -> str:
        return f"CelRule({self.rule_id!r}, {self.field_path!r})"

    def validation(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.expression, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        out["reason"] = "FieldValueInvalid"
        return out


def lit(v: Any) -> str:
    """A CEL literal."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(lit(x) for x in v) + "]"
    raise TypeError(f"no CEL literal for {v!r}")


def conj(*parts: str) -> str:
    """``a && b`` without the ``true`` operands."""
    kept = [p for p in parts if p != "true"]
    if "false" in kept:
        return "false"
    return " && ".join(kept) if kept else "true"


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


class Builder:
    """Expression helpers for one engine; ``refs`` collects every spec path a rule reads."""

    def __init__(self, catalog: Catalog, spec_model: type, engine: str) -> None:
        self.catalog, self.spec_model, self.engine = catalog, spec_model, engine
        self.refs: set[str] = set()

    # ---- domain: the catalog entries a known document can name for this engine
    @property
    def versions(self) -> list[str]:
        return list(self.catalog.engines[self.engine].versions)

    @property
    def default_version(self) -> str:
        return next(k for k, v in self.catalog.engines[self.engine].versions.items() if v.default)

    @property
    def models(self) -> list[str]:
        return [k for k, m in self.catalog.models.items() if self.engine in m.engines]

    @property
    def gpus(self) -> list[str]:
        return list(self.catalog.hardware)

    # ---- spec access
    def present(self, path: str) -> str:
        parts = path.split(".")
        self.refs.add(path)
        return "(" + " && ".join(f"has(self.{'.'.join(parts[:i + 1])})" for i in range(len(parts))) + ")"

    def ref(self, path: str) -> str:
        self.refs.add(path)
        return f"self.{path}"

    def model_default(self, path: str) -> Any:
        """The pydantic default of a spec field (None when unset means 'engine default')."""
        from pydantic_core import PydanticUndefined

        cls: Any = self.spec_model
        info = None
        for part in path.split("."):
            info = cls.model_fields[part]
            cls = info.annotation
        if info is None or info.default is PydanticUndefined or info.default_factory is not None:
            return None
        return info.default

    def dim(self, name: str) -> str:
        if name == "version":
            return f"({self.present('engine.version')} ? {self.ref('engine.version')} : {lit(self.default_version)})"
        if name == "model":
            return f"({self.present('model.name')} ? {self.ref('model.name')} : {lit(self.model_default('model.name'))})"
        if name == "gpu":
            return (f"({self.present('hardware.gpuType')} ? {self.ref('hardware.gpuType')} : "
                    f"{lit(self.model_default('hardware.gpuType'))})")
        raise KeyError(name)

    def known(self) -> str:
        """The catalog knows version, model (with figures for this engine) and GPU type:
        ``validate`` stops at unknown-catalog-entry otherwise, so every other rule is guarded by this."""
        return (f"{self.dim('version')} in {lit(self.versions)} && {self.dim('model')} in {lit(self.models)} && "
                f"{self.dim('gpu')} in {lit(self.gpus)}")

    # ---- a value that depends on (version, model, gpu), compiled into nested conditionals
    def by_catalog(self, fn: Callable[[str, str, str], Any]) -> dict[tuple[str, str, str], Any]:
        return {(v, m, g): fn(v, m, g) for v in self.versions for m in self.models for g in self.gpus}

    def compile(self, table: dict[tuple, Any]) -> str:
        return self._compile(table, ["version", "model", "gpu"])

    def _compile(self, table: dict[tuple, Any], dims: list[str]) -> str:
        vals = {_freeze(v) for v in table.values()}
        if len(vals) == 1:
            return lit(next(iter(table.values())))
        order = ["version", "model", "gpu"]
        for d in dims:
            i = order.index(d)
            if not self._depends(table, i):
                continue
            groups: dict[str, dict[tuple, Any]] = {}
            for k, v in table.items():
                groups.setdefault(k[i], {})[k] = v
            rest = [x for x in dims if x != d]
            branches: dict[str, list[str]] = {}
            for key, sub in groups.items():
                branches.setdefault(self._compile(sub, rest), []).append(key)
            if set(branches) == {"true", "false"}:
                return f"{self.dim(d)} in {lit(branches['true'])}"
            items = sorted(branches.items(), key=lambda kv: len(kv[1]))
            expr = items[-1][0]
            for sub_expr, keys in reversed(items[:-1]):
                expr = f"({self.dim(d)} in {lit(keys)} ? {sub_expr} : {expr})"
            return expr
        raise AssertionError("table varies but depends on no dimension")

    @staticmethod
    def _depends(table: dict[tuple, Any], i: int) -> bool:
        """Two keys that differ only in coordinate ``i`` map to different values."""
        seen: dict[tuple, set] = {}
        for k, v in table.items():
            seen.setdefault(k[:i] + k[i + 1:], set()).add(_freeze(v))
        return any(len(s) > 1 for s in seen.values())

    def member(self, value: str, table: dict[tuple, list]) -> str:
        """``value`` is in the catalog list that applies (the list may differ per version/model/GPU).
        Written as a disjunction over the distinct non-empty lists, so no empty list literal appears."""
        distinct: list[tuple] = []
        for v in table.values():
            if v and tuple(v) not in distinct:
                distinct.append(tuple(v))
        if not distinct:
            return "false"
        parts = []
        for lst in distinct:
            where = self.compile({k: tuple(v) == lst for k, v in table.items()})
            parts.append(conj(where, f"{value} in {lit(list(lst))}"))
        return parts[0] if len(parts) == 1 else "(" + " || ".join(f"({p})" for p in parts) + ")"

    def catalog_default(self, path: str, v: str, m: str, g: str) -> Any:
        """``Resolved.value`` for an unset field, for this engine at (version, model, gpu)."""
        ver = self.catalog.engines[self.engine].versions[v]
        if path in ver.defaults:
            return ver.defaults[path]
        if path == "scheduling.maxModelLen":
            return self.catalog.models[m].max_context
        if path.startswith("scheduling."):
            key = path.split(".", 1)[1]
            hw = self.catalog.hardware[g]
            for row in self.catalog.engines[self.engine].defaults_by_gpu_memory:
                if hw.visible_gib >= row["min_gib"] and key in row:
                    return row[key]
        return None

    def eff(self, path: str) -> tuple[str, str]:
        """(value, defined) of the value in effect for ``path``; ``defined`` is false when neither the
        spec nor any default gives one (the Python check then skips)."""
        md = self.model_default(path)
        if md is not None:
            return f"({self.present(path)} ? {self.ref(path)} : {lit(md)})", "true"
        table = self.by_catalog(lambda v, m, g: self.catalog_default(path, v, m, g))
        given = [x for x in table.values() if x is not None]
        if not given:
            return self.ref(path), self.present(path)
        filler = given[0]
        fallback = self.compile({k: (filler if x is None else x) for k, x in table.items()})
        value = f"({self.present(path)} ? {self.ref(path)} : {fallback})"
        if len(given) == len(table):
            return value, "true"
        return value, f"({self.present(path)} || {self.compile({k: x is not None for k, x in table.items()})})"

    def versions_where(self, rule: Rule) -> list[str]:
        return [k for k, ver in self.catalog.engines[self.engine].versions.items()
                if rule.applies(self.engine, ver.traits)]

    def version_in(self, keys: Iterable[str]) -> str:
        keys = list(keys)
        if set(keys) == set(self.versions):
            return "true"
        if not keys:
            return "false"
        return f"{self.dim('version')} in {lit(keys)}"
