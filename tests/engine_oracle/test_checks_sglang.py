"""Tier engine_oracle: every entry of the SGLang engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml),
release by release, on its examples judged by the release's own code (tools/engine_oracle: ``prepare_server_args`` +
``resolve_once()`` of the wheel) and by gpustack-k3's check-args:

- the refused line: the release refuses it, raising at one of the lines the entry cites for that release, and the
  product refuses it with the entry's id;
- the flipped line (the condition turned false): the release accepts it and the product passes it (no error).

A wrong condition fails here both ways: an entry that refuses what the release accepts, and one that passes what it
refuses. ~2 s a line after the worker's start; a line judged before in the session (another example's twin) is
answered from tests/support/judge_cache.py. Needs the wheels (tests/engine_oracle/test_oracle_sample.py says how):
skips without them on a developer machine, fails under CI=true (tests/support/tiers.py)."""
from __future__ import annotations

import re

import pytest

from gpustack_k3.core.rules import checks
from tests.support import judge_cache
from tools.engine_oracle.product import check_args, shape_config

pytestmark = pytest.mark.engine_oracle

ENGINE = "sglang"


def cases() -> list[tuple]:
    out = []
    for raw in checks.raw_tables().files.get(ENGINE, {}).get("checks", []):
        for i, ex in enumerate(raw.get("examples") or []):
            for key in ex.get("releases") or raw["releases"]:
                out.append((raw["id"], key, i, ex))
    return out


CASES = cases()


def cited_lines(source: str) -> dict[str, set[int]]:
    """file -> the line numbers a source ``file.py:360-366,402-411@0.5.23[, file2.py:...]`` cites."""
    out: dict[str, set[int]] = {}
    for part in re.split(r"[,;] (?=[\w./-]+\.py:)", source.split(" (")[0]):
        path, _, rest = part.partition(":")
        lines = out.setdefault(path, set())
        for span in rest.split("@")[0].split(","):
            lo, _, hi = span.partition("-")
            lines.update(range(int(lo), int(hi or lo) + 1))
    return out


def test_cited_lines_parse():
    assert cited_lines("sglang/srt/a.py:3-4,9@0.5.23, sglang/srt/b.py:7@0.5.23") == {
        "sglang/srt/a.py": {3, 4, 9}, "sglang/srt/b.py": {7}}


def test_every_entry_has_a_case_per_release():
    have = {(c[0], c[1]) for c in CASES}
    assert [(e.id, k) for e in checks.TABLE.values() if e.engine == ENGINE for k in e.releases
            if (e.id, k) not in have] == []


def _product(release: str, argv: list[str], env: dict, model: str | None, shape: str | None = None) -> dict:
    line = {"argv": argv, "env": env, "model": model, "gpu_type": "b300", "gpus": 8}
    if shape:   # a model the catalog does not know: its public config.json, the file the oracle's directory holds
        line["model_config"] = shape_config(shape)
    return check_args(ENGINE, release, line)


@pytest.mark.parametrize("eid,release,i,ex", CASES, ids=[f"{c[0]}@{c[1]}-{c[2]}" for c in CASES])
def test_the_entry_agrees_with_the_release(oracles, eid, release, i, ex):
    oracle = oracles(f"{ENGINE}-{release}")
    env = ex.get("env") or {}
    accept_env = ex.get("accept_env", env)
    cited = cited_lines(checks.TABLE[eid].releases[release])

    ans = judge_cache.judge_line(oracle, ex["refuse"], env)
    assert ans["verdict"] == "refused", (ex["refuse"], ans)
    path, _, line = ans.get("where", "").rpartition(":")
    assert path in cited and int(line) in cited[path], (f"the release raises at {ans.get('where')}, not at the cited "
                                                        f"{checks.TABLE[eid].releases[release]}", ans.get("message"))
    mine = _product(release, ex["refuse"], env, ex.get("model"), ex.get("shape"))
    assert mine["verdict"] == "refuse" and eid in mine["rules"], mine

    ans = judge_cache.judge_line(oracle, ex["accept"], accept_env)
    assert ans["verdict"] == "accepted", (ex["accept"], ans)
    mine = _product(release, ex["accept"], accept_env, ex.get("model"), ex.get("shape"))
    assert mine["verdict"] == "pass", mine
