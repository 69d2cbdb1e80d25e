"""The engine-check table reader (gpustack_k3/core/rules/checks.py): the tables' validation at import, the
predicates over a document's values as the release's parser gives them, release gating, and every entry's names
against the listed releases' parser dumps. The entries' verdicts against the engine itself are in
tests/engine_oracle/test_checks_sglang.py."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpustack_k3.core import argv as engine_argv
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import RULES, validate
from gpustack_k3.core.rules import checks
from tests.support import tiers
from gpustack_k3.core.rules.checks import ChecksTableError, compile_entry, compile_tables, line_view
from gpustack_k3.core.rules.envs import PARSERS, declared_parser
from gpustack_k3.catalog import load_catalog

from .conftest import preset_doc

ROOT = Path(__file__).resolve().parents[2]


def entry(**over) -> dict:
    base = {"id": "sglang-test-entry", "title": "a test entry", "releases": {"0.5.23": "sglang/srt/x.py:1-2@0.5.23"},
            "when": [{"dest": "sidecar", "is": "notnull"}], "message": "--sidecar {sidecar} refused.",
            "why": "because of the test", "fix": "drop --sidecar"}
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


def sglang_doc(version: str = "0.5.23", extra: list[str] | None = None, env: dict | None = None):
    return preset_doc("sglang-no-dcp", {"engine": {"version": version}, "extraArgs": extra or [], "env": env or {}})


def view(version: str = "0.5.23", extra: list[str] | None = None, env: dict | None = None):
    return line_view(resolve(sglang_doc(version, extra, env)))


def holds(when: list, version: str = "0.5.23", extra: list[str] | None = None, env: dict | None = None) -> bool:
    return compile_entry("sglang", entry(when=when, message="refused"), 0).cond(view(version, extra, env))


# ------------------------------------------------------------------ validation at load

@pytest.mark.parametrize("over,problem", [
    ({"when": [{"dest": "sidecar", "is": "maybe"}]}, "is: must be one of"),
    ({"when": [{"dest": "sidecar", "eq": 1, "ne": 2}]}, "exactly one test"),
    ({"when": [{"dest": "sidecar"}]}, "exactly one test"),
    ({"when": [{"dest": "sidecar", "env": "X", "is": "set"}]}, "exactly one of dest, env, model"),
    ({"when": [{"dest": "sidecar", "lt": "ten"}]}, "takes a number"),
    ({"when": [{"dest": "sidecar", "is": "set", "extra": 1}]}, "unknown key"),
    ({"when": [{"env": "SGLANG_X", "eq": 1}]}, "needs as: PARSER"),
    ({"when": [{"env": "SGLANG_X", "as": "no_such_parser", "eq": 1}]}, "not a parser"),
    ({"when": [{"any": []}]}, "non-empty list"),
    ({"when": [{"model": {"architectures_in": []}}]}, "non-empty list of architecture names"),
    ({"when": []}, "missing when"),
    ({"when": {"dest": "sidecar"}}, "non-empty list of conditions"),
    ({"releases": {"0.5.23": "serving_hook.py"}}, "file.py:LINE@version"),
    ({"releases": ["0.5.23"]}, "maps a catalog release key"),
    ({"message": "{nope} refused"}, "{nope} is not a dest or env"),
    ({"fix": None}, "missing fix"),
    ({"severity": "fatal"}, "severity"),
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"id": "vllm-misfiled"}, "starting with 'sglang-'"),
])
def test_a_malformed_entry_is_refused_naming_it(over, problem):
    with pytest.raises(ChecksTableError) as exc:
        compile_entry("sglang", entry(**over), 0)
    assert str(exc.value).startswith(f"checks table entry {entry(**over)['id']}:")
    assert problem in str(exc.value)


def test_a_table_refuses_a_repeated_id_and_a_wrong_format():
    with pytest.raises(ChecksTableError, match="sglang-test-entry: id: defined twice"):
        compile_tables({"sglang": {"format": 1, "checks": [entry(), entry()]}})
    with pytest.raises(ChecksTableError, match="needs format: 1"):
        compile_tables({"sglang": {"format": 2, "checks": [entry()]}})
    with pytest.raises(ChecksTableError, match="not an engine"):
        compile_tables({"trtllm": {"format": 1, "checks": []}})


def test_a_malformed_table_fails_the_import_naming_the_entry(tmp_path):
    """The package's own import fails (not a user's command) when a table holds a malformed entry."""
    bad = tmp_path / "checks"
    bad.mkdir()
    (bad / "sglang.yaml").write_text(textwrap.dedent("""\
        format: 1
        checks:
          - id: sglang-broken-entry
            title: broken
            releases: {"0.5.23": "sglang/srt/x.py:1@0.5.23"}
            when: [{dest: sidecar, is: sometimes}]
            message: m
            why: w
            fix: f
        """))
    code = ("import gpustack_k3.catalog.loader as L, pathlib; "
            f"L.DATA = pathlib.Path({str(tmp_path)!r}); import gpustack_k3.core.rules")
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": "off", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "ChecksTableError: checks table entry sglang-broken-entry: when[0]: is: must be one of" in p.stderr


# ------------------------------------------------------------------ the packaged tables

def test_every_entry_is_a_rule_of_the_args_family_switched_on_for_its_releases_only():
    cat = load_catalog()
    assert checks.TABLE, "the packaged tables hold entries"
    for e in checks.TABLE.values():
        r = RULES[e.id]
        assert (r.family, r.checked_by, r.engines) == ("args", "oracle", (e.engine,))
        assert r.versions(cat) == [(e.engine, k) for k in cat.engines[e.engine].versions if k in e.releases]
        assert set(e.releases) <= set(cat.engines[e.engine].versions), e.id
        for key, src in e.releases.items():
            assert r.source_for(e.engine, key) == src


def test_every_name_an_entry_reads_exists_in_each_listed_release():
    """Each dest is a destination of the release's parser dump, each variable has a parser for the release."""
    cat = load_catalog()
    for e in checks.TABLE.values():
        for key in e.releases:
            version = cat.engines[e.engine].versions[key]
            dump = engine_argv.version_dump(version)
            missing = [d for d in e.dests if d != "model_path" and dump.dest(d) is None]
            assert missing == [], f"{e.id} @{key}: no parser dest {missing}"
    raws = {c["id"]: c for doc in checks.raw_tables().files.values() for c in doc["checks"]}
    for eid, raw in raws.items():
        for pred in _predicates(raw["when"]):
            if "env" in pred and "as" in pred:
                assert pred["as"] in PARSERS
                for key in raw["releases"]:
                    version = load_catalog().engines[checks.TABLE[eid].engine].versions[key]
                    declared = declared_parser(version, pred["env"])
                    assert declared is None or declared.name == pred["as"], (eid, key, pred["env"])


