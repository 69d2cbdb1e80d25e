"""The engine-check table's ``key:`` predicates (gpustack_k3/core/rules/checks.py): a field of a JSON option as the
release's parser read it (--structured-outputs-config, --speculative-config, ...), the config class's default where
the JSON does not give the field, presence (``is: set/unset``), nested keys, and a malformed key refused at load."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules.checks import ChecksTableError, compile_entry, line_view

from .conftest import preset_doc


def vllm_view(extra: list[str], version: str = "0.33.0"):
    return line_view(resolve(preset_doc("vllm-dcp-no-spec", {"engine": {"version": version}, "extraArgs": extra})))


def entry(when: list) -> dict:
    return {"id": "vllm-test-entry", "title": "t", "releases": {"0.33.0": "vllm/config/x.py:1@0.33.0"},
            "when": when, "message": "refused", "why": "w", "fix": "f"}


def holds(when: list, extra: list[str]) -> bool:
    return compile_entry("vllm", entry(when), 0).cond(vllm_view(extra))


SO = "--structured-outputs-config"
SPEC = "--speculative-config"


@pytest.mark.parametrize("when,extra,expect", [
    ([{"dest": "structured_outputs_config", "key": "backend", "eq": "xgrammar"}],
     [SO, json.dumps({"backend": "xgrammar"})], True),
    ([{"dest": "structured_outputs_config", "key": "backend", "eq": "xgrammar"}], [], False),
    # the class default stands in where the JSON does not give the field
    ([{"dest": "structured_outputs_config", "key": "backend", "default": "auto", "eq": "auto"}],
     [SO, json.dumps({"disable_any_whitespace": True})], True),
    ([{"dest": "structured_outputs_config", "key": "backend", "eq": "auto"}],
     [SO, json.dumps({"disable_any_whitespace": True})], False),
    ([{"dest": "structured_outputs_config", "key": "backend", "is": "set"}],
     [SO, json.dumps({"backend": "guidance"})], True),
    ([{"dest": "structured_outputs_config", "key": "backend", "default": "auto", "is": "unset"}],
     [SO, json.dumps({"disable_any_whitespace": True})], True),
    ([{"dest": "speculative_config", "key": "num_speculative_tokens", "gt": 3}],
     [SPEC, json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 2})], True),
    ([{"dest": "speculative_config", "key": "method", "is": "unset"}], [], True),   # no JSON: no key, value None
    ([{"dest": "speculative_config", "key": "method", "is": "null"}], [], True),
])
def test_key_predicates_read_a_json_options_field(when, extra, expect):
    assert holds(when, extra) is expect


def test_a_dotted_key_descends_into_nested_objects():
    extra = ["--compilation-config", json.dumps({"pass_config": {"fuse_norm_quant": True}})]
    v = vllm_view(extra)
    assert v.value("compilation_config")["pass_config"] == {"fuse_norm_quant": True}
    assert holds([{"dest": "compilation_config", "key": "pass_config.fuse_norm_quant", "is": True}], extra)
    assert not holds([{"dest": "compilation_config", "key": "pass_config.other", "is": "set"}], extra)


@pytest.mark.parametrize("pred,problem", [
    ({"dest": "speculative_config", "key": "a-b", "is": "set"}, "key must be a JSON field name"),
    ({"dest": "speculative_config", "key": 3, "is": "set"}, "key must be a JSON field name"),
    ({"dest": "speculative_config", "default": 1, "is": "set"}, "default: goes with key:"),
    ({"dest": "speculative_config", "key": "method"}, "exactly one test"),
])
def test_a_malformed_key_predicate_is_refused_at_load(pred, problem):
    with pytest.raises(ChecksTableError, match=problem):
        compile_entry("vllm", entry([pred]), 0)
