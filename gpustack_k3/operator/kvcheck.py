"""The KVTransfer check of a P/D deployment (docs/design/010-pd-rollouts.md §4): every ``interval_s`` after Ready,
read every prefill and decode instance's ``/metrics`` and decide, from the rise of the engines' own counters over
the interval, whether KV moves. The decision is the probe's (``gpustack_k3.probe.kvtransfer.decide``), so the
operator and ``gpustack-k3 probe --prefill --decode`` agree by construction; the traffic is what the decode
engines finished over the interval (``engine_traffic``), since the operator sends none of its own here.

I/O only through the injected ``fetch(url) -> (text | None, why)``; the clock is injected too. Pure helpers:
``transition_event`` (the Event on a change of status). The Prometheus series are read from the status the operator
wrote (``gpustack_k3.metrics.KVTransferConditions``); the instance URLs are the serving router's
(``gpustack_k3.operator.rollout.routes``).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.probe.kvtransfer import (
    Exposition,
    Scrape,
    Traffic,
    decide,
    engine_traffic,
    metrics_text,
    metrics_unreachable,
    parse_samples,
)

Key = tuple[str, str]
Fetch = Callable[[str], tuple[str | None, str]]

DEGRADE_AFTER = 2           # consecutive False checks before the deployment is Degraded (design §4)


@dataclasses.dataclass(frozen=True)
class KVTransferObservation:
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    checked_at: float
    false_checks: int = 0
    evidence: Mapping = dataclasses.field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        """The Degraded rule: False on ``DEGRADE_AFTER`` checks in a row."""
        return self.status == "False" and self.false_checks >= DEGRADE_AFTER


@dataclasses.dataclass
class _Baseline:
    at: float
    scrapes: dict[str, Exposition | None]       # url -> exposition (None: not read, see why)
    why: dict[str, str]


class KVTransferCheck:
    """Per resource: the last scrape of each instance (the interval's start) and the last observation."""

    def __init__(self, fetch: Fetch, interval_s: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 on_check: Callable[[Key, KVTransferObservation], None] | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s: {interval_s!r} must be positive")
        self.fetch, self.interval_s, self.clock = fetch, interval_s, clock
        self.on_check = on_check        # called once per decision (the operator counts them: checks_total)
        self._lock = threading.Lock()
        self._base: dict[Key, _Baseline] = {}
        self._last: dict[Key, KVTransferObservation] = {}

    def _read(self, urls: Sequence[str]) -> tuple[dict[str, Exposition | None], dict[str, str]]:
        got: dict[str, Exposition | None] = {}
        why: dict[str, str] = {}
        for url in urls:
            text, reason = self.fetch(url)
            got[url] = parse_samples(text) if text is not None else None
            if text is None:
                why[url] = reason or "not read"
        return got, why

    def observe(self, key: Key, prefill: Sequence[str], decode: Sequence[str]) -> KVTransferObservation | None:
        """The observation for this reconcile: a new one when an interval has passed since the last scrape, else
        the last one (None before the first interval ends). Call it only once the deployment is Ready."""
        if not prefill or not decode:
            return None
        now = self.clock()
        with self._lock:
            base, last = self._base.get(key), self._last.get(key)
        if base is not None and now - base.at < self.interval_s:
            return last
        cur, why = self._read([*prefill, *decode])
        with self._lock:
            self._base[key] = _Baseline(now, cur, why)
        if base is None:
            return last
        roles = [("prefill", u) for u in prefill] + [("decode", u) for u in decode]
        scrapes = [_pair(role, url, base, cur, why) for role, url in roles]
        traffic = engine_traffic(scrapes) or Traffic(requests=0, ok=0)
        v = decide(scrapes, traffic)
        false_checks = ((last.false_checks if last is not None else 0) + 1) if v.status == "False" else 0
        obs = KVTransferObservation(v.status, v.reason, v.message, now, false_checks, v.to_dict()["evidence"])
        with self._lock:
            self._last[key] = obs
        if self.on_check is not None:
            self.on_check(key, obs)
        return obs

    def due_in(self, key: Key) -> float:
        """Seconds until the next check of ``key`` is due: its interval from the last scrape (0: none yet)."""
        with self._lock:
            base = self._base.get(key)
        return 0.0 if base is None else max(0.0, self.interval_s - (self.clock() - base.at))

    def forget(self, key: Key) -> None:
        with self._lock:
            self._base.pop(key, None)
            self._last.pop(key, None)


MAX_METRICS_BYTES = 8 * api.MIB      # an engine's /metrics is tens of kB; a larger answer is not one


def http_fetch(url: str, timeout_s: float = 5.0) -> tuple[str | None, str]:
    """``url``'s /metrics as text, or (None, why): the operator's default ``Fetch`` (httpx, bounded in time
    and size)."""
    import httpx

    try:
        with httpx.stream("GET", url.rstrip("/") + "/metrics", timeout=timeout_s) as resp:
            body = b""
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return None, f"GET {url}/metrics: answer over {MAX_METRICS_BYTES} bytes"
            code = resp.status_code
    except (httpx.HTTPError, OSError) as exc:
        return metrics_unreachable(url, exc)
    return metrics_text(url, code, body)


def _pair(role: str, url: str, base: _Baseline, cur: Mapping[str, Exposition | None], why: Mapping[str, str]) -> Scrape:
    before, after = base.scrapes.get(url), cur.get(url)
    if before is None or after is None:
        reason = why.get(url) or base.why.get(url) or "not read at the interval's start (a new instance)"
        return Scrape(role, url, None, None, reason)    # type: ignore[arg-type]
    return Scrape(role, url, before, after)              # type: ignore[arg-type]


def transition_event(prev: KVTransferObservation | None, cur: KVTransferObservation | None
                     ) -> tuple[str, str, str] | None:
    """(Event type, reason, message) when the condition's status changed, else None (design §4: not per check)."""
    if cur is None or (prev is not None and prev.status == cur.status):
        return None
    kind, reason = {"True": ("Normal", api.EVENT_KV_TRANSFER_VERIFIED),
                    "False": ("Warning", api.REASON_KV_TRANSFER_FAILED),
                    "Unknown": ("Normal", api.EVENT_KV_TRANSFER_UNKNOWN)}[cur.status]
    return kind, reason, f"{cur.reason}: {cur.message}"
