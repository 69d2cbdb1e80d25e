"""The rule registry: every rule id any command or the operator can print is defined here once.

A rule is one ``@rule(...)`` definition: its metadata (severity, strict severity, engines and the version
traits that switch it on, field, title, why, fix, source, per-version sources where they differ), its check,
and for a hard error either its CEL translation (``cel=``, or ``cel_rules=`` for a rule that becomes several
CEL rules) or the written reason it has none (``no_cel=``). A rule that a log can also reveal carries its log
check (``log=``) in the same definition. Definitions are validated when they are registered, so a malformed
rule fails the import, not a user's command.

Families (the signature of ``check``):

- ``spec`` and ``args``: ``check(r: Resolved, c: Ctx)`` over a resolved deployment document;
- ``render``: ``check(launch: LaunchSpec, target: str)`` over the launch spec projected on a target;
- ``log``: ``check(tr: ColdStartTracker, c: LogCtx)`` over what the cold-start tracker collected;
- ``schema``: ``check(doc: dict)`` over a raw document the spec model refuses;
- ``topology``: ``check(t: Topology)`` over every role of a deployment (or check-pd's two command lines).

Each check yields ``(field or None, message)`` or ``(field or None, message, fix)``; ``None`` means the
rule's own field and a missing fix the rule's own fix.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.errors import OperationalError
from gpustack_k3.core.findings import Finding, Severity

Family = Literal["spec", "args", "render", "log", "schema", "topology"]
FAMILIES = ("spec", "args", "render", "log", "schema", "topology")
ENGINES = (ENGINE_VLLM, ENGINE_SGLANG)
CHECKED_BY = ("oracle", "runtime-only", "product")
# families whose checks are engine verdicts: each definition says who judges it; the others default per family
_CHECKED_DEFAULT = {"render": "product", "log": "runtime-only", "schema": "product"}
SEVERITIES = ("error", "warning", "info")

Hit = tuple  # (field | None, message) or (field | None, message, fix)

_ID = re.compile(r"^[a-z][a-z0-9]*(?:[-.][a-z0-9]+)*$")
# A source cites a file of this repository (docs/sources.md#<anchor>, a path) or an upstream engine file with its
# version (file.py:line@version). Documents outside the repository, write-up sections and our issue numbers are
# not sources: their facts are restated, with an anchor, in docs/sources.md.
_FORBIDDEN_SOURCE = re.compile(r"§|\bseed\b|\bdomain\b|shared/|/work/|\bissues?\s*#?\d|(?<![\w.-])#\d")
_FORBIDDEN_HINTS = ("§", "seed", "domain", "shared/", "/work/", "issue", "#")
_ANCHOR = re.compile(r"docs/[\w./-]+\.md#[\w-]+")
_TOKEN_SPLIT = re.compile(r"[\s;,(){}]+")


def _bad_citation(src: str) -> str | None:
    """What in a source cites outside this repository and the engines (None when nothing does). Plain substring
    tests first: this runs for every rule at import, inside the CLI's start-up budget."""
    if "docs/" in src:
        src = _ANCHOR.sub("docs/x.md", src)     # an anchor's own words are not a citation
    if any(h in src for h in _FORBIDDEN_HINTS):
        m = _FORBIDDEN_SOURCE.search(src)
        if m:
            return m.group(0)
    if ".md" in src:
        return next((t for t in _TOKEN_SPLIT.split(src) if ".md" in t and not t.startswith("docs/")), None)
    return None


