"""The engines' parser dumps (catalog/data/engines/*-options.json) and what the catalog takes from them."""
from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml

from gpustack_k3.catalog.loader import DATA, CatalogError, load_catalog
from gpustack_k3.core.argv import read_argv, version_dump
from gpustack_k3.core.argv import sglang as sglang_argv
from gpustack_k3.core.argv import vllm as vllm_argv
from gpustack_k3.core.argv.parser import build_parser
from gpustack_k3.core.argv.engine_types import UnknownEngineCode, build_type
from gpustack_k3.core.flags import render_args
from gpustack_k3.core.resolve import resolve

from .conftest import preset_doc

CAT = load_catalog()
VERSIONS = [(e, k) for e, entry in CAT.engines.items() for k in entry.versions]
DUMPS = sorted(p.name for p in (DATA / "engines").glob("*-options.json"))


@pytest.mark.parametrize("engine,key", VERSIONS)
def test_every_version_reads_with_a_dump_the_reader_knows(engine, key):
    """Every pinned version has its real parser's dump, and every type function, custom action and
    pre-argparse code it names is one the reader implements (by source hash)."""
    v = CAT.version(engine, key)
    dump = version_dump(v)
    assert dump.engine == engine and (v.parser.wheel is None or dump.version == v.parser.wheel)
    build_parser(dump)
    if engine == "vllm":
        vllm_argv.dialect(dump.code)
    else:
        sglang_argv.check_code(dump.code)


def test_every_dump_is_used_by_a_version():
    used = {CAT.version(e, k).parser.dump.split("/", 1)[1] for e, k in VERSIONS}
    assert set(DUMPS) == used


def test_unknown_engine_code_is_refused_by_name():
    with pytest.raises(UnknownEngineCode, match="human_readable_int with source hash 0000"):
        build_type({"fn": "human_readable_int", "src": "0000"})
    with pytest.raises(UnknownEngineCode, match="FlexibleArgumentParser code"):
        vllm_argv.dialect({"parse_args": "x", "_pull_args_from_config": "y", "load_config_file": "z"})


@pytest.mark.parametrize("name", sorted(CAT.presets))
def test_every_flag_a_preset_emits_is_accepted_by_its_version_parser(name):
    """Render the preset's command line and read it back with its version's parser: every flag exists
    (as spelled), every value is accepted (types, choices, JSON)."""
    r = resolve(preset_doc(name))
    args = [t for a in render_args(r) for t in a.tokens]
    command = r.version.command or r.engine.command
    reading = read_argv(r.engine, r.version, [*command, *args])
    assert reading.refusals == [], (name, reading.refusals)
    flags = {t.split("=", 1)[0] for t in args if t.startswith("--")}
    assert flags <= version_dump(r.version).option_strings, flags - version_dump(r.version).option_strings


def test_kv_cache_dtypes_and_defaults_come_from_the_dump():
    v = CAT.version("vllm", "0.33.0")
    opts = {f: o for o in json.loads((DATA / v.parser.dump).read_text())["parser"]["options"] for f in o["flags"]}
    assert v.kv_cache_dtypes == opts["--kv-cache-dtype"]["metavar"]          # 0.33: open in argparse, Literal
    assert CAT.version("vllm", "0.11.0").kv_cache_dtypes == ["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2",
                                                             "fp8_inc"]   # 0.11: argparse choices
    assert v.defaults["memory.fraction"] == opts["--gpu-memory-utilization"]["default"] == 0.92
    assert CAT.version("vllm", "0.11.0").defaults["memory.fraction"] == 0.9
    assert CAT.version("sglang", "0.5.23").defaults["scheduling.prefixCaching"] is True   # not --disable-radix-cache
    # a field whose flag the version's parser lacks is unsupported there
    assert "vllm.attentionBackend" in CAT.version("vllm", "0.11.0").unsupported_fields
    assert "vllm.attentionBackend" not in CAT.version("vllm", "0.33.0").unsupported_fields


@pytest.fixture
def data_copy(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(DATA, d)
    return d


def _edit(path, fn):
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["versions"]["0.33.0"]["defaults"].update({"memory.fraction": 0.92}), "restates the parser dump"),
    (lambda d: d["versions"]["0.33.0"].update(kv_cache_dtypes=["auto"]), "kv_cache_dtypes restates"),
    (lambda d: d["versions"]["0.33.0"]["parser"].update(dump="engines/nope.json"), "parser dump engines/nope.json"),
    (lambda d: d["versions"]["0.33.0"]["parser"].update(wheel="0.34.0"), "is vllm 0.33.0"),
    (lambda d: d["versions"]["0.33.0"].pop("parser"), "parser"),
])
def test_the_yaml_does_not_restate_or_contradict_the_dump(data_copy, mutate, needle):
    _edit(data_copy / "engines" / "vllm.yaml", mutate)
    with pytest.raises(CatalogError, match=needle):
        load_catalog(data_copy)


def test_every_custom_action_has_a_kind_and_an_implementation():
    from gpustack_k3.core.argv.dumps import CUSTOM_ACTION_KINDS
    from gpustack_k3.core.argv.engine_types import ACTIONS

    assert set(CUSTOM_ACTION_KINDS) == set(ACTIONS)


@pytest.mark.parametrize("name", DUMPS)
def test_option_strings_are_what_the_parser_registers(name):
    dump = version_dump(next(CAT.version(e, k) for e, k in VERSIONS
                             if CAT.version(e, k).parser.dump.endswith("/" + name)))
    assert dump.option_strings == set(build_parser(dump)._option_string_actions)


@pytest.mark.parametrize("engine,key", VERSIONS)
def test_reading_with_the_reachable_options_equals_reading_with_all(engine, key, tmp_path, monkeypatch):
    """read_argv builds only the options the command line can reach (parser.reachable); over generated
    command lines (every spelling, abbreviations unique or not, faults, config files) the reading, refusals
    and messages included, is the one the whole parser gives."""
    from gpustack_k3.core.argv import read as read_mod
    from tests.engine.argv_corpus import Corpus

    v, e = CAT.version(engine, key), CAT.engine(engine)
    argvs = Corpus(engine, key).generate(tmp_path, 150, seed=7) + [
        ["-hq"], ["-qh"], ["-tp8"], ["-tp=2", "-dpm"], ["-nq", "1"], ["-O3"], ["--", "--port", "1"], ["-"]]

    def files(path):
        return open(path, encoding="utf-8").read()

    def reading(argv):
        r = read_argv(e, v, argv, read_file=files)
        # a type function's repr in argparse's message carries its address (new per parser built)
        refusals = [(x.where, x.flag, re.sub(r" at 0x[0-9a-f]+", "", x.message), x.token) for x in r.refusals]
        return ({d: (g.option, g.raw, repr(g.value), g.origin) for d, g in r.given.items()}, repr(r.model),
                refusals, r.unrecognized)

    subset = [reading(a) for a in argvs]
    full_parser = read_mod.build_parser
    monkeypatch.setattr(read_mod, "build_parser", lambda dump, *, model_optional=True, for_args=None:
                        full_parser(dump, model_optional=model_optional))
    assert [reading(a) for a in argvs] == subset
    assert sum(1 for s in subset if s[2]) > 10 and sum(1 for s in subset if not s[2]) > 10   # both kinds drawn
