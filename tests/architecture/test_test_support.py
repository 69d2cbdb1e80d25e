"""Tests have one home for waiting, ports and clocks (tests/support) and do not edit ``sys.path``: pytest's
``pythonpath = ["."]`` makes ``tests``, ``tools`` and ``e2e`` importable, and a subprocess gets PYTHONPATH or the
installed package. Read from the source (AST)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"
OWN_HELPERS = {"wait_for", "free_port", "consistently", "wait_idle"}   # defined in tests/support only

# Test modules another branch owns this session; /work/wt/patches/h-design25-syspath.diff imports them as
# e2e.kind.<module>. Whoever applies the diff empties this set.
PENDING_SYS_PATH: set[str] = set()


def _test_sources() -> list[Path]:
    return [p for root in ("tests", "e2e") for p in sorted((REPO / root).rglob("*.py"))]


def sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that change ``sys.path`` (insert/append/extend/remove, or an assignment to it or an item of it)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_sys_path(node.func.value) \
                and node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear"):
            out.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if _is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)):
                    out.append(node.lineno)
    return sorted(out)


def _is_sys_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
        and node.value.id == "sys"


def test_no_test_edits_sys_path():
    bad = []
    for p in _test_sources():
        rel = p.relative_to(REPO).as_posix()
        lines = sys_path_edits(ast.parse(p.read_text(encoding="utf-8")))
        if lines and rel not in PENDING_SYS_PATH:
            bad += [f"{rel}:{n}" for n in lines]
        elif not lines and rel in PENDING_SYS_PATH:
            bad.append(f"{rel}: no sys.path edit left: remove it from PENDING_SYS_PATH")
    assert bad == []


def test_waiting_and_ports_live_in_tests_support():
    bad = []
    for p in _test_sources():
        if SUPPORT in p.parents:
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OWN_HELPERS \
                    and not _delegates_to_support(node):
                bad.append(f"{p.relative_to(REPO)}:{node.lineno} defines {node.name}: use tests/support")
    assert bad == []


def _delegates_to_support(fn: ast.FunctionDef) -> bool:
    """A pytest fixture of the same name whose body is one ``return ports.free_port()``-like call is a use."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call)
            and isinstance(body[0].value.func, ast.Attribute) and body[0].value.func.attr == fn.name)


def test_the_checks_see_a_sys_path_edit_and_a_copy():
    src = "import sys\nsys.path.insert(0, 'x')\nsys.path[0:0] = ['y']\nsys.path += ['z']\n"
    assert sys_path_edits(ast.parse(src)) == [2, 3, 4]
    fn = ast.parse("def free_port():\n    return ports.free_port()\n").body[0]
    copy = ast.parse("def free_port():\n    with socket.socket() as s:\n        return 1\n").body[0]
    assert _delegates_to_support(fn) and not _delegates_to_support(copy)
