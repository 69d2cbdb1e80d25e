"""One retry policy: tenacity's waits are composed only in ``gpustack_k3/core/retry.py``; everything that backs
off (API calls, informers, the work queue, the log follower, the GPUStack client) asks it."""
from __future__ import annotations

import ast

from tests.architecture.imports import ROOT, modules

POLICY = "gpustack_k3.core.retry"


def wait_uses(src: str) -> list[tuple[int, str]]:
    return [(n.lineno, n.attr) for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.Attribute) and n.attr.startswith("wait_") and isinstance(n.value, ast.Name)
            and n.value.id == "tenacity"]


def test_tenacity_waits_are_composed_only_in_the_retry_policy():
    bad = [f"{path.relative_to(ROOT.parent)}:{line}: tenacity.{attr}"
           for name, path in modules().items() if name != POLICY
           for line, attr in wait_uses(path.read_text(encoding="utf-8"))]
    assert bad == []
    assert wait_uses((ROOT / "core" / "retry.py").read_text(encoding="utf-8"))   # the check sees a wait


def test_the_policy_is_capped_exponential_with_jitter():
    from gpustack_k3.core.retry import delay
    for attempt in range(1, 12):
        cap = min(2.0, 0.1 * 2 ** (attempt - 1))
        assert all(cap * 0.5 <= delay(attempt, base_s=0.1, max_s=2.0) <= cap for _ in range(20))
