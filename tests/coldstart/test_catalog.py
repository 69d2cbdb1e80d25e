"""The marker catalog is data, validated on load; every marker cites its source and matches its example."""
from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from gpustack_k3.coldstart import ColdStartTracker, load_catalog
from gpustack_k3.coldstart.catalog import CatalogFile, Marker
from gpustack_k3.coldstart.scanner import KeywordScanner

CAT = load_catalog()


def test_catalog_covers_both_engines_and_all_log_phases():
    engines = {m.engine for m in CAT.markers}
    assert {"vllm", "sglang", "any"} <= engines
    covered = {m.phase for m in CAT.markers if m.kind in ("start", "end")}
    assert {"process_start", "weights_download", "weights_load", "compile", "kv_cache",
            "cuda_graphs", "server_ready"} <= covered


@pytest.mark.parametrize("m", CAT.markers, ids=lambda m: m.id)
def test_each_marker_cites_a_source_and_its_example_is_found_by_the_tracker(m: Marker):
    assert "@" in m.source or "docs/sources.md#" in m.source or "uvicorn" in m.source
    t = ColdStartTracker(engine=None if m.engine == "any" else m.engine, year=2026)
    if m.kind == "request":   # access-log keys are only scanned between ready and the first request
        t.state.want_requests = lambda: True
    hits: list = []
    t.state.marker = lambda mk, rx, text, ts, rank, fallback, _h=hits: _h.append(mk.id)  # observe dispatch only
    t.feed(m.example.encode() + b"\n")
    assert m.id in hits


def _lines_hit(scanner, text: bytes) -> set[int]:
    return {text.count(b"\n", 0, pos) for pos in scanner.find(text)}


def test_both_scanner_backends_find_every_marker_line():
    examples = [m.example.encode() for m in CAT.markers] + [p.example.encode() for r in CAT.rules for p in r.patterns]
    text = b"\n".join(examples)
    ac = KeywordScanner(CAT.keys, backend="auto")
    rx = KeywordScanner(CAT.keys, backend="regex")
    assert len(ac.triggers) < len(CAT.keys)
    assert all(any(t in k for t in ac.triggers) for k in CAT.keys)   # every key holds a trigger
    assert _lines_hit(ac, text) == _lines_hit(rx, text) == set(range(len(examples)))


SERVING = [  # ordinary serving-time lines: none may become a candidate line (speed)
    b"(APIServer pid=1) INFO 11-29 18:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 6553.6 tokens/s, "
    b"Avg generation throughput: 501.2 tokens/s, Running: 10 reqs, Waiting: 0 reqs, GPU KV cache usage: 24.4%, "
    b"Prefix cache hit rate: 0.0%",
    b"(Worker_TP1 pid=401) DEBUG 11-29 18:00:01 [shm_broadcast.py:871] No available shared memory broadcast block "
    b"found in 60 seconds.",
    b"[2026-11-29 18:12:10 TP0] Decode batch. #running-req: 39, #token: 640000, token usage: 0.70, cuda graph: True, "
    b"gen throughput (token/s): 335.12, #queue-req: 0",
    b"[2026-11-29 18:12:11 TP0] Prefill batch. #new-seq: 1, #new-token: 32768, #cached-token: 0, token usage: 0.71, "
    b"#running-req: 38, #queue-req: 2",
]


def test_ordinary_serving_lines_are_not_candidates():
    quiet = KeywordScanner(CAT.keys, skip=set(CAT.request_keys))
    for line in SERVING:
        assert quiet.find(line) == [], line


@pytest.mark.parametrize("bad,err", [
    ({"id": "x", "kind": "start", "phase": "loading", "key": "abc", "source": "f.py:1@1", "example": "abc"}, "unknown phase"),
    ({"id": "x", "kind": "end", "phase": "compile", "key": "abc", "regex": "zzz", "source": "f.py:1@1", "example": "abc"}, "does not match"),
    ({"id": "x", "kind": "end", "phase": "compile", "key": "abd", "source": "f.py:1@1", "example": "abc"}, "does not occur"),
    ({"id": "x", "kind": "end", "phase": "compile", "key": "abc", "regex": "(", "source": "f.py:1@1", "example": "abc"}, "does not compile"),
    ({"id": "x", "kind": "end", "phase": "compile", "key": "abc", "since": "one", "source": "f.py:1@1", "example": "abc"}, "not a version"),
    ({"id": "x", "kind": "progress", "key": "abc", "source": "f.py:1@1", "example": "abc"}, "needs a phase"),
])
def test_invalid_markers_are_rejected_with_the_field_named(bad, err):
    with pytest.raises(ValidationError, match=err):
        CatalogFile.model_validate({"engine": "vllm", "markers": [bad]})


def test_packaged_yaml_is_plain_data():
    from importlib import resources
    for name in ("common.yaml", "vllm.yaml", "sglang.yaml", "doctor.yaml"):
        doc = yaml.safe_load(resources.files("gpustack_k3.coldstart").joinpath("data", name).read_text())
        assert isinstance(doc, dict)


def test_doctor_rule_ids_are_the_agreed_ones():
    assert {r.id for r in CAT.rules} == {
        "fp8-kv-no-scales", "slow-tokenizer", "sglang-device-name-misdetected", "vllm-kv-overcommit",
        "vllm-compile-mode-none", "sglang-kda-verify-triton-fallback", "sglang-kv-pool-below-context",
        "vllm-soft-oom-retries", "jit-after-ready", "deepgemm-scale-fmt", "coldstart-failed"}
