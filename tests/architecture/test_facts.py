"""Each fact once: the engine names, units of memory and the CLI's exit codes are names in
``gpustack_k3/api/v1alpha1/constants.py``; the engines' default ports and flag names are catalog data
(``catalog/data/engines/<engine>.yaml``: ``default_port``, the ``flags`` table, ``model_flag``). A literal of one of them anywhere else in the package is
a second spelling, and fails here (tests/architecture/facts.py reads the source: docstrings, comments, rule ids
and ``Literal[...]`` types are not spellings; the ``Literal`` types are checked to list every engine)."""
from __future__ import annotations

import ast
from collections import Counter

from gpustack_k3.api.v1alpha1 import constants as api
from tests.architecture.facts import engine_flags, engine_ports, literal_engine_types, package_spellings, spellings
from tests.architecture.imports import ROOT, modules

# Literals equal to a fact by coincidence: another vocabulary. (path, fact) -> (count, why).
PERMANENT = {
    ("gpustack_k3/core/argv/engine_types.py", "unit"):
        (2, "SGLang's own size-suffix table (srt/utils/common.py human_readable_int@0.5.23: Ki Mi Gi Ti), transcribed"),
    ("gpustack_k3/core/argv/read.py", "engine name"):
        (2, "the `vllm` program name (`vllm serve`, argv[0]'s basename), not the engine's name"),
    ("gpustack_k3/core/topology.py", "engine name"):
        (2, "MERGED_SECTIONS: the spec's section names spec.vllm / spec.sglang (DeploymentSpec fields)"),
    ("gpustack_k3/render/gpustack.py", "engine name"):
        (2, "BUILT_IN_BACKENDS: GPUStack's BackendEnum values (schemas/models.py:90@2.3.0), GPUStack's vocabulary"),
    ("gpustack_k3/render/router.py", "engine port"):
        (1, "ROUTER_PORT: the vLLM router's own listening port, equal to vLLM's default by coincidence"),
    ("gpustack_k3/core/argv/vllm.py", "engine flag"):
        (7, "vLLM's own handling of --model / --served-model-name in `vllm serve` (FlexibleArgumentParser), "
            "transcribed: the engine's code names these flags, not our flag table"),
    ("gpustack_k3/render/gpustack.py", "engine flag"):
        (3, "GPUSTACK_OWNED_FLAGS: the flags GPUStack's run command owns (routes/models.py validate_model_in@2.3.0)"),
    ("gpustack_k3/render/router.py", "engine flag"):
        (2, "--host / --port of the P/D routers' own command line (vLLM router, sglang-router), not an engine's"),
    ("gpustack_k3/oracle/models.py", "unit"):
        (1, "the engine oracle's tokenizer double: model_max_length 1 << 30 (a no-limit sentinel), not a byte unit "
            "(the models' figures come from the catalog's architecture blocks and the public config.json files)"),
    ("gpustack_k3/oracle/wheels.py", "engine name"):
        (2, "DIST's values: the engines' distribution names on the package index (pip download vllm==...)"),
    ("gpustack_k3/core/rules/sglang.py", "engine flag"):
        (1, "ATTENTION_BACKEND: SGLang's own --attention-backend, which no SGLang spec field carries (read from "
            "extraArgs); the same spelling is vLLM's vllm.attentionBackend flag"),
}

# Second spellings left in files another branch owns, each replaced by the constant named (engine name ->
# api.ENGINE_VLLM / ENGINE_SGLANG or ENGINES; unit -> api.GIB / MIB; exit code -> api.EXIT_*; an engine flag -> the
# catalog's flag table) in the owner's patch; whoever applies it takes its line out of this dict, and the test then
# holds the package to PERMANENT alone. (path, fact) -> count.
PENDING: dict[tuple[str, str], int] = {
}


def test_the_facts_are_named_once():
    assert api.ENGINES == ("vllm", "sglang") and api.GIB == 1024**3 and api.MIB == 1024**2
    assert (api.EXIT_OK, api.EXIT_REFUSED, api.EXIT_INPUT) == (0, 1, 2)
    assert set(engine_ports()) == {8000, 30000}     # read from the catalog, not from this test
    assert {"--model", "--model-path", "--tensor-parallel-size", "--tp-size"} <= set(engine_flags())


def test_no_second_spelling_of_a_fact():
    found = package_spellings(ROOT.parent, modules())
    have = Counter((path, s.fact) for path, ss in found.items() for s in ss)
    allowed = Counter({k: n for k, (n, _why) in PERMANENT.items()}) + Counter(PENDING)
    bad = []
    for key in sorted(set(have) | set(allowed)):
        if have[key] > allowed[key]:
            bad += [f"{key[0]}:{s.line}: {s.fact} {s.text} (use {s.use})" for s in found[key[0]] if s.fact == key[1]]
        elif have[key] < allowed[key]:
            bad.append(f"{key[0]}: {allowed[key] - have[key]} fewer {key[1]} spelling(s) than allowed: lower the "
                       "allow-list in tests/architecture/test_facts.py")
    assert bad == [], "\n".join(bad)


def test_engine_literal_types_list_every_engine():
    """``Literal["vllm", "sglang"]`` must spell values (a type checker reads no names): each lists every engine."""
    bad = []
    for _name, path in modules().items():
        for line, values in literal_engine_types(ast.parse(path.read_text(encoding="utf-8"))):
            if not set(api.ENGINES) <= set(values):
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: Literal{values} lacks {set(api.ENGINES) - set(values)}")
    assert bad == []


def test_the_check_sees_each_kind_of_second_spelling():
    """The checks above can fail; docstrings, rule ids, f-string text and Literal types are not spellings."""
    src = '''"""Runs vllm."""
import sys
from typing import Literal
Engine = Literal["vllm", "sglang"]
RULE = "sglang-topology-unsupported"
EXIT_BAD = 2
GIB = 1 << 30
MB64 = 64 << 20
G2 = 1024**3


def f(engine, ctx):
    """vllm"""
    if engine == "sglang":
        sys.exit(1)
    ctx.exit(2)
    port = 30000
    print(f"vllm {engine}")
    return {"exit_code": 2, "port": 8000}


@click.option("--model", help="the CLI's own option")
def g(argv):
    return argv + ["--tp-size", "8"]
'''
    got = [(s.line, s.fact, s.text) for s in spellings(src, ports={8000: "d", 30000: "d"},
                                                         flags={"--model": "d", "--tp-size": "d"})]
    assert got == [(6, "exit code", "2"), (7, "unit", "1 << 30"), (8, "unit", "64 << 20"), (9, "unit", "1024 ** 3"),
                   (14, "engine name", "'sglang'"), (15, "exit code", "1"), (16, "exit code", "2"),
                   (17, "engine port", "30000"), (19, "exit code", "2"), (19, "engine port", "8000"),
                   (24, "engine flag", "'--tp-size'")]
    assert literal_engine_types(ast.parse(src)) == [(4, ["vllm", "sglang"])]