class Rule:
    """One rule. A plain class (no dataclass): the registry is built at every CLI start, and generating a dataclass's
    methods costs more than all the rules' definitions together."""

    __slots__ = ("id", "family", "severity", "engines", "field", "title", "why", "fix", "source", "sources", "when",
                 "strict_severity", "check", "log", "cel", "cel_rules", "no_cel", "checked_by", "fails_at")

    def __init__(self, id: str, family: Family, severity: Severity, engines: tuple[str, ...], field: str, title: str,
                 why: str, fix: str, source: str, sources: dict[str, str], when: dict[str, tuple],
                 strict_severity: Severity | None, check: Callable[..., Iterable[Hit]] | None,
                 log: Callable[..., Iterable[Hit]] | None, cel: Callable[..., str | None] | None,
                 cel_rules: Callable[..., list] | None, no_cel: str | None, checked_by: str = "product",
                 fails_at: str | None = None) -> None:
        self.id, self.family, self.severity, self.engines, self.field = id, family, severity, engines, field
        self.title, self.why, self.fix = title, why, fix
        self.source = source
        self.sources = sources                   # "engine version" or "engine" -> source, where it differs
        self.when = when                         # trait -> allowed values (spec/args checks)
        self.strict_severity = strict_severity
        self.check = check
        self.log = log                           # the log evidence of a spec rule
        self.cel = cel                           # Builder -> the "bad" condition for one engine
        self.cel_rules = cel_rules               # (catalog, builders, spec_model, rule) -> [CelRule]
        self.no_cel = no_cel
        # who judges the rule's verdict: "oracle" (the release's own config-time validation, run on CPU by the
        # engine oracle, decides it), "runtime-only" (the engine fails or degrades later than config time:
        # ``fails_at`` says when; the rule's source says where), "product" (this product's own constraint:
        # catalog, platform, secrets, targets; no engine verdict to compare)
        self.checked_by = checked_by
        self.fails_at = fails_at

    def __repr__(self) -> str:
        return f"Rule({self.id!r}, {self.family}, {self.severity})"

    # ---- applicability
    def applies(self, engine: str, traits: dict[str, Any]) -> bool:
        """Whether the rule's check runs for this engine and an engine version with these traits."""
        return engine in self.engines and all(traits.get(t) in allowed for t, allowed in self.when.items())

    def versions(self, catalog: Any) -> list[tuple[str, str]]:
        """(engine, version key) of every catalog version the rule's check applies to."""
        return [(eng, key) for eng in self.engines for key, v in catalog.engines[eng].versions.items()
                if self.applies(eng, v.traits)]

    def source_for(self, engine: str | None, version: str | None) -> str:
        """The source behind this rule for one engine version (the rule's own source where none differs)."""
        return (self.sources.get(f"{engine} {version}") or self.sources.get(engine or "") or self.source)

    @property
    def hard(self) -> bool:
        """An error, or an error under ``--strict``: the rules CEL must express or say why not."""
        return self.severity == "error" or self.strict_severity == "error"

    # ---- findings
    def findings(self, hits: Iterable[Hit], *, strict: bool = False, engine: str | None = None,
                 version: str | None = None) -> Iterator[Finding]:
        sev = self.strict_severity if (strict and self.strict_severity) else self.severity
        src = self.source_for(engine, version)
        for hit in hits:
            fld, msg = hit[0], hit[1]
            fix = hit[2] if len(hit) > 2 and hit[2] else self.fix
            yield Finding(self.id, sev, fld or self.field, msg, fix, src)


class ReleaseRule(Rule):
    """A rule switched on for the releases its ``sources`` name (``"<engine> <version key>"``), not for every release
    whose traits match: the registry's ``when`` reads traits, and a release key is not one. Its check returns
    nothing for another release either: ``of`` guards it here, once for every such rule. (The engine-check tables'
    rules, core/rules/checks.py, and the per-release Python rules of core/rules/vllm_checks.py and
    core/rules/sglang_checks_smiss.py.)"""

    __slots__ = ()

    @classmethod
    def of(cls, r: Rule) -> "ReleaseRule":
        """The registered (and validated) rule ``r`` as a ReleaseRule (same definition; its check runs only for a
        release its sources name)."""
        new = object.__new__(cls)
        for name in Rule.__slots__:
            object.__setattr__(new, name, getattr(r, name))
        if r.check is not None:
            object.__setattr__(new, "check", _on_releases(r.check, frozenset(r.sources)))
        return new

    def versions(self, catalog: Any) -> list[tuple[str, str]]:
        return [(eng, key) for eng in self.engines for key in catalog.engines[eng].versions
                if f"{eng} {key}" in self.sources]


def _on_releases(check: Callable[..., Iterable[Hit]], releases: frozenset[str]) -> Callable[..., Iterable[Hit]]:
    """``check`` for the releases named ``"<engine> <version key>"`` in ``releases``; nothing for any other."""
    def on_releases(r: Any, c: Any) -> Iterable[Hit]:
        if r.version is None or f"{r.engine.engine} {r.version.key}" not in releases:
            return ()
        return check(r, c)
    return functools.update_wrapper(on_releases, check)   # the check's name and module stay the rule's


