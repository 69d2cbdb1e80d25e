"""SGLang's model-config parser registry (helper miss8): ``--model-config-parser NAME`` is looked up in a registry
that the release fills with "hf" and "mistral" ("auto" picks one of them) and that plugins extend.

get_config resolves "auto" and calls get_model_config_parser, which refuses a name outside the registry: "Unknown
model-config parser '1'. Registered: ['hf', 'mistral']". The registry is a plugin point: ``sglang serve`` /
``python -m sglang.launch_server`` runs ``load_plugins()`` before it reads the arguments, which executes every
general plugin an installed package declares under the entry-point group "sglang.srt.plugins", and a plugin may call
``@register_model_config_parser(name)``. Which packages the image holds (a derived image may add one) is not known
to gpustack-k3, so another name is a warning naming the built-in ones, never a refusal.
tests/core/test_miss8_rules.py and tests/engine_oracle/test_miss8_oracle.py judge the lines.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

_PARSER_SOURCES = {
    "0.5.23": "sglang srt/configs/model_config_parser_registry.py:35-60@0.5.23, "
              "srt/utils/hf_transformers/config.py:215,320,373-377@0.5.23, srt/plugins/__init__.py:29,103-137@0.5.23, "
              "launch_server.py:79@0.5.23",
    "0.5.22": "sglang srt/configs/model_config_parser_registry.py:35-60@0.5.22, "
              "srt/utils/hf_transformers/config.py:210,315,368-372@0.5.22, srt/plugins/__init__.py:29,103@0.5.22, "
              "launch_server.py:79@0.5.22",
}
BUILT_IN_PARSERS = ("hf", "mistral")   # @register_model_config_parser in srt/utils/hf_transformers/config.py


def unregistered_parser(r) -> str | None:
    """The line's --model-config-parser when it names no parser the release registers itself ("auto" resolves to
    one of them), else None."""
    v = line_view(r)
    if v is None or not v.given("model_config_parser"):
        return None
    name = v.value("model_config_parser")
    if not isinstance(name, str) or name == "auto" or name in BUILT_IN_PARSERS:
        return None
    return name


@rule("sglang-model-config-parser-unregistered", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--model-config-parser names a parser the release does not register itself",
      why="SGLang looks --model-config-parser up in its parser registry, which holds hf and mistral (auto picks one); "
          "a plugin installed in the image (entry-point group sglang.srt.plugins, run before the arguments are read) "
          "can register more, so another name starts only where such a plugin registers it.",
      fix="Give --model-config-parser auto, hf or mistral, or install the plugin that registers the parser in the "
          "engine image.",
      source=_PARSER_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _PARSER_SOURCES.items()})
def check_sglang_model_config_parser(r, c):
    name = unregistered_parser(r)
    if name is None:
        return
    found = extra_arg(r, "--model-config-parser")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"--model-config-parser {name!r}: SGLang {r.version.key} registers {list(BUILT_IN_PARSERS)} (and resolves "
        "'auto' to one of them); it refuses 'Unknown model-config parser' unless a plugin in the image registers "
        f"{name!r}, which gpustack-k3 cannot see")


# applies to the releases its sources name (registry.ReleaseRule)
RULES["sglang-model-config-parser-unregistered"] = ReleaseRule.of(RULES["sglang-model-config-parser-unregistered"])
