"""The environment the launch spec adds to a document's ``spec.env`` (README "Launch spec additions"): apart from
core/launch.py so the rules can judge the environment the pod gets without importing the launch builder (which
imports the rules)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.resolve import Resolved


def production_env(r: Resolved, budget_s: int) -> dict[str, str]:
    """What the launch spec adds to the spec's env (documented in README "Launch spec additions")."""
    env: dict[str, str] = {}
    cache = r.spec.storage.cachePath.rstrip("/")
    for var, sub in r.engine.cache_env.items():
        env[var] = f"{cache}/{sub}"
    if r.engine.engine == ENGINE_VLLM:
        env["VLLM_ENGINE_READY_TIMEOUT_S"] = str(budget_s)
    if r.engine.engine == ENGINE_SGLANG and r.dcp > 1 and r.spec.speculative.method == "dspark" \
            and r.trait("dspark_dcp_static_verify"):
        env["SGLANG_RAGGED_VERIFY_MODE"] = "static"   # overrides.py:356-362: the engine forces it; we say so
    return env
