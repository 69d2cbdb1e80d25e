"""Does KV move from prefill to decode? The verdict from two scrapes of every engine's own /metrics (before and
after a run of traffic through the router) and that traffic (issue 34 item 3). Pure: no I/O but reading the
packaged catalog ``data/kvtransfer.yaml`` once, which names every series and cites the release defining it.

    verdict = decide(scrapes, Traffic(requests=8, ok=8, prompt_tokens=(300,) * 8))
    verdict.status      # "True" (KV moves) | "False" (it does not) | "Unknown" (cannot tell)
    verdict.reason      # the KVTransfer condition's reason, e.g. DecodeRecomputedPrompts
    verdict.message     # the figures that decided it

The rules, first match wins: a side without both scrapes, nothing answered, engines not told apart, a counter
that went backwards -> Unknown; failed transfers counted -> False; the "arrived" series missing -> Unknown;
nothing arrived -> False when decode computed the prompts itself (or, SGLang, no transfer completed), else
Unknown (prompts shorter than a block, decode's own cache, traffic that missed the decode); something arrived
-> False when decode still computed more than the tail a moving KV leaves it, Unknown when prefill computed
nothing (the KV came from a store, not from this prefill) or SGLang completed fewer transfers than answers,
else True.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.probe.catalog import MetricsCatalogError, load_metrics_catalog

DATA = Path(__file__).with_name("data") / "kvtransfer.yaml"
SIGNALS = ("arrived", "recomputed", "local_hits", "prefilled", "failures", "answered")
SIDES = ("prefill", "decode", "both")
STATUSES = ("True", "False", "Unknown")
ROLES = ("prefill", "decode")

Status = Literal["True", "False", "Unknown"]


# ----------------------------------------------------------------------------------------------- catalog
@dataclass(frozen=True)
class Series:
    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return name == self.name and all(labels.get(k) == v for k, v in self.labels)

    def text(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.name}{{{inner}}}" if inner else self.name


@dataclass(frozen=True)
class Signal:
    key: str
    side: Literal["prefill", "decode", "both"]
    unit: Literal["tokens", "transfers", "requests"]
    absent: Literal["unknown", "zero"]
    series: tuple[Series, ...]
    source: str

    def roles(self) -> tuple[str, ...]:
        return ROLES if self.side == "both" else (self.side,)


@dataclass(frozen=True)
class EngineEvidence:
    engine: str
    prefix: str
    tail: Literal["block", "none"]
    signals: dict[str, Signal]
    block_size: tuple[str, str] | None     # (info gauge, label)


@dataclass(frozen=True)
class Reason:
    name: str
    status: Status
    message: str
    fix: str


@dataclass(frozen=True)
class KVCatalog:
    engines: dict[str, EngineEvidence]
    reasons: dict[str, Reason]


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise MetricsCatalogError(f"{DATA.name}: {where}: {what}")


def _series(items: Any, where: str, prefix: str) -> tuple[Series, ...]:
    _need(isinstance(items, list) and bool(items), where, "expected a non-empty list of {name, labels?}")
    out = []
    for i, s in enumerate(items):
        w = f"{where}[{i}]"
        _need(isinstance(s, dict) and set(s) <= {"name", "labels"} and "name" in s, w, "expected name and labels")
        _need(isinstance(s["name"], str) and s["name"].startswith(prefix), f"{w}.name",
              f"must start with the engine prefix {prefix!r}")
        labels = s.get("labels") or {}
        _need(isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()),
              f"{w}.labels", "expected a mapping of label to value")
        out.append(Series(s["name"], tuple(sorted(labels.items()))))
    return tuple(out)


def _signal(key: str, s: Any, where: str, prefix: str) -> Signal:
    _need(key in SIGNALS, where, f"unknown signal (known: {', '.join(SIGNALS)})")
    _need(isinstance(s, dict) and set(s) == {"side", "unit", "absent", "series", "source"}, where,
          "expected side, unit, absent, series, source")
    _need(s["side"] in SIDES, f"{where}.side", " | ".join(SIDES))
    _need(s["unit"] in ("tokens", "transfers", "requests"), f"{where}.unit", "tokens | transfers | requests")
    _need(s["absent"] in ("unknown", "zero"), f"{where}.absent", "unknown | zero")
    _need(isinstance(s["source"], str) and len(s["source"]) > 10, f"{where}.source", "cite where the engine defines it")
    return Signal(key, s["side"], s["unit"], s["absent"], _series(s["series"], f"{where}.series", prefix), s["source"])


def parse_catalog(data: Any, prefixes: Mapping[str, str]) -> KVCatalog:
    """The catalog document -> KVCatalog; ``prefixes``: each engine's metric prefix (the probe's metrics catalog)."""
    _need(isinstance(data, dict) and set(data) == {"engines", "reasons"}, "document", "expected engines and reasons")
    _need(isinstance(data["engines"], dict) and bool(data["engines"]), "engines", "expected a non-empty mapping")
    engines: dict[str, EngineEvidence] = {}
    for eng, e in data["engines"].items():
        where = f"engines.{eng}"
        _need(eng in prefixes, where, f"not an engine of the metrics catalog ({', '.join(sorted(prefixes))})")
        _need(isinstance(e, dict) and set(e) <= {"block_size", "tail", "signals"}, where,
              "expected tail, signals and block_size (optional)")
        _need(e.get("tail") in ("block", "none"), f"{where}.tail", "block | none")
        sig = e.get("signals")
        _need(isinstance(sig, dict), f"{where}.signals", "expected a mapping")
        signals = {k: _signal(k, v, f"{where}.signals.{k}", prefixes[eng]) for k, v in sig.items()}
        _need("arrived" in signals, f"{where}.signals", "needs 'arrived'")
        bs = e.get("block_size")
        _need(bs is None or (isinstance(bs, dict) and set(bs) == {"name", "label"}), f"{where}.block_size",
              "expected name and label")
        _need(e["tail"] != "block" or bs is not None, f"{where}.block_size", "tail: block needs the block size")
        engines[eng] = EngineEvidence(eng, prefixes[eng], e["tail"], signals,
                                      None if bs is None else (bs["name"], bs["label"]))
    reasons_in = data["reasons"]
    _need(isinstance(reasons_in, dict), "reasons", "expected a mapping")
    reasons: dict[str, Reason] = {}
    for name, r in reasons_in.items():
        w = f"reasons.{name}"
        _need(isinstance(name, str) and re.fullmatch(r"[A-Z][A-Za-z]+", name) is not None, w, "a CamelCase reason")
        _need(isinstance(r, dict) and set(r) == {"status", "message", "fix"}, w, "expected status, message, fix")
        _need(r["status"] in STATUSES, f"{w}.status", " | ".join(STATUSES))
        _need(all(isinstance(r[k], str) and r[k].strip() for k in ("message", "fix")), w, "message and fix are texts")
        reasons[name] = Reason(name, r["status"], r["message"], r["fix"])
    missing = sorted(set(_REASONS_USED) - set(reasons))
    _need(not missing, "reasons", f"missing {', '.join(missing)}")
    return KVCatalog(engines, reasons)


# the reasons decide() can give: each must be in the catalog (checked on load)
_REASONS_USED = ("KVTransferred", "TransferFailures", "DecodeRecomputedPrompts", "NoTransfers", "NoTraffic",
                 "NoMetrics", "EngineUnknown", "CountersReset", "NoTransferMetric", "PromptsTooShort",
                 "DecodeCacheServed", "NoDecodeTraffic", "TransfersBelowTraffic", "PrefillIdle")


@functools.lru_cache(maxsize=1)
def load_kv_catalog() -> KVCatalog:
    import yaml

    prefixes = {e: m.prefix for e, m in load_metrics_catalog().engines.items()}
    return parse_catalog(yaml.safe_load(DATA.read_text(encoding="utf-8")), prefixes)


# ------------------------------------------------------------------------------------------ exposition
_TYPE = re.compile(r"^#\s*TYPE\s+(\S+)\s+\S+")
_SUFFIXES = ("_total", "_count", "_sum", "_bucket", "_created")


@dataclass(frozen=True)
class Exposition:
    """One /metrics answer: its samples with their labels, and the metric names it declares (``# TYPE``)."""
    samples: tuple[tuple[str, dict[str, str], float], ...]
    declared: frozenset[str]

    def has(self, name: str) -> bool:
        if name in self.declared or any(n == name for n, _, _ in self.samples):
            return True
        base = next((name[: -len(s)] for s in _SUFFIXES if name.endswith(s)), None)
        return base is not None and base in self.declared

    def value(self, series: Series) -> float:
        return sum(v for n, lab, v in self.samples if series.matches(n, lab))

    def label(self, name: str, label: str) -> str | None:
        return next((lab.get(label) for n, lab, _ in self.samples if n == name and label in lab), None)

    def prefixed(self, prefix: str) -> int:
        return sum(1 for n in {n for n, _, _ in self.samples} | set(self.declared) if n.startswith(prefix))


def parse_samples(text: str) -> Exposition:
    """Prometheus text -> Exposition; each sample line read by ``prometheus_client.parser`` on its own (a line it
    refuses costs only that line), NaN samples left out."""
    samples: list[tuple[str, dict[str, str], float]] = []
    declared: set[str] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _TYPE.match(line):
                declared.add(m.group(1))
            continue
        try:
            found = [s for fam in text_string_to_metric_families(line + "\n") for s in fam.samples]
        except ValueError:
            continue
        samples += [(s.name, dict(s.labels), s.value) for s in found if not math.isnan(s.value)]
    return Exposition(tuple(samples), frozenset(declared))


# ------------------------------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class Scrape:
    """One engine's /metrics before and after the run (None: not read, ``why`` says why)."""
    role: Literal["prefill", "decode"]
    url: str
    before: Exposition | None
    after: Exposition | None
    why: str = ""


@dataclass(frozen=True)
class Traffic:
    """What went through the router between the two scrapes."""
    requests: int
    ok: int
    prompt_tokens: tuple[int, ...] = ()      # per answered request, from usage (empty: not reported)


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str
    message: str
    fix: str
    engine: str | None = None
    evidence: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return {"True": "moving", "False": "not-moving", "Unknown": "unknown"}[self.status]

    def to_dict(self) -> dict:
        return {"condition": api.CONDITION_KV_TRANSFER, "status": self.status, "verdict": self.verdict, "reason": self.reason,
                "message": self.message, "fix": self.fix, "engine": self.engine, "evidence": self.evidence}


# ------------------------------------------------------------------------------------------ the decision
class _Stop(Exception):
    def __init__(self, reason: str, **values: Any) -> None:
        super().__init__(reason)
        self.reason, self.values = reason, values


@dataclass
class _Delta:
    """A signal's rise over the run, summed over its side's engines; None: absent where absent means unknown."""
    value: float | None
    per_url: dict[str, float]
    series: list[str]


def _delta(sig: Signal, scrapes: Iterable[Scrape]) -> _Delta:
    total, per_url, absent = 0.0, {}, False
    for sc in scrapes:
        if sc.role not in sig.roles():
            continue
        assert sc.before is not None and sc.after is not None
        present = [s for s in sig.series if sc.after.has(s.name) or sc.before.has(s.name)]
        if not present and sig.absent == "unknown":
            absent = True
            continue
        d = 0.0
        for s in present:
            step = sc.after.value(s) - sc.before.value(s)
            if step < 0:
                raise _Stop("CountersReset", series=s.text(), url=sc.url)
            d += step
        per_url[sc.url] = d
        total += d
    return _Delta(None if absent and not per_url else total, per_url, [s.text() for s in sig.series])


def _engine(scrapes: list[Scrape], cat: KVCatalog) -> EngineEvidence:
    found: dict[str, str] = {}
    for sc in scrapes:
        assert sc.after is not None
        counts = {e: sc.after.prefixed(ev.prefix) for e, ev in cat.engines.items()}
        best = max(counts, key=lambda e: counts[e])
        if counts[best] == 0:
            raise _Stop("EngineUnknown", why=f"{sc.role} {sc.url}: /metrics names no metric of "
                                               f"{' or '.join(cat.engines)}")
        found[sc.url] = best
    engines = set(found.values())
    if len(engines) > 1:
        raise _Stop("EngineUnknown", why="prefill and decode run different engines: "
                                         + ", ".join(f"{u} {e}" for u, e in found.items()))
    return cat.engines[engines.pop()]


def _block_size(ev: EngineEvidence, scrapes: list[Scrape]) -> int | None:
    if ev.block_size is None:
        return None
    name, label = ev.block_size
    for sc in scrapes:
        if sc.role == "decode" and sc.after is not None and (v := sc.after.label(name, label)) is not None:
            try:
                return int(v)
            except ValueError:
                return None
    return None


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


def decide(scrapes: list[Scrape], traffic: Traffic, catalog: KVCatalog | None = None) -> Verdict:
    """The KVTransfer verdict (module docstring: the rules in order)."""
    cat = catalog or load_kv_catalog()
    evidence: dict = {"requests": traffic.requests, "answered": traffic.ok,
                      "scrapes": [{"role": s.role, "url": s.url, "read": s.before is not None and s.after is not None,
                                   **({"why": s.why} if s.why else {})} for s in scrapes]}
    engine = None
    try:
        ev = _gate(scrapes, traffic, cat)
        engine = ev.engine
        reason, values = _judge(ev, scrapes, traffic, evidence)
    except _Stop as stop:
        reason, values = stop.reason, stop.values
    r = cat.reasons[reason]
    return Verdict(r.status, r.name, r.message.format(**values), r.fix, engine, evidence)


def _gate(scrapes: list[Scrape], traffic: Traffic, cat: KVCatalog) -> EngineEvidence:
    """What must hold before any figure means something: both scrapes of every engine, answered traffic, one
    engine the catalog knows."""
    roles = {s.role for s in scrapes}
    if not {"prefill", "decode"} <= roles:
        missing = " and ".join(r for r in ROLES if r not in roles)
        raise _Stop("NoMetrics", why=f"no {missing} URL was given")
    unread = [s for s in scrapes if s.before is None or s.after is None]
    if unread:
        raise _Stop("NoMetrics", why="; ".join(f"{s.role} {s.url}: {s.why or 'not read'}" for s in unread))
    if traffic.ok == 0:
        raise _Stop("NoTraffic", requests=traffic.requests)
    return _engine(scrapes, cat)


def _judge(ev: EngineEvidence, scrapes: list[Scrape], traffic: Traffic, evidence: dict) -> tuple[str, dict]:
    d = {k: _delta(sig, scrapes) for k, sig in ev.signals.items()}
    block = _block_size(ev, scrapes)
    evidence["signals"] = {k: {"side": ev.signals[k].side, "unit": ev.signals[k].unit, "delta": x.value,
                               "per_url": x.per_url, "series": x.series, "source": ev.signals[k].source}
                           for k, x in d.items()}
    evidence["block_size"] = block
    value = {k: (x.value if x is not None else None) for k, x in ((k, d.get(k)) for k in SIGNALS)}
    arrived, recomputed = value["arrived"], value["recomputed"]
    unit = ev.signals["arrived"].unit
    allowance = 0 if ev.tail == "none" else (traffic.ok * (block + 1) if block else None)
    evidence["recompute_allowance"] = allowance
    text = {"arrived": f"{_fmt(arrived)} {'prompt token(s)' if unit == 'tokens' else 'transfer(s)'}",
            "recomputed": _fmt(recomputed), "prefilled": _fmt(value["prefilled"]), "ok": traffic.ok,
            "local_hits": _fmt(value["local_hits"]),
            "allowance": "?" if allowance is None else f"{allowance:g}"}
    if value["failures"]:
        where = ", ".join(f"{u} +{v:g}" for u, v in d["failures"].per_url.items() if v)
        return "TransferFailures", {"failures": _fmt(value["failures"]), "where": where}
    if arrived is None:
        sc = next(s for s in scrapes if s.role in ev.signals["arrived"].roles())
        return "NoTransferMetric", {"url": sc.url, "series": ", ".join(d["arrived"].series)}
    if arrived == 0:
        return _nothing_arrived(ev, traffic, value, block, text)
    if recomputed is not None and recomputed > (allowance if allowance is not None else arrived):
        if allowance is None:
            text["allowance"] = f"{arrived:g} (what arrived: the block size is unknown)"
        return "DecodeRecomputedPrompts", text
    if value["prefilled"] == 0:
        return "PrefillIdle", text
    if unit == "transfers" and arrived < traffic.ok:
        return "TransfersBelowTraffic", text
    return "KVTransferred", text


def engine_traffic(scrapes: list[Scrape], catalog: KVCatalog | None = None) -> Traffic | None:
    """The traffic between two scrapes as the decode engines counted it (signal ``answered``), for a caller that
    sent none itself (the operator's interval check); None when the scrapes cannot say (unread, unknown engine,
    no such series, a counter that went backwards)."""
    cat = catalog or load_kv_catalog()
    try:
        if any(s.before is None or s.after is None for s in scrapes) or not scrapes:
            return None
        ev = _engine(scrapes, cat)
        sig = ev.signals.get("answered")
        if sig is None:
            return None
        n = _delta(sig, scrapes).value
    except _Stop:
        return None
    return None if n is None else Traffic(requests=int(n), ok=int(n))


def _nothing_arrived(ev: EngineEvidence, traffic: Traffic, value: dict, block: int | None,
                     text: dict) -> tuple[str, dict]:
    if ev.tail == "block" and block and traffic.prompt_tokens and max(traffic.prompt_tokens) < block + 2:
        return "PromptsTooShort", {"longest": max(traffic.prompt_tokens), "block": block, "need": block + 2}
    if value["recomputed"]:
        return "DecodeRecomputedPrompts", text
    if ev.signals["arrived"].unit == "transfers":
        return "NoTransfers", text
    if value["local_hits"]:
        return "DecodeCacheServed", text
    return "NoDecodeTraffic", text


def render_text(v: dict) -> list[str]:
    """The verdict for a terminal (``Verdict.to_dict()``)."""
    out = [f"KVTransfer={v['status']} ({v['verdict']}, {v['reason']}): {v['message']}"]
    for k, s in ((v.get("evidence") or {}).get("signals") or {}).items():
        per = ", ".join(f"{u} +{x:g}" for u, x in s["per_url"].items())
        out.append(f"  {k:<11} {s['side']:<7} {_fmt(s['delta']):>8} {s['unit']:<9} {per}")
    if v["status"] != "True":
        out.append(f"    fix: {v['fix']}")
    return out


def metrics_text(base: str, code: int, body: bytes) -> tuple[str | None, str]:
    """An engine's ``/metrics`` answer as text, or (None, why) when it is not one: the probe's and the operator's
    scrapes alike."""
    if code != 200:
        return None, f"GET {base}/metrics answered {code}"
    return body.decode("utf-8", "replace"), ""


def metrics_unreachable(base: str, exc: BaseException) -> tuple[None, str]:
    """(None, why) for a ``/metrics`` request that got no answer."""
    return None, f"GET {base}/metrics: {type(exc).__name__}: {exc or 'connection failed'}"
