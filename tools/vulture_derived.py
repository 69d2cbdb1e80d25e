"""The part of vulture's whitelist derived from the code and the catalog, not typed by hand (issue 35 item 5).

    python3 -m tools.vulture_derived      # print it (vulture's whitelist syntax, one group per comment)

tests/architecture/test_tools.py writes this text to a temporary file and passes it to vulture next to the
reviewed hand list (tools/vulture_whitelist.py). Each group names the mechanism that reads the names, so a
reviewer checks the rule once instead of hundreds of names; what no group derives must be reviewed by hand.
Vulture matches names, not owners: a derived name also covers an attribute of the same name elsewhere, so each
group takes only the names the mechanism really reads (a spec field only when a catalog table names it).

Groups (the functions below, in this order):
1. spec fields the engines' flag tables name (catalog/data/engines/*.yaml ``flags[].field``, every segment of
   the path): core/flags.py reads and writes them by path (``get_path``), never as attributes;
2. spec fields the catalog maps to an engine's JSON config keys (every ``*json_keys`` mapping of an engine's yaml,
   e.g. ``speculative.json_keys`` -> --speculative-config): core/flags.py reads them by name;
3. fields of the API's status models (gpustack_k3/api/v1alpha1/status.py): built by keyword by the operator,
   read by the API server, kubectl's printer columns and the CRD schema generated from them;
4. fields of the spec models the renderer copies whole into a Kubernetes object (``PASS_THROUGH``: each with the
   line that dumps it);
5. fields of dataclasses that serialize themselves whole (``asdict(self)``, ``vars(self)``, ``dict(self.__dict__)``:
   the ``-o json`` documents of plan, predict, run status), and of the dataclasses they hold: read by whoever
   reads the JSON.
"""
from __future__ import annotations

import ast
import dataclasses
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic import BaseModel

if __package__ in (None, ""):       # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpustack_k3"
ENGINES = PACKAGE / "catalog" / "data" / "engines"

# spec models dumped whole into a rendered Kubernetes object: (module, class) -> where it is dumped
PASS_THROUGH = {("gpustack_k3.api.v1alpha1.spec", "Toleration"):
                "gpustack_k3/render/kubernetes.py: t.model_dump(exclude_none=True) into the pod's tolerations"}


def _model_fields(model: type[BaseModel], seen: set[type] | None = None) -> Iterator[str]:
    """Every field name of ``model`` and of the models its fields hold (lists, dicts, unions), recursively."""
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        yield name
        for sub in _models_in(info.annotation):
            yield from _model_fields(sub, seen)


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _models_in(arg)
    origin = getattr(annotation, "__origin__", None)
    if origin is not None and getattr(annotation, "__metadata__", None) is not None:
        yield from _models_in(origin)


def _spec_fields() -> set[str]:
    from gpustack_k3.api.v1alpha1.spec import DeploymentSpec
    return set(_model_fields(DeploymentSpec))


def _engine_yamls() -> list[dict]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(ENGINES.glob("*.yaml"))]


def _json_key_maps(node: object) -> Iterator[dict]:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.endswith("json_keys") and isinstance(value, dict):
                yield value
            else:
                yield from _json_key_maps(value)
    elif isinstance(node, list):
        for item in node:
            yield from _json_key_maps(item)


def flag_table_fields() -> list[str]:
    """Group 1: spec field names (any path segment) the engines' flag tables name."""
    named = {seg for doc in _engine_yamls() for f in doc.get("flags", []) for seg in f["field"].split(".")}
    return sorted(named & _spec_fields())


def json_key_fields() -> list[str]:
    """Group 2: spec field names the engines' ``*json_keys`` mappings translate to engine config keys."""
    named = {k for doc in _engine_yamls() for m in _json_key_maps(doc) for k in m}
    return sorted(named & _spec_fields())


def status_fields() -> list[str]:
    """Group 3: every field of the models defined in api/v1alpha1/status.py."""
    from gpustack_k3.api.v1alpha1 import status
    models = [v for v in vars(status).values()
              if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == status.__name__]
    return sorted({name for m in models for name in m.model_fields})


def pass_through_fields() -> list[str]:
    """Group 4: fields of the spec models in PASS_THROUGH."""
    import importlib
    return sorted({n for (mod, cls) in PASS_THROUGH for n in getattr(importlib.import_module(mod), cls).model_fields})


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _dumps_self(cls: ast.ClassDef) -> bool:
    """The class serializes itself whole: ``asdict(self)``, ``vars(self)`` or ``dict(self.__dict__)``."""
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Call) and len(node.args) == 1):
            continue
        fn, arg = node.func, node.args[0]
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        if name in ("asdict", "vars") and _is_self(arg):
            return True
        if name == "dict" and isinstance(arg, ast.Attribute) and arg.attr == "__dict__" and _is_self(arg.value):
            return True
    return False


def serialized_dataclass_fields() -> dict[str, list[str]]:
    """Group 5: per class (module:Class), the fields of the package's dataclasses that serialize themselves whole
    (found in the source: ``_dumps_self``) and of the dataclasses their fields hold."""
    import importlib
    out: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and _dumps_self(n)):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            obj = getattr(importlib.import_module(module), cls.name)
            if dataclasses.is_dataclass(obj):
                _dataclass_fields(obj, out)
    return out


def _dataclass_fields(cls: type, out: dict[str, list[str]]) -> None:
    """``cls``'s fields into ``out``, and those of the dataclasses its fields hold (``asdict`` recurses)."""
    key = f"{cls.__module__}:{cls.__qualname__}"
    if key in out:
        return
    out[key] = sorted(f.name for f in dataclasses.fields(cls))
    for hint in typing.get_type_hints(cls).values():
        for sub in _types_in(hint):
            if dataclasses.is_dataclass(sub):
                _dataclass_fields(sub, out)


def _types_in(hint: object) -> Iterator[type]:
    if isinstance(hint, type):
        yield hint
    for arg in getattr(hint, "__args__", ()) or ():
        yield from _types_in(arg)


def whitelist() -> str:
    """The derived whitelist, in vulture's syntax."""
    lines = ['"""Derived by tools/vulture_derived.py; not a file of the repository."""', "_ = ...", ""]

    def group(title: str, names: list[str]) -> None:
        lines.append(f"# {title}")
        lines.extend(f"_.{n}" for n in names)
        lines.append("")

    group("1. spec fields named by the engines' flag tables (core/flags.py reads them by path)", flag_table_fields())
    group("2. spec fields mapped to engine JSON config keys by the catalog (*json_keys)", json_key_fields())
    group("3. status fields (api/v1alpha1/status.py): built by keyword, read by the API server", status_fields())
    group("4. spec models dumped whole into Kubernetes objects: " + "; ".join(PASS_THROUGH.values()),
          pass_through_fields())
    for where, names in serialized_dataclass_fields().items():
        group(f"5. {where}: serialized whole (its own to_dict, or held by one that is)", names)
    return "\n".join(lines)


if __name__ == "__main__":
    print(whitelist())
