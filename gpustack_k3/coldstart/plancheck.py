"""Plan check: the planner's figures (``gpustack_k3.core.plan``) next to the engine's own (``memory`` of a
cold-start report), with the drift in percent. Pure.

``drift_pct = (engine - planned) / planned x 100``: positive when the engine got more than planned.
A figure is compared only when both sides have it; the engine's concurrency is compared only when it
is stated for the planned max model length (vLLM prints it for ``max_model_len``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.plan import Plan

# report "memory" figure -> how the plan states it, per engine
PLANNED: dict[str, dict[str, str]] = {
    ENGINE_VLLM: {"kv_cache_gib": "kv_cache_allocated_gib", "kv_cache_tokens": "kv_cache_tokens",
             "max_concurrency": "max_concurrency"},
    ENGINE_SGLANG: {"kv_cache_gib": "full_attention_gib", "kv_cache_tokens": "full_attention_tokens",
               "mamba_state_gib": "mamba_state_gib", "max_running_requests": "max_running_requests"},
}


def planned_figures(plan: Plan) -> dict[str, float]:
    """The plan's figures under the report's figure names."""
    out: dict[str, float] = {}
    for figure, attr in PLANNED.get(plan.engine, {}).items():
        value = getattr(plan, attr, None)
        if isinstance(value, (int, float)):
            out[figure] = value
    out["concurrency_len"] = plan.max_model_len
    return out


def _drift(planned: float, engine: float) -> float | None:
    if planned == 0:
        return None
    return round((engine - planned) / planned * 100.0, 2)


def plan_check(planned: Mapping[str, float], engine: Mapping[str, Any] | None) -> dict:
    """``{"figures": [{"figure", "planned", "engine", "drift_pct"}], "max_abs_drift_pct", "not_printed"}``.

    ``planned``: figure -> value (``planned_figures``, or the operator's plan summary); ``engine``: the
    report's ``memory`` (None when the engine printed none yet)."""
    engine = dict(engine or {})
    rows: list[dict] = []
    missing: list[str] = []
    for figure, want in sorted(planned.items()):
        if figure == "concurrency_len":
            continue
        got = engine.get(figure)
        if figure == "max_concurrency" and got is not None and "concurrency_len" in planned and \
                engine.get("concurrency_len") not in (None, planned["concurrency_len"]):
            continue   # stated for another request length: not comparable
        if not isinstance(got, (int, float)):
            missing.append(figure)
            continue
        rows.append({"figure": figure, "planned": _round(want), "engine": _round(got), "drift_pct": _drift(want, got)})
    drifts = [abs(r["drift_pct"]) for r in rows if r["drift_pct"] is not None]
    return {"figures": rows, "max_abs_drift_pct": max(drifts) if drifts else None, "not_printed": missing}


def _round(v: float) -> float:
    return v if isinstance(v, int) else round(float(v), 4)
