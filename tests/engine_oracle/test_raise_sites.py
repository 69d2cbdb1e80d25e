"""tools/engine_oracle/raise_sites.py: raise statements found with ast, reached = the raise line executed in
coverage.py's report, unreached sites told apart by whether their function was entered (unit tier)."""
from __future__ import annotations

from tools.engine_oracle import raise_sites

SRC = '''\
class C:
    def check(self, tp):
        if tp % 2:
            raise ValueError(f"tp {tp} odd")
        if tp > 64:
            raise ValueError("too big")


def never():
    raise RuntimeError("x")
'''


def test_sites_and_summary(tmp_path):
    f = tmp_path / "vllm" / "config" / "x.py"
    f.parent.mkdir(parents=True)
    f.write_text(SRC)
    sites = raise_sites.raise_sites([f])
    assert [(s["line"], s["function"]) for s in sites] == [(4, "C.check"), (6, "C.check"), (10, "never")]
    cov = {"root": str(tmp_path), "files": {str(f): {"executed_lines": [1, 2, 3, 4, 5, 9]}}}
    doc = raise_sites.summarize("r", sites, cov)
    assert doc["raise_sites"] == 3 and doc["raise_sites_reached"] == 1
    assert doc["raise_sites_in_entered_functions"] == 2 and doc["reached_share_of_entered"] == 0.5
    why = {u["where"]: u["why"] for u in doc["unreached"]}
    assert why == {"vllm/config/x.py:6": "entered, raise not taken", "vllm/config/x.py:10": "function never entered"}