def _predicates(conds):
    for c in conds:
        for k in ("any", "all"):
            if k in c:
                yield from _predicates(c[k])
                break
        else:
            yield c


# ------------------------------------------------------------------ predicates over a document

def test_dest_values_are_the_parsers_with_defaults_where_not_given():
    v = view(extra=["--sampling-mask-max-tokens", "-3", "--sidecar", " x "])
    assert v.value("sampling_mask_max_tokens") == -3 and v.given("sampling_mask_max_tokens")
    assert v.value("sidecar") == " x "
    assert v.value("grpc_port") is None and not v.given("grpc_port")
    assert v.value("dwdp_size") == 1 and not v.given("dwdp_size")         # the dump's default
    assert v.value("tp_size") == 8                                          # a spec field, rendered
    assert v.value("model_path") == resolve(sglang_doc()).model_path


@pytest.mark.parametrize("when,extra,env,expect", [
    ([{"dest": "sidecar", "is": "set"}], ["--sidecar", "a"], None, True),
    ([{"dest": "sidecar", "is": "unset"}], ["--sidecar", "a"], None, False),
    ([{"dest": "sidecar", "is": "blank"}], ["--sidecar", "  "], None, True),
    ([{"dest": "sidecar", "is": "notblank"}], ["--sidecar", "  "], None, False),
    ([{"dest": "enable_mis", "is": True}], ["--enable-mis"], None, True),
    ([{"dest": "enable_mis", "is": False}], [], None, True),
    ([{"dest": "sampling_mask_max_tokens", "le": 0}], ["--sampling-mask-max-tokens", "0"], None, True),
    ([{"dest": "sampling_mask_max_tokens", "le": 0}], [], None, False),
    ([{"dest": "grpc_port", "lt": 1}], [], None, False),                  # None compares as nothing
    ([{"dest": "dwdp_size", "ne": {"dest": "tp_size"}}], ["--dwdp-size", "4"], None, True),
    ([{"dest": "dwdp_size", "eq": {"dest": "tp_size"}}], ["--dwdp-size", "8"], None, True),
    ([{"dest": "shared_experts_tp_size", "divides": {"dest": "tp_size"}}], ["--shared-experts-tp-size", "4"], None, True),
    ([{"dest": "shared_experts_tp_size", "not_divides": {"dest": "tp_size"}}], ["--shared-experts-tp-size", "3"], None,
     True),
    ([{"dest": "shared_experts_tp_size", "not_divides": 8}], ["--shared-experts-tp-size", "0"], None, True),
    ([{"dest": "tp_size", "multiple_of": 4}], [], None, True),
    ([{"dest": "tp_size", "not_multiple_of": 3}], [], None, True),
    ([{"dest": "elastic_ep_backend", "in": ["mooncake"]}], ["--elastic-ep-backend", "mooncake"], None, True),
    ([{"dest": "elastic_ep_backend", "not_in": ["mooncake"]}], [], None, True),
    ([{"dest": "sidecar", "in_stripped_lower": ["off"]}], ["--sidecar", " OfF"], None, True),
    ([{"dest": "sidecar", "not_in_stripped_lower": ["off"]}], ["--sidecar", " OfF"], None, False),
    ([{"dest": "sidecar", "not_in_stripped_lower": ["off"]}], [], None, False),        # None: not a string
    ([{"dest": "sidecar", "is": "truthy"}], ["--sidecar", ""], None, False),
    ([{"dest": "sidecar", "is": "falsy"}], [], None, True),
    ([{"any": [{"dest": "enable_mis", "is": True}, {"dest": "sidecar", "is": "set"}]}], ["--sidecar", "a"], None, True),
    ([{"any": [{"dest": "enable_mis", "is": True}, {"dest": "sidecar", "is": "set"}]}], [], None, False),
    ([{"all": [{"dest": "enable_mis", "is": True}, {"dest": "sidecar", "is": "set"}]}], ["--enable-mis"], None, False),
    # SGLang's EnvInt: an integer is read, anything else warns and gives the default (None)
    ([{"env": "SGLANG_GRPC_PORT", "as": "sglang_env_int", "is": "null"}], [], {"SGLANG_GRPC_PORT": "x"}, True),
    ([{"env": "SGLANG_GRPC_PORT", "as": "sglang_env_int", "is": "null"}], [], {"SGLANG_GRPC_PORT": "77"}, False),
    ([{"env": "SGLANG_GRPC_PORT", "is": "set"}], [], {"SGLANG_GRPC_PORT": "x"}, True),
    ([{"env": "SGLANG_GRPC_PORT", "as": "sglang_env_int", "default": 5, "eq": 5}], [], None, True),
    # EnvBool: true/1/yes/y in any case (environ.py:67-86@0.5.23)
    ([{"env": "SGLANG_X_TEST", "as": "sglang_env_bool", "is": True}], [], {"SGLANG_X_TEST": "YES"}, True),
    ([{"env": "SGLANG_X_TEST", "as": "sglang_env_bool", "is": True}], [], {"SGLANG_X_TEST": "on"}, False),
])
def test_predicates(when, extra, env, expect):
    assert holds(when, extra=extra, env=env) is expect


