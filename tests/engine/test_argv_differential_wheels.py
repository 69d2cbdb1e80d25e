"""Differential test against every released parser the catalog pins, built from its wheel.

tools/engine_parsers builds vLLM's `vllm serve` parser and SGLang's prepare_server_args parser from the released
wheels (the engines' own parsing code: FlexibleArgumentParser, ConfigArgumentMerger, the type functions and
actions; heavy runtime modules stubbed) and answers a generated corpus of command lines per version in one
interpreter start. The product's reader, with the committed dump and model_optional=False (the engine requires
its model where it does), must agree on accept/refuse, the unrecognized tokens and every value set.

Needs the wheels (`bash .ci/setup_engine_wheels.sh`, tier engine_wheels): skips without them, fails under CI=true.
"""
from __future__ import annotations

import json

import pytest
from argv_corpus import Corpus

from tests.support import tiers
from tools.engine_parsers import dump as dump_tool


SEED = 20261202
SIZE = 400
# catalog version whose dump each wheel gave (the kimi-k3 builds read with their nearest release's parser)
CASES = [("vllm", "0.33.0", "0.33.0"), ("vllm", "kimi-k3", "0.28.0"), ("vllm", "0.11.0", "0.11.0"),
         ("sglang", "0.5.23", "0.5.23")]


@pytest.mark.engine
@pytest.mark.engine_wheels
@pytest.mark.parametrize("engine,version,release", CASES, ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_reader_agrees_with_the_released_parser(engine, version, release, tmp_path):
    tiers.engine_wheel(dump_tool.DIST[engine], release)     # skips outside CI, fails under CI=true
    corpus = Corpus(engine, version)
    argvs = corpus.generate(tmp_path, SIZE, SEED)
    answers = dump_tool.parse_with_wheel(engine, release, argvs)
    bad = []
    for argv, real in zip(argvs, answers, strict=True):
        problems = corpus.disagreements(argv, not real["ok"], real, model_optional=False,
                                        model_key="model_path" if engine == "sglang" else "model")
        if problems:
            bad.append(f"{json.dumps(argv)}\n    " + "\n    ".join(problems))
    accepted = sum(1 for r in answers if r["ok"])
    assert not bad, f"{len(bad)} of {len(argvs)} command lines disagree ({accepted} accepted):\n" + "\n".join(bad[:40])
