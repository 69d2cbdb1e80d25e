"""tools/engine_oracle/coverage.py: the per-rule record is computed from the judged lines (unit tier)."""
from __future__ import annotations

from tools.engine_oracle import coverage

RULES = [{"rule": "a", "family": "spec", "severity": "error"}, {"rule": "b", "family": "spec", "severity": "error"},
         {"rule": "w", "family": "spec", "severity": "warning"}, {"rule": "l", "family": "log", "severity": "error"},
         {"rule": "c", "family": "args", "severity": "error"}]


def _rec(release, rules, verdict, msg="m", reason=None):
    o = {"verdict": verdict, "message": msg}
    if reason:
        o["reason"] = reason
    return {"release": release, "product": {"rules": rules}, "oracle": o, "argv": ["x"]}


def test_statuses():
    recs = [_rec("r1", ["a"], "refused", "engine says no"), _rec("r1", ["a", "b"], "refused"),
            _rec("r1", ["c"], "accepted"), _rec("r2", ["a"], "not_decidable", reason="tokenizer-files")]
    doc = coverage.build(recs, RULES, {"records": 4})
    r1 = {k: v["releases"]["r1"] for k, v in doc["rules"].items()}
    assert r1["a"]["status"] == "agrees" and r1["a"]["engine_message"] == "engine says no"
    assert r1["b"]["status"] == "co-refused"
    assert r1["c"]["status"] == "disagrees" and r1["c"]["engine_accepted"] == 1
    assert r1["w"]["status"] == "advisory" and r1["l"]["status"] == "not-argv"
    assert doc["rules"]["a"]["releases"]["r2"] == {"status": "not-decidable", "fired": 1, "engine_refused": 0,
                                                   "engine_refused_alone": 0, "engine_accepted": 0,
                                                   "not_decidable": 1, "reasons": ["tokenizer-files"]}
    assert doc["rules"]["b"]["releases"]["r2"] == {"status": "not-fired"}


def test_coverage_table_rows_from_synth_reports():
    from tools.engine_oracle.table import coverage_table

    rep = {"release": "vllm-0.33.0", "seed": 7919, "judged_lines": 90, "kept_lines": 26, "seconds": 193.3,
           "reachability": {"reached": 43, "reachable": 381, "raise_sites": 445, "reached_share_of_reachable": 0.1129},
           "rounds": [{"round": 0, "lines": 30, "reached": 20}, {"round": 1, "new": 14}, {"round": 2, "new": 9}],
           "product": {"counts": {"miss": 5, "decidable": 80, "false_refusal": 1}}}
    row = coverage_table([rep]).splitlines()[-1]
    assert row == ("| vllm-0.33.0 | 7919 | 43 / 381 / 445 (11.3 %) | 20 (30 lines) | 90 (26) | 14, 9 | 193.3 | 5 / 80 "
                   "| 1 |")


def test_runtime_only_rules_are_judged_by_the_worked_after_config_check():
    """A runtime-only rule's lines are accepted at config time: the record reads the differential's runtime judge
    (tools/engine_oracle/runtime_judge.py) for them instead of counting the config-time acceptance as a false refusal."""
    def rt(rules, verdict, judged):
        rec = _rec("r1", rules, verdict)
        rec["runtime_judge"] = {r: [judged, "how"] for r in rules}
        return rec
    recs = [rt(["a"], "accepted", "refuses"), rt(["b"], "accepted", "refuses"), rt(["b"], "accepted", "accepts"),
            rt(["c"], "accepted", None), rt(["w"], "accepted", "accepts")]
    r1 = {k: v["releases"]["r1"] for k, v in coverage.build(recs, RULES, {"records": 5})["rules"].items()}
    assert r1["a"]["status"] == "runtime-agrees" and r1["a"]["engine_accepted"] == 0 and r1["a"]["runtime_refuses"] == 1
    assert r1["b"]["status"] == "runtime-disagrees" and r1["b"]["runtime_accepts"] == 1
    assert r1["b"]["false_refusal_example"] == "x"
    assert r1["c"]["status"] == "runtime-unjudged" and r1["c"]["runtime_unjudged"] == 1
    assert r1["w"]["status"] == "advisory"
    # a config-time acceptance without a runtime judgement stays a disagreement
    r1 = coverage.build([rt(["a"], "accepted", "refuses"), _rec("r1", ["a"], "accepted")], RULES, {})["rules"]["a"]
    assert r1["releases"]["r1"]["status"] == "disagrees"


def test_the_explain_summary_names_the_runtime_judges_counts():
    from gpustack_k3.catalog.rule_oracle import summary

    line = summary({"status": "runtime-agrees", "fired": 3, "engine_refused": 0, "engine_refused_alone": 0,
                    "engine_accepted": 0, "runtime_refuses": 2, "runtime_unjudged": 1})
    assert line.startswith("runtime-agrees: fired 3") and "refuses 2, no computation 1" in line
