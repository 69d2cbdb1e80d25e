"""Property tests: whatever the spec or argv, the CLI answers 0, 1 or 2 with a message, never a traceback."""
from __future__ import annotations

import contextlib
import io

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import run
from gpustack_k3.core.flags import flag_index

from .conftest import merge

FLAGS = sorted({n for e in ("vllm", "sglang") for n in flag_index(load_catalog().engine(e))})
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2_000_000), st.floats(-2, 3), st.just(float("nan")),
                    st.text(max_size=12), st.lists(st.integers(), max_size=2))
SPEC_PATHS = ["engine.name", "engine.version", "parallel.tp", "parallel.dcp", "parallel.pp", "memory.fraction",
              "memory.kvCacheDtype", "memory.kvCacheBytes", "scheduling.maxModelLen", "scheduling.maxNumSeqs",
              "scheduling.maxNumBatchedTokens", "scheduling.longPrefillTokenThreshold", "speculative.method",
              "speculative.numTokens", "speculative.draftModel", "hardware.gpuType", "hardware.gpuCount",
              "memory.mambaFullMemoryRatio", "extraArgs", "env", "bogus"]


def call(argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    import sys

    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogatepass")))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(argv)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


def nested(path, value):
    d = value
    for part in reversed(path.split(".")):
        d = {part: d}
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SPEC_PATHS), scalars), max_size=4), st.sampled_from(["vllm-seed", "sglang-seed"]))
def test_mutated_specs_never_crash(muts, preset):
    data = load_catalog().presets[preset].document
    for path, val in muts:
        data = merge(data, {"spec": nested(path, val)})
    code, out, err = call(["validate", "-", "-o", "json"], stdin=yaml.safe_dump(data))
    assert code in (0, 1, 2), err
    if code == 2:
        assert err.startswith("error: ") and ("spec" in err or "YAML" in err or "-:" in err)
    if code in (0, 1):
        assert '"findings"' in out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FLAGS), st.sampled_from(["8", "0", "-1", "0.9", "x", "{", "{}", "true", "--", "-"]),
                          st.text(max_size=8)), max_size=8), st.sampled_from(["vllm", "sglang"]))
def test_random_argv_never_crash(argv, engine):
    code, out, err = call(["check-args", "--engine", engine, "-o", "json", "--", *argv])
    assert code in (0, 1, 2), err
    assert "internal error" not in err
    if code == 2:
        assert err.startswith("error: ")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_as_document(data):
    code, out, err = call(["validate", "-"], stdin=data.decode("latin-1"))
    assert code in (0, 1, 2)
    assert "internal error" not in err