def test_model_predicates_read_the_models_config_json():
    v = view()
    assert v.arch is not None and v.arch.architecture == "KimiK3ForConditionalGeneration"
    assert holds([{"model": {"architectures_in": ["KimiK3ForConditionalGeneration"]}}])
    assert holds([{"model": {"architectures_not_in": ["Qwen3ForCausalLM"]}}])
    assert not holds([{"model": {"architectures_not_in": ["KimiK3ForConditionalGeneration"]}}])
    assert holds([{"model": {"field": "experts", "gt": 1}}])
    assert holds([{"model": {"field": "model_type", "is": "notnull"}}])


def test_an_entry_reading_the_model_does_not_fire_without_a_config_json():
    e = compile_entry("sglang", entry(when=[{"model": {"architectures_not_in": ["Qwen3ForCausalLM"]}}], message="m"), 0)
    assert e.reads_model
    doc = preset_doc("sglang-no-dcp", {"engine": {"version": "0.5.23"}, "model": {"name": "no-such-model"}})
    r = resolve(doc)
    assert r.model_arch is None
    assert list(checks._check_of(e)(r, None)) == []


# ------------------------------------------------------------------ the packaged entries as rules

def test_an_entry_fires_only_for_the_releases_it_lists():
    fired = {v: [f for f in validate(sglang_doc(v, ["--sidecar", "x"])) if f.rule == "sglang-sidecar-needs-grpc-port"]
             for v in ("0.5.23", "0.5.22", "kimi-k3")}
    assert len(fired["0.5.23"]) == 1 and len(fired["0.5.22"]) == 1
    assert fired["kimi-k3"] == []
    f = fired["0.5.23"][0]
    assert f.severity == "error" and f.message == "--sidecar requires --grpc-port or SGLANG_GRPC_PORT."
    assert f.field == "spec.extraArgs[0]"
    assert f.source.endswith("@0.5.23") and fired["0.5.22"][0].source.endswith("@0.5.22")


