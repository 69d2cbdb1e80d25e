"""Helpers for tests/helm."""
from __future__ import annotations

from pathlib import Path

import yaml

from tools.chart import CHART_DIR

CI_VALUES = sorted((CHART_DIR / "ci").glob("*-values.yaml"))


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o.get("kind") == kind]


def write_values(tmp: Path, data: dict, name: str = "values.yaml") -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return p
