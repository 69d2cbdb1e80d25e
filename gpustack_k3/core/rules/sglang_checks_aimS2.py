"""SGLang refusals over the fields of an inline --watermark-config (helper aimS2, issue 31), beyond what the
engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml) can express: the option is a string the release
itself parses as JSON (sampling/watermarking/config.py load_watermark_config), so a table entry's ``key:`` cannot
reach its fields.

handle_watermark_config (serving_hook.py) declares each field the JSON gives as ``watermark_<field>``, a field left
out or null keeping the server default (key and key_b None, mixing_probability 0.5, max_probability 1.0,
default_enabled and enforce_all False); check_watermark_server_args (validation_hook.py) then refuses, in this
order, key_b without key, a mixing probability outside (0, 1), a mixing probability other than 0.5 without key_b,
a max probability outside (0, 1], and default_enabled / enforce_all without key. The rule reads only an inline JSON
object (a path to a file is left to the release) and only numbers the release's loader accepts as numbers (anything
else the loader refuses itself, before these checks). Verified against both releases by
tests/engine_oracle/test_aimS2_rules_oracle.py (unit lines: tests/core/test_aimS2_rules.py)."""
from __future__ import annotations

import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/serving_hook.py:33-44@0.5.23, "
              "sglang/srt/arg_groups/validation_hook.py:39-40,56-73@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/serving_hook.py:33-44@0.5.22, "
              "sglang/srt/arg_groups/validation_hook.py:38-39,55-72@0.5.22",
}
_DEFAULTS = {"key": None, "key_b": None, "mixing_probability": 0.5, "max_probability": 1.0,
             "default_enabled": False, "enforce_all": False}


def inline_watermark_config(value: Any) -> dict | None:
    """The fields an inline --watermark-config gives (null fields dropped: the release keeps the default), or None
    for no option, a file path, or text that is not a JSON object (the release's loader refuses that itself)."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return None
    try:
        raw = json.loads(value)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    return {k: v for k, v in raw.items() if v is not None}


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def watermark_refusal(cfg: dict) -> str | None:
    """The release's first refusal among check_watermark_server_args' field checks for these fields, or None."""
    w = {**_DEFAULTS, **cfg}
    mix, top = w["mixing_probability"], w["max_probability"]
    if not (_number(mix) and _number(top)):
        return None
    if w["key_b"] is not None and w["key"] is None:
        return "watermark key_b requires a server key"
    if not 0 < mix < 1:
        return "watermark mixing_probability must be strictly between 0 and 1"
    if w["key_b"] is None and mix != 0.5:
        return "watermark mixing_probability requires key_b"
    if not 0 < top <= 1:
        return "watermark max_probability must be greater than 0 and at most 1"
    if (w["default_enabled"] or w["enforce_all"]) and w["key"] is None:
        return "watermark default_enabled and enforce_all require a server key"
    return None


@rule("sglang-watermark-config-fields", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="An inline --watermark-config whose fields SGLang refuses together",
      why="With --enable-watermark SGLang reads --watermark-config's fields into the server's watermark settings "
          "and refuses a second key (key_b) without a server key, a mixing probability outside (0, 1) or other "
          "than 0.5 without key_b, a max probability outside (0, 1], and default_enabled / enforce_all without a "
          "server key.",
      fix="Give the watermark key (\"key\") the other fields need, or drop those fields from --watermark-config.",
      source=_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_watermark_config_fields(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_watermark"):
        return
    cfg = inline_watermark_config(v.value("watermark_config"))
    if cfg is None:
        return
    msg = watermark_refusal(cfg)
    if msg is not None:
        yield "spec.extraArgs", f"{msg} (--watermark-config {json.dumps(cfg, sort_keys=True)})"


# applies to the releases its sources name (registry.ReleaseRule)
RULES["sglang-watermark-config-fields"] = ReleaseRule.of(RULES["sglang-watermark-config-fields"])