RULES: dict[str, Rule] = {}


class RuleDefinitionError(OperationalError):
    """A rule definition is malformed (a bug in the package, found when it is imported)."""


def _problems(r: Rule) -> list[str]:
    out = []
    if not _ID.match(r.id):
        out.append("id must be lower-case words joined by '-' or '.'")
    if r.family not in FAMILIES:
        out.append(f"family {r.family!r} is not one of {FAMILIES}")
    if r.severity not in SEVERITIES or (r.strict_severity is not None and r.strict_severity not in SEVERITIES):
        out.append("severity must be error, warning or info")
    if not r.engines or set(r.engines) - set(ENGINES):
        out.append(f"engines must be a non-empty subset of {ENGINES}")
    for name in ("field", "title", "why", "fix", "source"):
        if len(getattr(r, name).strip()) < 3:
            out.append(f"{name} is empty")
    for key, src in [("source", r.source), *((f"sources[{k}]", v) for k, v in r.sources.items())]:
        bad = _bad_citation(src)
        if bad:
            out.append(f"{key} cites {bad!r}: cite docs/sources.md#<anchor> or an engine file:line@version")
    for k in r.sources:
        eng = k.split(" ", 1)[0]
        if eng not in r.engines:
            out.append(f"sources key {k!r} names an engine the rule does not apply to")
    for t, allowed in r.when.items():
        if not isinstance(allowed, tuple) or not allowed:
            out.append(f"when[{t}] must list the allowed trait values")
    if r.check is None:
        out.append("no check")
    if r.checked_by not in CHECKED_BY:
        out.append(f"checked_by must be one of {CHECKED_BY} (spec, args and topology rules say it)")
    if r.checked_by == "runtime-only" and len((r.fails_at or "").strip()) < 10:
        out.append("a runtime-only rule says when the engine fails (fails_at=)")
    if r.log is not None and r.family not in ("spec", "args"):
        out.append("log= is the log evidence of a spec rule; a log rule's check is its log check")
    translations = sum(x is not None for x in (r.cel, r.cel_rules, r.no_cel))
    if r.hard and translations != 1:
        out.append("a hard error needs exactly one of cel=, cel_rules= or no_cel='reason'")
    if not r.hard and translations:
        out.append("only hard errors have a CEL translation (CEL can only refuse)")
    if r.no_cel is not None and len(r.no_cel) < 30:
        out.append("no_cel must say why the rule cannot be CEL")
    if (r.cel or r.cel_rules) and r.family not in ("spec", "args"):
        out.append("only spec and args rules read the spec that CEL sees")
    return out


def rule(rule_id: str, *, family: Family, severity: Severity, engines: Iterable[str], field: str, title: str,
         why: str, fix: str, source: str, sources: dict[str, str] | None = None,
         when: dict[str, Iterable[Any]] | None = None, strict_severity: Severity | None = None,
         log: Callable | None = None, cel: Callable | None = None, cel_rules: Callable | None = None,
         no_cel: str | None = None, checked_by: str | None = None,
         fails_at: str | None = None) -> Callable[[Callable], Callable]:
    """Define a rule; the decorated function is its check (see the module docstring for its signature)."""
    def deco(fn: Callable) -> Callable:
        by = checked_by if checked_by is not None else _CHECKED_DEFAULT.get(family, "")
        at = fails_at if fails_at is not None else ("in the running engine: the log shows it" if family == "log" else None)
        r = Rule(rule_id, family, severity, tuple(engines), field, title, why, fix, source, dict(sources or {}),
                 {k: tuple(v) for k, v in (when or {}).items()}, strict_severity, fn, log, cel, cel_rules, no_cel,
                 by, at)
        problems = _problems(r)
        if rule_id in RULES:
            problems.append("defined twice")
        if problems:
            raise RuleDefinitionError(f"rule {rule_id}: " + "; ".join(problems))
        RULES[rule_id] = r
        return fn
    return deco


def of_family(*families: str) -> list[Rule]:
    """The rules of these families, family by family in the order given, each in definition order."""
    return [r for fam in families for r in RULES.values() if r.family == fam]


def log_evidence() -> list[Rule]:
    """Every rule with a log check: the log family plus the spec rules a log can also reveal."""
    return [r for r in RULES.values() if r.family == "log" or r.log is not None]
