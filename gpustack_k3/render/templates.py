"""Jinja2 plumbing shared by every target: one environment over the repo-root ``templates/`` folder.

StrictUndefined (a missing value is an error, never an empty string), autoescape off (we emit YAML,
JSON and shell, not HTML). Values are inserted through filters that encode them for the output
language, never by bare interpolation:

* ``json``  - JSON encoding; valid inside YAML too (YAML flow style is a JSON superset), so every
  scalar and every nested structure in a YAML template goes through it;
* ``sh``    - ``shlex.quote`` for shell lines.

Rendered text is parsed back (``yaml.safe_load_all`` / ``json.loads``) by the callers and validated
before anything is written. jinja2 is imported lazily so the CLI starts fast.
"""
from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from typing import Any

# gpustack_k3/templates (shipped in the wheel); the repository's top-level templates/ is a link to it.
TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


class RenderError(Exception):
    """A target could not be produced from a launch spec (a template or validation failure).

    ``where`` names the target/object/field, ``message`` what is wrong, ``hint`` the way out."""

    def __init__(self, where: str, message: str, hint: str = "") -> None:
        self.where, self.message, self.hint = where, message, hint
        super().__init__(self.line())

    def line(self) -> str:
        out = f"{self.where}: {self.message}"
        return f"{out} ({self.hint})" if self.hint else out


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


def parse_yaml_documents(text: str, where: str) -> list[dict]:
    """Parse rendered YAML back; every document must be a mapping."""
    import yaml

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml: the operator renders on every change
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        raise RenderError(where, f"rendered YAML does not parse: {str(exc).splitlines()[0]}",
                          "a template or value broke the YAML; please report") from None
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise RenderError(f"{where}[{i}]", f"rendered document is a {type(d).__name__}, not a mapping")
    return docs


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RenderError(where, f"rendered JSON does not parse: {exc}", "a template broke the JSON; please report") from None


def _yaml_dumper():
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

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
