"""Plan vs actual: a probe report's measured figures beside the prediction, with the drift."""
from __future__ import annotations

from typing import Any

from gpustack_k3.predict.types import PredictError

# (label, probe report path, prediction path in the serve role)
PAIRS = (
    ("ttft_mean_ms", ("ttft_ms", "mean"), ("benchmark", "ttft_ms", "mean")),
    ("ttft_p50_ms", ("ttft_ms", "p50"), ("benchmark", "ttft_ms", "p50")),
    ("ttft_p90_ms", ("ttft_ms", "p90"), ("benchmark", "ttft_ms", "p90")),
    ("tpot_mean_ms", ("tpot_ms", "mean"), ("benchmark", "tpot_ms", "mean")),
    ("tpot_p50_ms", ("tpot_ms", "p50"), ("benchmark", "tpot_ms", "p50")),
    ("tpot_p90_ms", ("tpot_ms", "p90"), ("benchmark", "tpot_ms", "p90")),
    ("itl_mean_ms", ("itl_ms", "mean"), ("decode", "itl_ms")),
    ("latency_mean_ms", ("e2el_ms", "mean"), ("benchmark", "latency_ms", "mean")),
    ("wall_s", ("wall_s",), ("benchmark", "e2e_s")),
)


def _get(d: Any, path: tuple) -> Any:
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def workload_fields(report: dict) -> dict:
    """The workload the probe ran, to predict the same run."""
    if not isinstance(report, dict) or not report.get("usable", True):
        raise PredictError("--measured", "not a usable probe report", "give the JSON of `gpustack-k3 probe -o json`")
    if not any(isinstance(_get(report, mpath), (int, float)) for _, mpath, _ in PAIRS):
        raise PredictError("--measured", "the report holds no measured figure (" +
                           ", ".join(sorted({m[0] for _, m, _ in PAIRS})) + "): nothing to set beside the prediction",
                           "give the JSON of `gpustack-k3 probe -o json` from a run that completed requests")
    out = {}
    for k in ("input_len", "output_len", "concurrency", "requests"):
        v = report.get(k)
        if isinstance(v, int) and v > 0:
            out[k] = v
    return out


def drift(prediction_role: dict, report: dict) -> list[dict]:
    rows = []
    for label, mpath, ppath in PAIRS:
        m, p = _get(report, mpath), _get(prediction_role, ppath)
        if isinstance(m, (int, float)) and isinstance(p, (int, float)) and p:
            rows.append({"figure": label, "predicted": p, "measured": m, "drift_pct": round((m / p - 1) * 100, 1)})
    return rows
