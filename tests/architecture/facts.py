"""Second spellings of the facts ``gpustack_k3/api/v1alpha1/constants.py`` names once: engine names, the engines'
default ports and flag names (catalog data), units of memory and the CLI's exit codes. Read from the source (AST), so a
docstring, a comment or a rule id such as ``sglang-topology-unsupported`` is not a spelling. Pure: source in,
findings out (the test and a codemod use it alike)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from gpustack_k3.api.v1alpha1 import constants as api

DEFINING_MODULE = "gpustack_k3.api.v1alpha1.constants"
EXIT_CALLS = {"exit", "_exit", "SystemExit", "Exit"}      # sys.exit, ctx.exit, click's Exit, cli/main.py _exit
UNIT_VALUES = {api.MIB: "MIB", api.GIB: "GIB"}
UNIT_SHIFTS = {20: "MIB", 30: "GIB"}                       # n << 20 is n MiB


@dataclass(frozen=True)
class Spelling:
    line: int
    col: int
    end_col: int
    fact: str        # "engine name" | "engine port" | "engine flag" | "unit" | "exit code"
    text: str        # what is spelled
    use: str         # the constant to use instead


def engine_ports() -> dict[int, str]:
    """The engines' default ports, from the catalog (data: catalog/data/engines/<engine>.yaml default_port)."""
    from gpustack_k3.catalog import load_catalog

    return {e.default_port: f"catalog engines[{name!r}].default_port (Resolved.port)"
            for name, e in load_catalog().engines.items()}


def engine_flags() -> dict[str, str]:
    """The engine flags the catalog's flag tables map spec fields to (and each engine's model flag)."""
    from gpustack_k3.catalog import load_catalog

    out: dict[str, str] = {}
    for name, e in load_catalog().engines.items():
        out.setdefault(e.model_flag, f"catalog engines[{name!r}].model_flag")
        for f in e.flags:
            out.setdefault(f.flag, f"catalog engines[{name!r}].flags (field {f.field})")
    return out


def _click_options(tree: ast.AST) -> set[int]:
    """Constants in ``click.option(...)``/``click.argument(...)`` arguments: the CLI's own flags."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in ("option", "argument"):
                out.update(id(a) for a in node.args)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_literal_type(node: ast.Subscript) -> bool:
    v = node.value
    return (isinstance(v, ast.Name) and v.id == "Literal") or (isinstance(v, ast.Attribute) and v.attr == "Literal")


def _literal_type_members(tree: ast.AST) -> set[int]:
    """Constants inside ``Literal[...]``: the type system needs literal values (test_facts checks them apart)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_literal_type(node):
            out.update(id(c) for c in ast.walk(node.slice) if isinstance(c, ast.Constant))
    return out


def literal_engine_types(tree: ast.AST) -> list[tuple[int, list]]:
    """(line, values) of every ``Literal[...]`` that names an engine."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_literal_type(node):
            values = [c.value for c in ast.walk(node.slice) if isinstance(c, ast.Constant)]
            if set(values) & set(api.ENGINES):
                out.append((node.lineno, values))
    return out


def _int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _unit(node: ast.AST) -> str | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift) and _int(node.right) in UNIT_SHIFTS:
        return UNIT_SHIFTS[_int(node.right)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, exp = _int(node.left), _int(node.right)
        if base is not None and exp is not None and 0 <= exp <= 64:
            return UNIT_VALUES.get(base ** exp)
    if _int(node) in UNIT_VALUES:
        return UNIT_VALUES[_int(node)]
    return None


def _exit_codes() -> dict[int, str]:
    return {v: k for k, v in vars(api).items() if k.startswith("EXIT_")}


def spellings(source: str, ports: dict[int, str] | None = None, flags: dict[str, str] | None = None
              ) -> list[Spelling]:
    """Every second spelling of a fact in ``source``."""
    tree = ast.parse(source)
    ports = engine_ports() if ports is None else ports
    flags = engine_flags() if flags is None else flags
    skip = _docstrings(tree) | _literal_type_members(tree) | _click_options(tree)
    fstring_parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    codes = _exit_codes()
    out: list[Spelling] = []

    def add(node: ast.AST, fact: str, text: str, use: str) -> None:
        out.append(Spelling(node.lineno, node.col_offset, node.end_col_offset, fact, text, use))

    def exit_code(node: ast.AST) -> None:
        if _int(node) is not None:
            add(node, "exit code", str(node.value), f"api.{codes.get(node.value, 'EXIT_* (add it there)')}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip and id(node) not in fstring_parts:
            if isinstance(node.value, str) and node.value in api.ENGINES:
                add(node, "engine name", repr(node.value), f"api.ENGINE_{node.value.upper()} (or api.ENGINES)")
            elif isinstance(node.value, str) and node.value in flags:
                add(node, "engine flag", repr(node.value), flags[node.value])
            elif type(node.value) is int and node.value in ports:
                add(node, "engine port", str(node.value), ports[node.value])
        unit = _unit(node)
        if unit is not None and not (isinstance(node, ast.BinOp) and _unit(node.left)):
            add(node, "unit", ast.unparse(node), f"api.{unit}")
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in EXIT_CALLS and node.args:
                exit_code(node.args[0])
            for kw in node.keywords:
                if kw.arg == "exit_code":
                    exit_code(kw.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "exit_code":
                    exit_code(v)
        elif isinstance(node, ast.Assign):
            names = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for t, v in zip(names, values):
                if isinstance(t, ast.Name) and t.id.startswith("EXIT_"):
                    exit_code(v)
    return sorted(set(out), key=lambda s: (s.line, s.col))


def package_spellings(root: Path, modules: dict[str, Path]) -> dict[str, list[Spelling]]:
    """Repository-relative path -> its spellings, for every module but the defining one."""
    ports, flags = engine_ports(), engine_flags()
    out = {}
    for name, path in modules.items():
        if name == DEFINING_MODULE:
            continue
        found = spellings(path.read_text(encoding="utf-8"), ports, flags)
        if found:
            out[path.relative_to(root).as_posix()] = found
    return out
