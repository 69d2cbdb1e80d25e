"""Every import of the package, read from the source (module level, inside functions, inside classes;
``if TYPE_CHECKING:`` blocks are left out: they never run). Pure: file text in, graph out."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = "gpustack_k3"
ROOT = Path(__file__).resolve().parents[2] / PKG
# Code shipped in the package that runs in another interpreter: an engine release's (the engine oracle's worker,
# doubles and import stubs). It uses the standard library and the release only, never gpustack_k3, so the package's
# rules on imports, facts and API names do not apply to it (tests/architecture/test_architecture.py checks that it
# imports nothing of the package).
FOREIGN = (ROOT / "oracle" / "engine_side",)


def foreign(p: Path) -> bool:
    return any(f in p.parents for f in FOREIGN)


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        if foreign(p):
            continue
        rel = p.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """(module, names, level, lineno) of every import that can run."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    yield a.name, [], 0, child.lineno
            elif isinstance(child, ast.ImportFrom):
                yield child.module or "", [a.name for a in child.names], child.level, child.lineno
            stack.append(child)


def graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {imported package module: first line}. ``from a import b`` counts as an import of ``a.b``
    when that is a module, else of ``a``."""
    mods = modules(root)
    out: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        edges: dict[str, int] = {}
        for mod, names, level, line in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (level - 1)]
                mod = ".".join(base + ([mod] if mod else []))
            if not (mod == PKG or mod.startswith(PKG + ".")):
                continue
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in mods else mod for n in names] or [mod]
            for t in targets:
                if t in mods and t != name:
                    edges.setdefault(t, line)
        out[name] = edges
    return out


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out