def test_the_message_substitutes_the_values():
    f = [f for f in validate(sglang_doc(extra=["--sampling-mask-max-tokens", "-1"]))
         if f.rule == "sglang-sampling-mask-max-tokens-positive"]
    assert [x.message for x in f] == ["--sampling-mask-max-tokens must be positive (got -1)."]


def test_a_line_the_parser_refuses_is_left_to_argv_refused():
    assert view(extra=["--sidecar"]) is None    # --sidecar needs a value: the parser refuses the line


def test_explain_shows_an_entry_like_any_rule():
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "explain", "sglang-sidecar-needs-grpc-port", "-o", "json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    import json

    d = json.loads(p.stdout)
    assert d["family"] == "args" and d["checked_by"] == "oracle"
    assert d["applies_to"] == ["sglang 0.5.23", "sglang 0.5.22"]
    assert {s["version"]: s["source"] for s in d["sources"]}["0.5.22"].endswith("@0.5.22")


# ------------------------------------------------------------------ every entry's examples, judged by the product

def examples() -> list[tuple]:
    """(entry id, engine, release, example) for every example of every entry and each release it is for."""
    out = []
    for engine, doc in checks.raw_tables().files.items():
        for raw in doc["checks"]:
            for ex in raw.get("examples") or []:
                for key in ex.get("releases") or raw["releases"]:
                    out.append((raw["id"], engine, key, ex))
    return out


EXAMPLES = examples()
# the entries whose firing case is an example here (tests/core/test_registry.py: every rule has a firing case)
CHECKS_DIRECT = {e[0] for e in EXAMPLES}


def product(engine: str, release: str, argv: list[str], env: dict, model: str | None, shape: str | None = None) -> dict:
    """check-args in-process (tools/engine_oracle/product.py, as the differential runs it); an example's ``shape``:
    the model is given by that shape's public config.json (``--model-config``), as the differential gives it."""
    from tools.engine_oracle.product import check_args, shape_config

    line = {"argv": argv, "env": env, "model": model, "gpu_type": "b300", "gpus": 8}
    if shape:
        tiers.aiconfigurator()   # the shapes' public config.json files ship in aiconfigurator-core
        line["model_config"] = shape_config(shape)
    return check_args(engine, release, line)


def test_every_entry_has_examples_for_each_release():
    have = {(e[0], e[2]) for e in EXAMPLES}
    missing = [(e.id, k) for e in checks.TABLE.values() for k in e.releases if (e.id, k) not in have]
    assert missing == []


@pytest.mark.parametrize("eid,engine,release,ex", EXAMPLES, ids=[f"{e[0]}@{e[2]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_the_product_refuses_the_example_with_the_entry_and_passes_its_flip(eid, engine, release, ex):
    env = ex.get("env") or {}
    refused = product(engine, release, ex["refuse"], env, ex.get("model"), ex.get("shape"))
    assert refused["verdict"] == "refuse" and eid in refused["rules"], refused
    passed = product(engine, release, ex["accept"], ex.get("accept_env", env), ex.get("model"), ex.get("shape"))
    assert passed["verdict"] == "pass", passed
