"""Catalog regexes run through ``re`` on short lines and RE2 on long ones: both must read the same groups."""
from __future__ import annotations

import re

import pytest

from gpustack_k3.coldstart import load_catalog
from gpustack_k3.coldstart.patterns import LONG, LinePattern

from .conftest import LOGS

CAT = load_catalog()
PATTERNS = [(m.id, m.regex) for m in CAT.markers if m.regex] + \
    [(f"{r.id}:{p.key}", p.regex) for r in CAT.rules for p in r.patterns if p.regex]
LINES = sorted({line for f in sorted(LOGS.glob("*.log"))
                for line in f.read_text("utf-8", "replace").splitlines() if line.strip()})


@pytest.mark.parametrize("name,regex", PATTERNS, ids=[n for n, _ in PATTERNS])
def test_re_and_re2_read_the_same_groups_on_every_fixture_line(name, regex):
    p = LinePattern(regex)
    if not p.linear:   # look-around: RE2 cannot compile it, every line goes to re
        assert any(x in regex for x in ("(?=", "(?!", "(?<=", "(?<!"))
        return
    for line in LINES + [line * 8 for line in LINES if "Initializing a V1 LLM engine" in line]:
        a, b = p.search_re(line), p.search_re2(line)
        assert (a is None) == (b is None), (name, line[:200])
        if a is not None:
            assert a.groupdict() == b.groupdict(), (name, line[:200])


def test_long_lines_go_to_re2_short_lines_to_re():
    """The doctor's JIT pattern backtracks for milliseconds on an engine-config line in re (6.4 ms on
    the CPU preset's 3.4 KiB line: bench/coldstart_throughput.py, dense case); RE2 is linear in the
    line's length, so long lines go there."""
    jit = next(p.regex for r in CAT.rules for p in r.patterns if p.key == "jit")
    p = LinePattern(jit)
    assert p.linear
    short = "CuTeDSL JIT compiling kernel kda_decode_fwd (1/4)"
    long = "x" * LONG + " " + short
    assert isinstance(p.search(short), re.Match)
    hit = p.search(long)
    assert hit is not None and not isinstance(hit, re.Match)   # RE2's match object
    assert LinePattern(r"^(?!.*retry)x").linear is False        # look-around: re only
