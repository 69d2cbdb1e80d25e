"""The engine-oracle tier's shared fixture: one worker per release, started on first use in a test module and
closed at its end."""
from __future__ import annotations

import pytest

from tests.support import tiers
from gpustack_k3.oracle.judge import Oracle, OracleUnavailable


@pytest.fixture(scope="module")
def oracles():
    started: dict[str, Oracle] = {}

    def get(release: str) -> Oracle:
        if release not in started:
            try:
                started[release] = Oracle(release)
            except OracleUnavailable as exc:
                tiers.unavailable(f"engine oracle {release}: {exc}", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
        return started[release]

    yield get
    for o in started.values():
        o.close()
