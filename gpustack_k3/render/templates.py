"""Output plumbing shared by the targets: canonical JSON/YAML serialisation of the data the renderers build,
and one Jinja2 environment for the text targets that are shell scripts (``templates/``).

JSON and YAML targets are serialised from data (never a text template parsed back). Shell templates use
StrictUndefined (a missing value is an error, never an empty string), autoescape off, and insert values only
through filters that encode them: ``sh`` (``shlex.quote``) and ``json``. jinja2 is imported lazily so the
CLI starts fast.
"""
from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from typing import Any

from gpustack_k3.errors import RefusedError

# gpustack_k3/templates (shipped in the wheel); the repository's top-level templates/ is a link to it.
TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


class RenderError(RefusedError):
    """A target could not be produced from a launch spec (a field it cannot express, a template or validation
    failure): the document is refused for that target (exit 1, gpustack_k3/errors.py).

    ``where`` names the target/object/field, ``message`` what is wrong, ``hint`` the way out."""

    error_kind = "render"

    def __init__(self, where: str, message: str, hint: str = "") -> None:
        self.where, self.hint = where, hint
        super().__init__(message)


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@functools.lru_cache(maxsize=1)
def environment():
    import jinja2

    if not TEMPLATES_DIR.is_dir():
        raise RenderError("templates", f"template folder {TEMPLATES_DIR} is missing",
                          "run from a source checkout that has templates/ next to gpustack_k3/")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["json"] = to_json
    env.filters["sh"] = shlex.quote
    return env


def render_template(template: str, /, **context: Any) -> str:
    import jinja2

    try:
        return environment().get_template(template).render(**context)
    except jinja2.TemplateNotFound:
        raise RenderError(f"templates/{template}", "template not found", "restore it from the repository") from None
    except jinja2.UndefinedError as exc:
        raise RenderError(f"templates/{template}", f"undefined value: {exc.message}",
                          "the template uses a field the launch spec does not have") from None
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(f"templates/{template}:{exc.lineno}", f"template syntax error: {exc.message}") from None


def _yaml_dumper():
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):   # no anchors/aliases: a value used twice is written out twice
            return True

    def _str(dumper, value: str):
        # Multi-line strings (e.g. a value with newlines in env or a GPUStack document) as literal blocks, readable in diffs.
        style = "|" if "\n" in value and value == value.rstrip(" ") and "\r" not in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return _Dumper


def dump_yaml_documents(docs: list[dict]) -> str:
    """Canonical multi-document YAML (block style, key order kept, no line wrapping)."""
    import yaml

    dumper = _yaml_dumper()
    return "".join("---\n" + yaml.dump(d, Dumper=dumper, sort_keys=False, width=float("inf"), allow_unicode=True)
                   for d in docs)


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
