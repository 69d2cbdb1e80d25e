"""The one shape every check speaks: rule catalog, argv checker and log doctor alike."""
from __future__ import annotations

from typing import Literal, NamedTuple

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Finding(NamedTuple):
    """One verdict. ``rule`` is a stable id (``explain RULE`` describes it); ``field`` is the spec
    path it concerns (``spec.parallel.dcp``) or, for logs, the phase; ``source`` says where the
    knowledge comes from (seed section or engine file:line@version)."""

    rule: str
    severity: Severity
    field: str
    message: str
    fix: str
    source: str

    def to_dict(self) -> dict:
        return self._asdict()


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.rule, f.field))


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
