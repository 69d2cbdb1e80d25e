"""CEL ``x-kubernetes-validations`` derived from the rule catalog, so the API server refuses what
``gpustack_k3.core.rules.validate`` refuses, with no operator running.

Every hard error of ``catalog/data/rules.yaml`` is either expressed here or listed in
``NOT_IN_CEL`` with the reason (tested). Applicability, defaults and value lists come from the
catalog data (``when`` traits → version lists, version ``defaults``, ``kv_cache_dtypes``,
``dcp_attention_backends``, model ``max_context``, hardware ``gpus_per_node``), so adding a version
or a model to the catalog changes the generated rules. The expressions mirror the checks in
``core/rules.py`` one by one, including how ``Resolved.value`` fills an unset field (spec value →
version default → model context → GPU-memory scheduler default).

Kubernetes CEL semantics the generator respects: ``has()`` on a field whose parent is absent is an
error (so every access is guarded by a ``has`` chain), a field explicitly set to ``null`` counts as
absent (``has`` is false; comparing with ``null`` does not compile), ``number`` fields are doubles.
Rules are attached to ``spec`` (``self`` = spec) except the root rule on ``metadata.name``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from gpustack_k3.catalog.loader import Catalog, RuleEntry

# Hard errors CEL does not express, and why (each is still enforced by the operator's validation,
# which marks the resource Invalid with the same finding).
NOT_IN_CEL: dict[str, str] = {
    "argv-refused": "a property of an engine command line read by check-args/import/plan; a K3Deployment holds a "
                    "spec, never a command line",
    "fixed-memory-exceeds-budget": "needs the memory planner (weights, activations, CUDA graphs, KV bytes per token) "
                                   "in floating point; not a schema-level check",
    "vllm-max-model-len-exceeds-kv": "needs the planner's KV capacity in tokens (same as fixed-memory-exceeds-budget)",
    "extra-arg-duplicates-field": "tokenising spec.extraArgs and matching every flag alias per version would iterate an "
                                  "unbounded list of unbounded strings, beyond the API server's CEL cost budget",
    "extra-arg-platform-owned": "iterates spec.extraArgs (unbounded list of strings): beyond the CEL cost budget",
    "extra-arg-unknown": "needs the per-version known-flag tables (hundreds of flags) and argv tokenising",
    "extra-arg-malformed": "argv tokenising across neighbouring list items of spec.extraArgs",
    "spec-json-tensor-parallel-size": "spec.speculative.extraConfig is free-form JSON (x-kubernetes-preserve-unknown-fields); "
                                      "the API server does not expose such data to CEL",
    "spec-json-key-duplicates-field": "spec.speculative.extraConfig is free-form JSON (x-kubernetes-preserve-unknown-fields); "
                                      "the API server does not expose such data to CEL",
    "secret-in-env": "a regular expression over every key of the unbounded spec.env map: beyond the CEL cost budget",
}

# SGLang lets a context above the model's be forced with this variable (rule context-above-model,
# sglang configs/model_config.py:1291-1316 @0.5.23); core/rules.py checks the same name.
SGLANG_CONTEXT_OVERRIDE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"

# Strings a CEL rule reads get this maxLength in the CRD (when the model sets none) so that the API
# server's static cost estimate stays bounded; far above any real value.
CEL_STRING_MAX_LENGTH = 4096


@dataclass(frozen=True)
class CelRule:
    rule_id: str               # catalog rule id (or "metadata-name" for the root rule)
    expression: str            # true = admitted
    message: str
    field_path: str | None     # relative to the node the rule is attached to (".parallel.dcp")
    scope: str = "spec"        # "spec" or "root"

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


@dataclass
class Builder:
    """Expression helpers for one engine; ``refs`` collects every spec path a rule reads."""

    catalog: Catalog
    spec_model: type
    engine: str
    refs: set[str] = field(default_factory=set)

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

    def versions_where(self, entry: RuleEntry) -> list[str]:
        return [k for k, ver in self.catalog.engines[self.engine].versions.items()
                if entry.applies(self.engine, ver.traits)]

    def version_in(self, keys: Iterable[str]) -> str:
        keys = list(keys)
        if set(keys) == set(self.versions):
            return "true"
        if not keys:
            return "false"
        return f"{self.dim('version')} in {lit(keys)}"


# ----------------------------------------------------------------------------- per-rule conditions
# Each returns the "bad" condition for one engine (the version applicability and the catalog guard
# are added by the caller), mirroring the check of the same id in core/rules.py.

Cond = Callable[[Builder], "str | None"]
CONDITIONS: dict[str, Cond] = {}


def cond(rule_id: str) -> Callable[[Cond], Cond]:
    def deco(fn: Cond) -> Cond:
        CONDITIONS[rule_id] = fn
        return fn
    return deco


def _dcp(b: Builder) -> str:
    return b.eff("parallel.dcp")[0]


def _tp(b: Builder) -> str:
    return b.eff("parallel.tp")[0]


def _method(b: Builder) -> str:
    return b.eff("speculative.method")[0]


@cond("vllm-dcp-with-dspark")
def _(b):
    return f"{_dcp(b)} > 1 && {_method(b)} == 'dspark'"


@cond("vllm-dcp-with-spec")
def _(b):
    return f"{_dcp(b)} > 1 && {_method(b)} != 'none'"


@cond("vllm-dspark-dcp-backend")
def _(b):
    p = "speculative.attentionBackend"
    ok = b.member(b.ref(p), b.by_catalog(lambda v, m, g: list(b.catalog.engines[b.engine].versions[v].dcp_attention_backends)))
    # unset: the engine's selector picks a DCP-capable backend itself (backend.py:238-243 @0.33.0)
    return f"{_dcp(b)} > 1 && {_method(b)} == 'dspark' && {b.present(p)} && !({ok})"


@cond("dcp-divides-tp")
def _(b):
    return f"{_dcp(b)} > 1 && {_tp(b)} % {_dcp(b)} != 0"


@cond("parallel-fits-node")
def _(b):
    return f"{_tp(b)} * {b.eff('parallel.pp')[0]} * {b.eff('parallel.dp')[0]} > {b.eff('hardware.gpuCount')[0]}"


@cond("gpu-count-exceeds-node")
def _(b):
    per_node = b.compile(b.by_catalog(lambda v, m, g: b.catalog.hardware[g].gpus_per_node))
    return f"{b.eff('hardware.gpuCount')[0]} > {per_node}"


@cond("memory-fraction-range")
def _(b):
    p = "memory.fraction"
    return f"{b.present(p)} && !({b.ref(p)} > 0.0 && {b.ref(p)} <= 1.0)"


@cond("mamba-ratio-range")
def _(b):
    p = "memory.mambaFullMemoryRatio"
    return f"{b.present(p)} && {b.ref(p)} <= 0.0"


@cond("spec-draft-wrong-engine")
def _(b):
    p = "speculative.draftModel"
    d = b.ref(p)
    clauses = []
    for mkey in b.models:
        model = b.catalog.models[mkey]
        mine = model.engines[b.engine].draft
        others = [f.draft for e, f in model.engines.items() if e != b.engine and f.draft is not None]
        if not others:
            continue
        names = [n for o in others for n in (o.modelscope, o.config_name, o.path)]
        tails = "|".join(re.escape(o.modelscope.split("/")[-1]) for o in others)
        bad = f"({d} in {lit(names)} || {d}.matches({lit(f'({tails})/*$')}))"
        if mine is not None:
            bad = f"!({d} in {lit([mine.modelscope, mine.config_name, mine.path])}) && {bad}"
        clauses.append(f"({b.dim('model')} == {lit(mkey)} && {bad})")
    if not clauses:
        return None
    return f"{b.present(p)} && size({d}) > 0 && ({' || '.join(clauses)})"


@cond("spec-draft-missing")
def _(b):
    p = "speculative.draftModel"
    return f"{_method(b)} in ['dspark', 'eagle3'] && !({b.present(p)} && size({b.ref(p)}) > 0)"


@cond("spec-method-unsupported")
def _(b):
    return f"{_method(b)} == 'dspark'"


@cond("spec-draft-tp")
def _(b):
    p = "speculative.draftTensorParallelSize"
    return f"{b.present(p)} && {b.ref(p)} != 1 && {b.ref(p)} != {_tp(b)}"


@cond("batched-tokens-below-seqs")
def _(b):
    (bv, bd), (sv, sd) = b.eff("scheduling.maxNumBatchedTokens"), b.eff("scheduling.maxNumSeqs")
    return conj(bd, sd, f"{bv} < {sv}")


@cond("batched-tokens-below-max-len")
def _(b):
    (cv, cd) = b.eff("scheduling.chunkedPrefill")
    (bv, bd), (mv, md) = b.eff("scheduling.maxNumBatchedTokens"), b.eff("scheduling.maxModelLen")
    return conj(cd, f"{cv} == false", bd, md, f"{bv} < {mv}")


@cond("long-prefill-above-max-len")
def _(b):
    p = "scheduling.longPrefillTokenThreshold"
    mv, md = b.eff("scheduling.maxModelLen")
    return conj(b.present(p), md, f"{b.ref(p)} > {mv}")


@cond("kv-cache-dtype-invalid")
def _(b):
    p = "memory.kvCacheDtype"
    ok = b.member(b.ref(p), b.by_catalog(lambda v, m, g: list(b.catalog.engines[b.engine].versions[v].kv_cache_dtypes)))
    return f"{b.present(p)} && !({ok})"


@cond("context-above-model")
def _(b):
    p = "scheduling.maxModelLen"
    limit = b.compile(b.by_catalog(lambda v, m, g: b.catalog.models[m].max_context))
    out = f"{b.present(p)} && {b.ref(p)} > {limit}"
    if b.engine == "sglang":
        env = b.present("env")
        out += (f" && !({env} && {lit(SGLANG_CONTEXT_OVERRIDE_ENV)} in self.env && "
                f"self.env[{lit(SGLANG_CONTEXT_OVERRIDE_ENV)}] == '1')")
    return out


@cond("sglang-kimi-k3-dcp-decode-backend")
def _(b):
    p = "sglang.decodeAttentionBackend"
    versions = b.catalog.engines[b.engine].versions
    table = b.by_catalog(lambda v, m, g: list(versions[v].traits.get("kimi_k3_dcp_decode_backends") or []))
    if not any(table.values()):
        return None
    has_list = b.compile({k: bool(v) for k, v in table.items()})
    return conj(f"{_dcp(b)} > 1 && {b.dim('model')} == 'kimi-k3' && {b.present(p)}", has_list,
                f"!({b.member(b.ref(p), table)})")


# ----------------------------------------------------------------------------- assembly

def _spec_field_path(schema: dict[str, Any], dotted: str) -> str | None:
    """The longest prefix of ``spec.a.b.c`` that is a declared property, as ``.a.b``."""
    parts = dotted.split(".")
    if parts[0] != "spec":
        return None
    node, out = schema, []
    for part in parts[1:]:
        props = node.get("properties") or {}
        if part not in props:
            break
        node = props[part]
        out.append(part)
    return "." + ".".join(out) if out else None


def _message(entry: RuleEntry, field_name: str) -> str:
    return f"{field_name}: {entry.title}. Fix: {entry.fix} [rule {entry.id}]"


def _per_engine(builders: dict[str, Builder], bad: dict[str, str]) -> str:
    parts = [f"(self.engine.name == {lit(e)} && {expr})" for e, expr in bad.items()]
    return "!(" + " || ".join(parts) + ")"


def _field_unsupported(cat: Catalog, builders: dict[str, Builder], spec_model: type,
                       entry: RuleEntry) -> list[CelRule]:
    """One rule per spec field that some engine/version cannot carry (core/rules.py field-unsupported)."""
    where: dict[str, dict[str, list[str]]] = {}       # path -> engine -> versions where unsupported
    engines = list(cat.engines)
    for e in engines:
        eng = cat.engines[e]
        versions = list(eng.versions)
        mapped = {f.field for f in eng.flags}
        for other in engines:
            if other == e:
                continue
            opt_model = spec_model.model_fields[other].annotation
            for name in opt_model.model_fields:
                where.setdefault(f"{other}.{name}", {}).setdefault(e, versions)
        for vkey, ver in eng.versions.items():
            for path in ver.unsupported_fields:
                cur = where.setdefault(path, {}).setdefault(e, [])
                if vkey not in cur:
                    where[path][e] = [*cur, vkey]
        for sect in ("parallel", "memory", "scheduling", "parsers", "model"):
            for name in spec_model.model_fields[sect].annotation.model_fields:
                path = f"{sect}.{name}"
                if path in mapped or path in ("model.name", "model.source", "model.path"):
                    continue
                where.setdefault(path, {})[e] = versions
    out = []
    for path in sorted(where):
        bad = {}
        said = []
        for e, vers in where[path].items():
            b = builders[e]
            bad[e] = conj(b.known(), b.version_in(vers))
            said.append(e if set(vers) == set(b.versions) else f"{e} {', '.join(vers)}")
        first = next(iter(builders.values()))
        expr = f"!({first.present(path)}) || {_per_engine(builders, bad)}"
        msg = (f"spec.{path}: has no meaning for {'; '.join(said)} (nothing would carry it to the engine). "
               f"Fix: remove spec.{path}, or use an engine/version that supports it [rule {entry.id}]")
        out.append(CelRule(entry.id, expr, msg, "." + path))
    return out


def _unknown_catalog(cat: Catalog, builders: dict[str, Builder], entry: RuleEntry) -> list[CelRule]:
    out = []
    ver_ok = {e: f"{b.dim('version')} in {lit(b.versions)}" for e, b in builders.items()}
    known = "; ".join(f"{e}: {', '.join(b.versions)}" for e, b in builders.items())
    bad = " || ".join(f"(self.engine.name == {lit(e)} && !({x}))" for e, x in ver_ok.items())
    out.append(CelRule(entry.id, f"!({bad})",
                       f"spec.engine.version: unknown engine version; known: {known}. Fix: {entry.fix} [rule {entry.id}]",
                       ".engine.version"))
    mod_ok = {e: f"{b.dim('model')} in {lit(b.models)}" for e, b in builders.items()}
    known = "; ".join(f"{e}: {', '.join(b.models)}" for e, b in builders.items())
    out.append(CelRule(entry.id, "!(" + " || ".join(f"(self.engine.name == {lit(e)} && !({x}))" for e, x in mod_ok.items()) + ")",
                       f"spec.model.name: model not in the catalog for this engine; known: {known}. Fix: {entry.fix} "
                       f"[rule {entry.id}]", ".model.name"))
    b = next(iter(builders.values()))
    out.append(CelRule(entry.id, f"{b.dim('gpu')} in {lit(b.gpus)}",
                       f"spec.hardware.gpuType: unknown GPU type; known: {', '.join(b.gpus)}. Fix: {entry.fix} "
                       f"[rule {entry.id}]", ".hardware.gpuType"))
    return out


@dataclass
class Generated:
    rules: list[CelRule]
    refs: set[str]                # spec paths the rules read (they get a maxLength when strings)


def generate(cat: Catalog, spec_model: type, spec_schema: dict[str, Any]) -> Generated:
    builders = {e: Builder(cat, spec_model, e) for e in cat.engines}
    rules: list[CelRule] = []
    for rid, entry in cat.rules.items():
        if entry.severity != "error" or rid in NOT_IN_CEL:
            continue
        if rid == "unknown-catalog-entry":
            rules += _unknown_catalog(cat, builders, entry)
            continue
        if rid == "field-unsupported":
            rules += _field_unsupported(cat, builders, spec_model, entry)
            continue
        fn = CONDITIONS.get(rid)
        if fn is None:
            raise KeyError(f"hard-error rule {rid} is neither expressed in CEL nor listed in NOT_IN_CEL")
        bad = {}
        for e in entry.engines:
            b = builders[e]
            vers = b.versions_where(entry)
            c = fn(b)
            if c is None or not vers:
                continue
            bad[e] = conj(b.known(), b.version_in(vers), c)
        if not bad:
            continue
        rules.append(CelRule(rid, _per_engine(builders, bad), _message(entry, entry.field),
                             _spec_field_path(spec_schema, entry.field)))
    refs = set().union(*(b.refs for b in builders.values()))
    return Generated(rules, refs)


def metadata_name_rule(pattern: str, max_length: int) -> CelRule:
    """Root rule: the resource name becomes a label value and a DNS name of the rendered objects."""
    return CelRule(
        "metadata-name",
        f"size(self.metadata.name) <= {max_length} && self.metadata.name.matches({lit(pattern)})",
        f"metadata.name: must be a DNS label of at most {max_length} characters (lower-case letters, digits, '-'). "
        "Fix: rename the resource, e.g. kimi-k3-vllm",
        None, scope="root")
