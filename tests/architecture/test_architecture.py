"""The package's shape: no import cycles, imports of our own modules stay at module level except at the command
boundary, and the API's names are spelled only in api/. (Lower layers never import higher ones: .importlinter,
checked by test_tools.py.)"""
from __future__ import annotations

import ast
import typing

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import RolloutStatus
from tests.architecture.imports import ROOT, _imports, cycles, graph, modules

GRAPH = graph()

# The layers and the independence of sibling subsystems are import-linter's contracts (.importlinter, run by
# tests/architecture/test_tools.py; TYPE_CHECKING imports count). A new subpackage must be placed there
# (the contract is exhaustive).


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _command_boundary(module: str) -> bool:
    """Click commands: the CLI package (every command module lives there) and ``__main__``."""
    return _layer(module) in ("cli", "__main__")


def test_graph_is_read():
    assert len(GRAPH) > 50 and "gpustack_k3.core.rules" in GRAPH["gpustack_k3.core.launch"]


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert found == [], "import cycles (module -> imported:line): " + "; ".join(
        " / ".join(f"{m} -> {', '.join(f'{t}:{GRAPH[m][t]}' for t in GRAPH[m] if t in c)}" for m in c) for c in found)


def test_click_commands_live_in_the_cli_package():
    """Every click command and group is defined under ``gpustack_k3.cli`` (a ``*_cmd`` module): no subsystem
    keeps a command module of its own."""
    bad = []
    for name, path in modules().items():
        if _command_boundary(name):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for dec in getattr(node, "decorator_list", ()):
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Attribute) and target.attr in ("command", "group"):
                    bad.append(f"{path.relative_to(ROOT.parent)}:{dec.lineno}")
    assert bad == []


# Libraries whose private names (a leading underscore) the package must not use: their public API only.
PUBLIC_ONLY = ("pydantic", "pydantic_core", "click", "argparse")
# Attributes pydantic sets on a model class for its own build (no public contract to read or set them).
PYDANTIC_CLASS_INTERNALS = {"__pydantic_validator__", "__pydantic_serializer__", "__pydantic_core_schema__",
                            "__pydantic_complete__", "__pydantic_on_complete__", "__pydantic_decorators__"}


