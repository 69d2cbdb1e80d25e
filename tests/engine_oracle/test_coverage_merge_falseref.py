"""tools/engine_oracle/coverage.py --merge: a run of one release adds (or replaces) that release's entries and keeps
every other release's entries and the committed record's header."""
from __future__ import annotations

from tools.engine_oracle.coverage import build, merge

RULES = [{"rule": "a", "family": "spec", "severity": "error"}, {"rule": "b", "family": "spec", "severity": "error"}]


def _rec(release: str, rules: list[str], verdict: str) -> dict:
    return {"release": release, "product": {"rules": rules}, "oracle": {"verdict": verdict, "message": "m"},
            "argv": ["x"]}


def test_merge_keeps_the_other_releases_and_replaces_the_run_ones():
    old = build([_rec("r1", ["a"], "refused"), _rec("r2", ["a"], "accepted")], RULES, {"seed": 0, "records": 2})
    new = build([_rec("r2", ["b"], "refused"), _rec("r3", ["a"], "refused")], RULES, {"seed": 1, "records": 2})
    doc = merge(old, new, {"seed": 1, "records": 2})
    assert doc["releases"] == ["r1", "r2", "r3"]
    assert doc["from"] == {"seed": 0, "records": 2}
    assert doc["merged"] == [{"seed": 1, "records": 2, "releases": ["r2", "r3"]}]
    assert doc["rules"]["a"]["releases"]["r1"] == old["rules"]["a"]["releases"]["r1"]      # kept
    assert doc["rules"]["a"]["releases"]["r2"]["status"] == "not-fired"                    # replaced by the run
    assert doc["rules"]["b"]["releases"]["r2"]["status"] == "agrees"
    assert doc["rules"]["a"]["releases"]["r3"]["status"] == "agrees"
