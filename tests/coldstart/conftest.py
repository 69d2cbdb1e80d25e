from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_k3.coldstart import ColdStartTracker

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def track(name: str, chunk: int | None = None, **kw) -> ColdStartTracker:
    kw.setdefault("year", 2026)
    t = ColdStartTracker(**kw)
    data = (LOGS / name).read_bytes()
    if chunk is None:
        t.feed(data)
    else:
        for i in range(0, len(data), chunk):
            t.feed(data[i:i + chunk])
    t.finish()
    return t


def phases(rep) -> dict:
    return {p["name"]: p for p in rep.to_dict()["phases"]}


@pytest.fixture
def logs() -> Path:
    return LOGS
