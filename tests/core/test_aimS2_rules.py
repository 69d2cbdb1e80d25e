"""The rule of gpustack_k3/core/rules/sglang_checks_aimS2.py: an inline --watermark-config whose fields SGLang's
check_watermark_server_args refuses (key_b without key, mixing probability out of (0, 1) or not 0.5 without key_b,
max probability out of (0, 1], default_enabled / enforce_all without key), on 0.5.22 and 0.5.23; nothing for a
consistent config, a file path, or without --enable-watermark (the table's sglang-watermark-config-needs-watermark
refuses that). tests/engine_oracle/test_aimS2_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.sglang_checks_aimS2 import inline_watermark_config, watermark_refusal
from tests.core.test_smiss5_rules import product

RID = "sglang-watermark-config-fields"
AIMS2_DIRECT = {RID}
K3 = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8", "--enable-watermark"]


def wm(cfg: str) -> list[str]:
    return K3 + ["--watermark-config", cfg]


# (release, refused line, the nearest accepted line, the release's message)
CASES = [
    (rel, bad, good, msg)
    for rel in ("0.5.22", "0.5.23")
    for bad, good, msg in (
        (wm('{"key_b": "abc"}'), wm('{"key": "123", "key_b": "abc"}'), "watermark key_b requires a server key"),
        (wm('{"key": "123", "key_b": "abc", "mixing_probability": 1.5}'),
         wm('{"key": "123", "key_b": "abc", "mixing_probability": 0.7}'),
         "watermark mixing_probability must be strictly between 0 and 1"),
        (wm('{"key": "123", "mixing_probability": 0.3}'), wm('{"key": "123", "mixing_probability": 0.5}'),
         "watermark mixing_probability requires key_b"),
        (wm('{"key": "123", "max_probability": 0}'), wm('{"key": "123", "max_probability": 1}'),
         "watermark max_probability must be greater than 0 and at most 1"),
        (wm('{"default_enabled": true}'), wm('{"key": "123", "default_enabled": true}'),
         "watermark default_enabled and enforce_all require a server key"),
        (wm('{"enforce_all": true, "key_b": null}'), wm('{"enforce_all": false}'),
         "watermark default_enabled and enforce_all require a server key"),
    )
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]
# lines the rule leaves: a file path (the release reads the file), the defaults
LEFT = [K3 + ["--watermark-config", "/etc/aimS2-watermark.json"], K3]


def test_the_rule_names_both_releases():
    assert set(RULES[RID].sources) == {"sglang 0.5.22", "sglang 0.5.23"}


@pytest.mark.parametrize("release,bad,good,msg", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_the_nearest(release, bad, good, msg):
    mine = product(release, bad)
    assert mine["verdict"] == "refuse" and RID in mine["rules"], mine
    got = product(release, good)
    assert got["verdict"] == "pass", got


@pytest.mark.parametrize("release,bad,good,msg", CASES, ids=IDS)
def test_the_message_is_the_releases(release, bad, good, msg):
    assert watermark_refusal(inline_watermark_config(bad[-1])) == msg


@pytest.mark.parametrize("line", LEFT)
def test_the_rule_leaves_a_path_and_the_defaults(line):
    assert RID not in product("0.5.23", line)["rules"]


def test_not_a_json_object_is_left_to_the_release():
    assert inline_watermark_config("[1]") is None and inline_watermark_config("{not json") is None
    assert watermark_refusal({"key_b": "abc", "mixing_probability": "x"}) is None