def test_no_pickle_and_no_private_names_of_pydantic_click_or_argparse():
    """Start-up without private APIs or pickles: no module imports pickle (a cache holds plain data), reaches
    a private name of pydantic/click/argparse, reads or sets pydantic's build attributes on a class, or puts a
    module of its own making into ``sys.modules``."""
    bad = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT.parent)
        aliases = {}   # local name -> library module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in ("pickle", "cloudpickle", "dill", "marshal"):
                        bad.append(f"{where}:{node.lineno} imports {a.name}")
                    if a.name.split(".")[0] in PUBLIC_ONLY:
                        if any(part.startswith("_") for part in a.name.split(".")):
                            bad.append(f"{where}:{node.lineno} imports {a.name}")
                        aliases[a.asname or a.name.split(".")[0]] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                root = node.module.split(".")[0]
                if root in ("pickle", "cloudpickle", "dill", "marshal"):
                    bad.append(f"{where}:{node.lineno} imports {node.module}")
                if root in PUBLIC_ONLY:
                    private = [p for p in node.module.split(".") if p.startswith("_")]
                    private += [a.name for a in node.names if a.name.startswith("_")]
                    if private:
                        bad.append(f"{where}:{node.lineno} imports {node.module}: {private}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if node.attr in PYDANTIC_CLASS_INTERNALS:
                    bad.append(f"{where}:{node.lineno} uses {node.attr}")
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if (isinstance(base, ast.Name) and base.id in aliases and node.attr.startswith("_")
                        and not node.attr.startswith("__")):
                    bad.append(f"{where}:{node.lineno} uses {base.id}...{node.attr}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                  and str(node.args[1].value).startswith("_")):   # getattr(click.parser, "_OptionParser")
                base = node.args[0]
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in aliases:
                    bad.append(f"{where}:{node.lineno} uses getattr({base.id}..., {node.args[1].value!r})")
            elif isinstance(node, ast.Subscript):   # sys.modules[...] = ...
                v = node.value
                if (isinstance(node.ctx, ast.Store) and isinstance(v, ast.Attribute) and v.attr == "modules"
                        and isinstance(v.value, ast.Name) and v.value.id == "sys"):
                    bad.append(f"{where}:{node.lineno} sets sys.modules[...]")
    assert bad == []


def test_own_modules_are_imported_at_module_level():
    """Lazy imports only where the CLI start-up budget needs them: command modules, and package ``__init__``
    re-exports. Anywhere else a function-level import of our own code hides a cycle or a cost."""
    bad = []
    for name, path in modules().items():
        if _command_boundary(name) or path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for mod, _names, level, line in _imports(fn):
                if level or mod == "gpustack_k3" or mod.startswith("gpustack_k3."):
                    bad.append(f"{path.relative_to(ROOT.parent)}:{line} ({fn.name})")
    assert bad == []


# Constants whose value is also a word of another vocabulary, so a literal elsewhere is not a restatement:
NOT_API_ONLY = {
    "PRODUCT": "the product's name: distribution, CLI program and cache directory names",
    "FIELD_MANAGER": "= PRODUCT",
    "CATEGORIES": "'gpustack' is also a render target and a CLI group",
    "LWS_ENV_LEADER_ADDRESS": "also a per-pod variable name the argument rules know (core/rules/args.py)",
    "LWS_ENV_GROUP_SIZE": "an environment variable name of LWS pods, as above",
    "LWS_ENV_WORKER_INDEX": "also a per-pod variable name the argument rules know (core/rules/args.py)",
    "ENGINE_VLLM": "an engine name: tests/architecture/test_facts.py holds it to one spelling, with its exceptions",
    "ENGINE_SGLANG": "as ENGINE_VLLM",
    "ENGINES": "as ENGINE_VLLM",
}
# Values of Kubernetes' own core/v1 vocabulary that podstate reads from pods (pod phase Failed, pod condition
# Ready, PodScheduled reason Unschedulable): they equal some of our names by coincidence.
CORE_V1_WORDS = {"Failed", "Ready", "Unschedulable"}
# The phases of a P/D rollout (status.rollout.phase: Idle, Starting, Draining, Failed), a vocabulary of its own
# declared by the status model's Literal and compared by operator/rollout.py: "Starting" equals a deployment phase.
ROLLOUT_PHASES = set(typing.get_args(RolloutStatus.model_fields["phase"].annotation))


def _api_names() -> dict[str, str]:
    """Every string the API defines (group, version, kind, plural, short names, label and annotation keys,
    phases, condition types and reasons) -> its constant's name."""
    out: dict[str, str] = {}
    for k, v in vars(api).items():
        if not k.isupper() or k in NOT_API_ONLY:
            continue
        for s in ([v] if isinstance(v, str) else list(v) if isinstance(v, (tuple, frozenset, set)) else []):
            if isinstance(s, str) and s not in CORE_V1_WORDS | ROLLOUT_PHASES:
                out.setdefault(s, k)
    return out


def test_api_names_are_spelled_only_in_api():
    names = _api_names()
    assert {"k3.gpustack.ai", "K3Deployment", "k3deployments", "WeightsLoaded", "k3.gpustack.ai/deployment"} <= set(names)
    bad = []
    for name, path in modules().items():
        if _layer(name) == "api":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names \
                    and not _docstring(node, path):
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r} is api.{names[node.value]}")
    assert bad == []


def _docstring(node: ast.Constant, path) -> bool:
    return "\n" in node.value


@pytest.mark.parametrize("prefix", ["gpustack-k3/"])
def test_one_prefix_for_our_label_and_annotation_keys(prefix):
    """Keys are ``k3.gpustack.ai/...`` (api.PREFIX); the old ``gpustack-k3/`` prefix is gone from the product."""
    bad = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefix):
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r}")
    templates = [p for p in (ROOT / "templates").rglob("*") if p.is_file() and prefix in p.read_text(encoding="utf-8")]
    assert bad == [] and templates == []


def test_the_reader_sees_function_level_relative_and_type_checking_imports(tmp_path):
    """The checks above can fail: a synthetic package with a cycle hidden inside a function."""
    pkg = tmp_path / "gpustack_k3"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from gpustack_k3.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n")
    g = graph(pkg)
    assert g["gpustack_k3.sub.b"] == {"gpustack_k3.sub.a": 2} and g["gpustack_k3.sub.c"] == {}
    assert cycles(g) == [["gpustack_k3.sub.a", "gpustack_k3.sub.b"]]


def test_foreign_code_imports_nothing_of_the_package():
    """What runs in an engine release's interpreter (imports.FOREIGN, left out of the checks above) uses the standard
    library and the release only: a gpustack_k3 import there would fail in that interpreter."""
    from tests.architecture.imports import FOREIGN
    files = [p for d in FOREIGN for p in sorted(d.rglob("*.py"))]
    assert files, FOREIGN
    bad = [f"{p.relative_to(ROOT.parent)}:{line}: {mod}" for p in files
           for mod, _names, level, line in _imports(ast.parse(p.read_text(encoding="utf-8")))
           if level or mod == "gpustack_k3" or mod.startswith("gpustack_k3.")]
    assert bad == []
