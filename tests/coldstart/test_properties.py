"""Hypothesis: garbage, binary noise and arbitrary chunking never raise; reports stay well-formed."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_k3.coldstart import ColdStartTracker, load_catalog

from .conftest import LOGS

CAT = load_catalog()
EXAMPLES = [m.example.encode() for m in CAT.markers] + [p.example.encode() for r in CAT.rules for p in r.patterns]
PREFIXES = [b"", b"(Worker_TP3 pid=12) INFO 02-30 25:61:99 [x.py:1] ", b"[2026-13-40 10:00:00 DP1 TP3 EP2] ",
            b"[99:99:99 TP0] ", b"vllm-1  | 2026-01-01T00:00:00Z ", b"\x1b[1;36m(EngineCore_DP0 pid=1)\x1b[0;0m INFO 01-01 00:00:00 [c.py:1] ",
            b"INFO 12-31 23:59:59 [a.py:2] "]

line = st.builds(lambda p, e, tail: p + e + tail, st.sampled_from(PREFIXES), st.sampled_from(EXAMPLES),
                 st.binary(max_size=20))
noise = st.binary(max_size=200)
stream = st.lists(st.one_of(line, noise, st.sampled_from([b"\n", b"\r", b"\r\n"])), max_size=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.binary(max_size=300), max_size=30))
def test_random_bytes_never_raise(chunks):
    t = ColdStartTracker(year=2026)
    for c in chunks:
        t.feed(c)
    t.check_stall(2e9)
    rep = t.finish()
    json.dumps(rep.to_dict())
    t.findings()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=stream, cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=10),
       engine=st.sampled_from([None, "vllm", "sglang"]))
def test_marker_soup_any_split_same_result(parts, cuts, engine):
    data = b"\n".join(parts)
    whole = ColdStartTracker(engine=engine, year=2026)
    whole.feed(data)
    a = whole.finish().to_dict()
    json.dumps(a)
    t = ColdStartTracker(engine=engine, year=2026)
    prev = 0
    for c in sorted(set(min(c, len(data)) for c in cuts)):
        t.feed(data[prev:c])
        prev = c
    t.feed(data[prev:])
    assert t.finish().to_dict() == a
    assert a["status"] in ("ready", "failed", "in-progress")
    whole.findings()


@settings(max_examples=50, deadline=None)
@given(pos=st.integers(min_value=0, max_value=10_000), blob=st.binary(min_size=1, max_size=64))
def test_noise_injected_into_a_real_log_never_raises(pos, blob):
    data = (LOGS / "sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log").read_bytes()
    pos = min(pos, len(data))
    t = ColdStartTracker(year=2026)
    t.feed(data[:pos] + blob + data[pos:])
    assert t.finish().engine == "sglang"
