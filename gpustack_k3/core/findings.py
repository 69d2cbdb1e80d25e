"""The one shape every check speaks: rule catalog, argv checker and log doctor alike."""
from __future__ import annotations

from typing import Literal

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Finding:
    """One verdict. ``rule`` is a stable id (``explain RULE`` describes it); ``field`` is the spec
    path it concerns (``spec.parallel.dcp``) or, for logs, the phase; ``source`` says where the
    knowledge comes from (seed section or engine file:line@version).

    Immutable by convention, compared and hashed by value (plain: docs/architecture.md, Start-up)."""

    __slots__ = _FIELDS = ("rule", "severity", "field", "message", "fix", "source")

    def __init__(self, rule: str, severity: Severity, field: str, message: str, fix: str, source: str) -> None:
        self.rule = rule
        self.severity = severity
        self.field = field
        self.message = message
        self.fix = fix
        self.source = source

    def _key(self) -> tuple:
        return tuple(getattr(self, k) for k in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Finding) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "Finding(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS) + ")"

    def replace(self, **changes: str) -> Finding:
        return Finding(**{**self.to_dict(), **changes})

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._FIELDS}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.rule, f.field))


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
