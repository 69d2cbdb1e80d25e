"""Prometheus text exposition → per-name sums, engine detection and counter diffs (pure).

The text format is read by ``prometheus_client.parser``. Tolerant by design: a line that does not parse is
skipped, not fatal (a probe must not fail on one odd metric); series of one name are summed over their labels (per-engine / per-model labels).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from gpustack_k3.probe.catalog import MetricsCatalog


def parse_exposition(text: str) -> dict[str, float]:
    """Sum of the samples of each metric name (labels folded); NaN samples are left out. Each sample line is
    read by ``prometheus_client.parser`` on its own, so one line it refuses costs only that line."""
    out: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples = [s for family in text_string_to_metric_families(line + "\n") for s in family.samples]
        except ValueError:
            continue
        for sample in samples:
            if not math.isnan(sample.value):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def detect_engine(values: dict[str, float], catalog: MetricsCatalog) -> str | None:
    """The catalog engine whose prefix most metric names carry (``vllm:`` / ``sglang:``), or None."""
    counts = {e: sum(1 for n in values if n.startswith(m.prefix)) for e, m in catalog.engines.items()}
    best = max(counts, key=lambda e: counts[e], default=None)
    return best if best is not None and counts[best] > 0 else None


@dataclass
class MetricsTrace:
    """/metrics over one run: the snapshot before, the one after, gauge peaks from samples in between."""
    before: dict[str, float] | None = None
    after: dict[str, float] | None = None
    peaks: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    def sample(self, values: dict[str, float]) -> None:
        self.samples += 1
        for k, v in values.items():
            if k not in self.peaks or v > self.peaks[k]:
                self.peaks[k] = v

    def counter_diff(self, name: str) -> float | None:
        """after - before; None when either side lacks it or the counter went backwards (engine restart)."""
        if self.before is None or self.after is None or name not in self.after:
            return None
        d = self.after[name] - self.before.get(name, 0.0)
        return d if d >= 0 else None

    def gauge(self, name: str) -> dict | None:
        if self.after is None or name not in self.after:
            return None
        seen = ((self.before or {}).get(name), self.after.get(name), self.peaks.get(name))
        vals = [v for v in seen if v is not None]
        return {"before": (self.before or {}).get(name), "after": self.after[name], "peak": max(vals)}
