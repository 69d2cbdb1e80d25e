"""The known-disagreement list (tools/engine_oracle/known/*.yaml) loads, every entry has its reason, and the matcher
covers exactly what an entry names (unit tier: no engine needed)."""
from __future__ import annotations

import yaml

from tools.engine_oracle import known


def _rec(cls, release="vllm-0.33.0", rules=(), product_msg="", engine_msg=""):
    return {"release": release, "class": cls, "product": {"rules": list(rules), "message": product_msg},
            "oracle": {"verdict": "refused" if cls == "miss" else "accepted", "type": "ValueError",
                       "message": engine_msg}}


def test_known_yaml_loads_with_reasons():
    entries = known.load()
    assert len({e["id"] for e in entries}) == len(entries)
    assert all(len(e["reason"]) > 20 and e["cause"] in known.CAUSES for e in entries)


def test_a_product_error_cannot_be_listed_as_known(tmp_path):
    """issue 31 item 5: known/*.yaml holds only what the oracle cannot judge; an engine refusal the product passes
    (a miss) listed without the stand-in it rests on is refused, so the CI tier fails on it."""
    import pytest

    miss = {"id": "ngram", "class": "miss", "releases": ["sglang-*"], "match": "page_size",
            "reason": "NGRAM top-k with page size: the product has no rule yet"}
    f = tmp_path / "k.yaml"
    f.write_text(yaml.safe_dump({"known": [miss]}))
    with pytest.raises(ValueError, match="product error"):
        known.load(f)
    f.write_text(yaml.safe_dump({"known": [dict(miss, cause="the rule is on another branch", stand_in="-")]}))
    with pytest.raises(ValueError, match="cause must be one of"):
        known.load(f)
    f.write_text(yaml.safe_dump({"known": [dict(miss, cause="stand-in", stand_in="kimi-k3/config.json heads")]}))
    assert known.load(f)[0]["id"] == "ngram"


def test_matcher_needs_class_release_rule_and_text():
    e = {"id": "x", "class": "miss", "releases": ["vllm-0.3*"], "match": "kv_role", "reason": "r"}
    assert known.matches(e, _rec("miss", engine_msg="Please specify kv_role"))
    assert not known.matches(e, _rec("false-refusal", engine_msg="Please specify kv_role"))
    assert not known.matches(e, _rec("miss", release="sglang-0.5.23", engine_msg="Please specify kv_role"))
    assert not known.matches(e, _rec("miss", engine_msg="something else"))
    f = {"id": "y", "class": "false-refusal", "releases": ["*"], "product_rules": ["a"], "match": "a:", "reason": "r"}
    assert known.matches(f, _rec("false-refusal", rules=["a"], product_msg="m"))
    assert not known.matches(f, _rec("false-refusal", rules=["b"], product_msg="m"))


def test_unknown_and_unused():
    entries = [{"id": "x", "class": "miss", "releases": ["*"], "match": "kv_role", "reason": "r"}]
    recs = [_rec("miss", engine_msg="kv_role"), _rec("miss", engine_msg="new thing"), _rec("agree-pass")]
    assert [r["oracle"]["message"] for r in known.unknown(recs, entries)] == ["new thing"]
    assert known.unused([_rec("agree-pass")], entries) == ["x"]
