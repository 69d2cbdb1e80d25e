"""The engine metrics the probe reads (``data/metrics.yaml``), validated on load.

Pure apart from reading the packaged file once; a malformed entry raises ``MetricsCatalogError`` naming
the field, so a bad edit fails the unit tests rather than a probe run.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpustack_k3.core.findings import Finding
from gpustack_k3.errors import OperationalError

DATA = Path(__file__).with_name("data") / "metrics.yaml"
# the roles the report knows how to use (report.py); a role of the file outside this set is a typo
ROLES = frozenset({"generation_tokens", "preemptions", "kv_usage", "spec_accepted", "spec_drafts",
                   "spec_accept_length", "kv_transfer_failures"})


class MetricsCatalogError(OperationalError, ValueError):
    pass


@dataclass(frozen=True)
class Metric:
    role: str
    name: str
    kind: Literal["counter", "gauge"]
    source: str


@dataclass(frozen=True)
class EngineMetrics:
    engine: str
    prefix: str
    metrics: dict[str, Metric]
    acceptance: Literal["counters", "gauge"]

    def get(self, role: str) -> Metric | None:
        return self.metrics.get(role)


@dataclass(frozen=True)
class MetricsCatalog:
    engines: dict[str, EngineMetrics]
    acceptance_flag_below: float


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise MetricsCatalogError(f"{DATA.name}: {where}: {what}")


def parse_catalog(data: Any) -> MetricsCatalog:
    _need(isinstance(data, dict), "document", "expected a mapping with engines and acceptance_flag_below")
    engines_in = data.get("engines")
    _need(isinstance(engines_in, dict) and bool(engines_in), "engines", "expected a non-empty mapping")
    engines: dict[str, EngineMetrics] = {}
    for eng, e in engines_in.items():
        where = f"engines.{eng}"
        _need(isinstance(e, dict), where, "expected a mapping")
        prefix = e.get("prefix")
        _need(isinstance(prefix, str) and prefix.endswith(":"), f"{where}.prefix", "expected a name ending in ':'")
        mets = e.get("metrics")
        _need(isinstance(mets, dict) and bool(mets), f"{where}.metrics", "expected a non-empty mapping")
        out: dict[str, Metric] = {}
        for role, m in mets.items():
            w = f"{where}.metrics.{role}"
            _need(role in ROLES, w, f"unknown role (known: {', '.join(sorted(ROLES))})")
            _need(isinstance(m, dict) and set(m) == {"name", "kind", "source"}, w, "expected name, kind, source")
            _need(isinstance(m["name"], str) and m["name"].startswith(prefix), f"{w}.name",
                  f"must start with the engine prefix {prefix!r}")
            _need(m["kind"] in ("counter", "gauge"), f"{w}.kind", "counter or gauge")
            _need(m["kind"] != "counter" or m["name"].endswith("_total"), f"{w}.name",
                  "a counter is exposed with its _total suffix")
            _need(isinstance(m["source"], str) and len(m["source"]) > 10, f"{w}.source", "cite where the engine defines it")
            out[role] = Metric(role, m["name"], m["kind"], m["source"])
        acc = e.get("acceptance")
        _need(acc in ("counters", "gauge"), f"{where}.acceptance", "counters or gauge")
        needed = {"spec_accepted", "spec_drafts"} if acc == "counters" else {"spec_accept_length"}
        _need(needed <= set(out), f"{where}.acceptance", f"{acc} needs the roles {', '.join(sorted(needed))}")
        engines[eng] = EngineMetrics(eng, prefix, out, acc)
    flag = data.get("acceptance_flag_below")
    _need(isinstance(flag, (int, float)) and not isinstance(flag, bool) and flag > 1, "acceptance_flag_below",
          "expected a number above 1 (an acceptance length counts the bonus token)")
    return MetricsCatalog(engines, float(flag))


@functools.lru_cache(maxsize=1)
def load_metrics_catalog() -> MetricsCatalog:
    import yaml

    return parse_catalog(yaml.safe_load(DATA.read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------------ finding texts
FINDINGS_DATA = Path(__file__).with_name("data") / "findings.yaml"
FINDING_KEYS = {"severity", "field", "message", "fix", "source"}


@dataclass(frozen=True)
class FindingTemplate:
    rule: str
    severity: Literal["error", "warning", "info"]
    field: str
    message: str
    fix: str
    source: str

    def make(self, **values: Any):
        """The finding with its message filled in (a missing placeholder value is a KeyError: a bug)."""
        return Finding(self.rule, self.severity, self.field, self.message.format(**values), self.fix, self.source)


def parse_findings(data: Any) -> dict[str, FindingTemplate]:
    where = FINDINGS_DATA.name
    if not isinstance(data, dict) or not isinstance(data.get("findings"), dict):
        raise MetricsCatalogError(f"{where}: expected a mapping 'findings'")
    out: dict[str, FindingTemplate] = {}
    for rule, f in data["findings"].items():
        w = f"{where}: findings.{rule}"
        if not (isinstance(rule, str) and rule.startswith("probe.")):
            raise MetricsCatalogError(f"{w}: ids start with 'probe.'")
        if not isinstance(f, dict) or set(f) != FINDING_KEYS:
            raise MetricsCatalogError(f"{w}: expected exactly {', '.join(sorted(FINDING_KEYS))}")
        if f["severity"] not in ("error", "warning", "info"):
            raise MetricsCatalogError(f"{w}.severity: error, warning or info")
        if not all(isinstance(f[k], str) and f[k].strip() for k in FINDING_KEYS):
            raise MetricsCatalogError(f"{w}: every key needs a non-empty text")
        out[rule] = FindingTemplate(rule, f["severity"], f["field"], f["message"], f["fix"], f["source"])
    return out


@functools.lru_cache(maxsize=1)
def load_findings() -> dict[str, FindingTemplate]:
    import yaml

    return parse_findings(yaml.safe_load(FINDINGS_DATA.read_text(encoding="utf-8")))
