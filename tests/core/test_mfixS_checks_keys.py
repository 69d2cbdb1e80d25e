"""The condition tests helper mfixS added to the engine-check table's language (gpustack_k3/core/rules/checks.py):
``json_type`` / ``not_json_type``, ``keys_outside``, ``len_gt`` / ``len_lt``, on the values the release's parser gives
a command line (SGLang 0.5.23, the sglang-no-dcp preset). The entries that use them are verified against the release
by tests/engine_oracle/test_checks_sglang.py (their examples)."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules.checks import ChecksTableError, compile_entry
from tests.core.test_checks_table import entry, holds


@pytest.mark.parametrize("when,extra,expect", [
    ([{"dest": "default_chat_template_kwargs", "not_json_type": "object"}],
     ["--default-chat-template-kwargs", "[1]"], True),
    ([{"dest": "default_chat_template_kwargs", "not_json_type": "object"}],
     ["--default-chat-template-kwargs", '{"a": 1}'], False),
    ([{"dest": "default_chat_template_kwargs", "json_type": "array"}], ["--default-chat-template-kwargs", "[1]"], True),
    ([{"dest": "default_chat_template_kwargs", "json_type": "number"}], ["--default-chat-template-kwargs", "3"], True),
    ([{"dest": "default_chat_template_kwargs", "json_type": "number"}], ["--default-chat-template-kwargs", "true"],
     False),
    ([{"dest": "default_chat_template_kwargs", "json_type": "boolean"}], ["--default-chat-template-kwargs", "true"],
     True),
    ([{"dest": "default_chat_template_kwargs", "json_type": "string"}], ["--default-chat-template-kwargs", '"x"'],
     True),
    # unset: the default (None) is JSON null
    ([{"dest": "default_chat_template_kwargs", "json_type": "null"}], [], True),
    # a JSON option's field (key:)
    ([{"dest": "mm_process_config", "key": "image", "not_json_type": "object"}],
     ["--mm-process-config", '{"image": 1}'], True),
    ([{"dest": "mm_process_config", "key": "image", "not_json_type": "object"}],
     ["--mm-process-config", '{"image": {}}'], False),
    ([{"dest": "limit_mm_data_per_request", "keys_outside": ["image", "video", "audio"]}],
     ["--limit-mm-data-per-request", '{"image": 1, "text": 2}'], True),
    ([{"dest": "limit_mm_data_per_request", "keys_outside": ["image", "video", "audio"]}],
     ["--limit-mm-data-per-request", '{"image": 1, "audio": 2}'], False),
    # not an object: no key outside
    ([{"dest": "limit_mm_data_per_request", "keys_outside": ["image"]}], [], False),
    ([{"dest": "gc_threshold", "len_gt": 3}], ["--gc-threshold", "1", "2", "3", "4"], True),
    ([{"dest": "gc_threshold", "len_gt": 3}], ["--gc-threshold", "1", "2", "3"], False),
    ([{"dest": "gc_threshold", "len_lt": 2}], ["--gc-threshold", "1"], True),
    ([{"dest": "gc_threshold", "len_lt": 2}], [], False),   # unset: None has no length
])
def test_the_new_tests(when, extra, expect):
    assert holds(when, extra=extra) is expect


@pytest.mark.parametrize("pred,problem", [
    ({"dest": "gc_threshold", "json_type": "dict"}, "json_type: one of"),
    ({"dest": "gc_threshold", "not_json_type": 1}, "not_json_type: one of"),
    ({"dest": "gc_threshold", "keys_outside": "image"}, "keys_outside: takes a list"),
    ({"dest": "gc_threshold", "len_gt": "3"}, "len_gt: takes a number"),
])
def test_a_malformed_new_test_is_refused_naming_the_entry(pred, problem):
    with pytest.raises(ChecksTableError) as exc:
        compile_entry("sglang", entry(when=[pred], message="m"), 0)
    assert problem in str(exc.value) and str(exc.value).startswith("checks table entry sglang-test-entry:")
