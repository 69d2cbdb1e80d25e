"""The runtime-only class of the differential (tools/engine_oracle/runtime_judge.py, bench/oracle_differential.py
classify): a runtime-only refusal is judged by the release's after-config check worked out from the line, so a false
refusal or a miss there is counted (unit tier: no oracle)."""
from __future__ import annotations

from bench.oracle_differential import classify
from tools.engine_oracle import known, runtime_judge

ACCEPTED = {"verdict": "accepted", "stage": "resolve_once"}


def _line(*argv, gpus=8):
    return {"argv": ["--model-path", "/models/Kimi-K3", *argv], "env": {}, "gpus": gpus}


def test_judges_follow_the_release_checks():
    j = runtime_judge.judge
    assert j("sglang-dcp-divides-tp", "sglang-0.5.23", _line("--tp-size", "8", "--dcp-size", "3"))[0] == "refuses"
    assert j("sglang-dcp-divides-tp", "sglang-0.5.23", _line("--tp-size", "8", "--dcp-size", "4"))[0] == "accepts"
    assert j("sglang-parallel-fits-node", "sglang-0.5.23", _line("--tp-size", "8", "--dp-size", "2"))[0] == "refuses"
    # DP attention puts the DP ranks inside the TP group; --nnodes spreads the ranks
    assert j("sglang-parallel-fits-node", "sglang-0.5.23",
             _line("--tp-size", "8", "--dp-size", "2", "--enable-dp-attention"))[0] == "accepts"
    assert j("sglang-parallel-fits-node", "sglang-0.5.23", _line("--tp-size", "16", "--nnodes", "2"))[0] == "accepts"
    assert j("sglang-mem-fraction-above-one", "sglang-0.5.23", _line("--mem-fraction-static", "1.2"))[0] == "refuses"
    assert j("sglang-mem-fraction-above-one", "sglang-0.5.23", _line("--mem-fraction-static=0.88"))[0] == "accepts"
    v11 = {"argv": ["/models/Kimi-K3", "-tp", "8", "-dp", "2"], "env": {}, "gpus": 8}
    assert j("parallel-fits-node-at-launch", "vllm-0.11.0", v11)[0] == "refuses"
    assert j("parallel-fits-node-at-launch", "vllm-0.11.0", dict(v11, argv=v11["argv"] + ["--data-parallel-rank", "1"]))[0] \
        == "accepts"
    verdict, why = j("fixed-memory-exceeds-budget", "vllm-0.33.0", v11)
    assert verdict is None and "weight" in why
    # the at-launch judge only where the catalog says the release checks the world size at launch
    assert "parallel-fits-node-at-launch" in runtime_judge.judge_line("vllm-0.11.0", v11)
    assert runtime_judge.judge_line("vllm-0.33.0", v11) == {}


def test_runtime_only_classes():
    rel = "sglang-0.5.23"
    refuse = {"verdict": "refuse", "rules": ["sglang-dcp-divides-tp"]}
    passes = {"verdict": "pass", "rules": []}
    assert classify(refuse, ACCEPTED, rel, _line("--tp-size", "8", "--dcp-size", "3")) == "runtime-only-agree"
    assert classify(refuse, ACCEPTED, rel, _line("--tp-size", "8", "--dcp-size", "2")) == "runtime-only-false-refusal"
    assert classify(passes, ACCEPTED, rel, _line("--tp-size", "8", "--dcp-size", "3")) == "runtime-only-miss"
    assert classify(passes, ACCEPTED, rel, _line("--tp-size", "8")) == "agree-pass"
    mem = {"verdict": "refuse", "rules": ["fixed-memory-exceeds-budget"]}
    assert classify(mem, ACCEPTED, "vllm-0.33.0", {"argv": ["/m"], "env": {}, "gpus": 8}) == "runtime-only-unjudged"
    # a runtime-only disagreement is a product error: the known list never covers it
    recs = [{"release": rel, "class": "runtime-only-false-refusal", "product": refuse, "oracle": ACCEPTED}]
    assert known.unknown(recs, []) == recs
