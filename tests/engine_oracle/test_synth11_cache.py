"""tools/engine_oracle/synth.py's per-process caches (h-synth11): a release's analysis (raise sites, parsed validation
files, knobs) is built once per key (the release, its unpacked directory, the stamps of its validation files and of
the parser dump, plus the stamps of the modules those files import) and each Synth gets the same values in containers
of its own; the knobs module's tables are set as a fresh analysis sets them; a changed file is analysed again; and
bench/oracle_differential.py ``runtime_only_rules`` comes from one module per process. On a made-up release tree,
as tests/engine_oracle/test_synth_cov.py builds it (no wheel needed)."""
from __future__ import annotations

import os
import sys
import types

import pytest

from tools.engine_oracle import knobs as K
from tools.engine_oracle import synth

CONFIG = '''\
from dataclasses import dataclass
from typing import Literal

from vllm.consts import ALLOWED_BACKENDS


@dataclass
class ProfilerConfig:
    profiler: Literal["torch", "proton"] | None = None
    proton_profiler_dir: str | None = None
    backend: str | None = None

    @property
    def uses_proton(self):
        return self.profiler == "proton"

    def __post_init__(self):
        if self.profiler == "proton" and not self.proton_profiler_dir:
            raise ValueError("proton_profiler_dir must be set when profiler is proton")
        if self.backend not in ALLOWED_BACKENDS:
            raise ValueError("backend refused")
'''
CONSTS = 'ALLOWED_BACKENDS = ("torch", "guidance")\n'
OPTS = [{"dest": "tensor_parallel_size", "flags": ["--tensor-parallel-size", "-tp"], "action": "store", "type": "int"},
        {"dest": "profiler_config", "flags": ["--profiler-config"], "action": "store",
         "type": {"return_type": "json", "cls": "ProfilerConfig"}}]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A release tree and a counter of the analyses built (raise_sites runs once per analysis)."""
    root = tmp_path / "rel"
    (root / "vllm" / "config").mkdir(parents=True)
    (root / "vllm" / "config" / "profiler.py").write_text(CONFIG)
    (root / "vllm" / "consts.py").write_text(CONSTS)
    built = []
    real = synth.raise_sites
    monkeypatch.setattr(synth, "_root", lambda release: root)
    monkeypatch.setattr(synth, "validation_files",
                        lambda release, r=None: sorted((root / "vllm" / "config").glob("*.py")))
    monkeypatch.setattr(synth, "parser_options", lambda release: OPTS)
    monkeypatch.setattr(synth, "raise_sites", lambda files: built.append(1) or real(files))
    return root, built, tmp_path


def _analysis(sy) -> dict:
    """What the analysis gives a Synth, comparable across two of them (AST nodes by their dump)."""
    import ast

    def norm(v):
        if isinstance(v, ast.AST):
            return ast.dump(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        return v
    out = {a: norm(getattr(sy, a)) for a in synth._ANALYSIS_ATTRS if a != "index"}
    out["index"] = sorted(sy.index.funcs)
    out["tables"] = {t: norm(dict(getattr(K, t))) for t in synth._KNOB_TABLES}
    return out


def _touch(path, text):
    """Rewrite ``path`` with ``text`` and move its mtime on, so the stamp differs even within one clock tick."""
    st = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_a_second_synth_of_the_same_files_gets_the_first_ones_analysis(tree):
    root, built, tmp = tree
    a = synth.Synth("vllm-0.33.0", 7, tmp / "a")
    first = _analysis(a)
    assert built == [1] and K.CONSTANTS["ALLOWED_BACKENDS"] == ["torch", "guidance"]
    assert any("backend refused" in s["raises"] for s in a.sites)
    # another Synth's analysis (or a test) changes the knobs tables meanwhile: the cached one sets them again
    K.CONSTANTS.clear()
    K.FIELD_OWNERS["x"] = "y"
    b = synth.Synth("vllm-0.33.0", 8, tmp / "b")
    assert built == [1], "the analysis was built again for unchanged files"
    assert _analysis(b) == first


def test_a_synth_changing_its_analysis_leaves_the_next_ones_alone(tree):
    root, built, tmp = tree
    a = synth.Synth("vllm-0.33.0", 7, tmp / "a")
    first = _analysis(a)
    a.sites[0]["line"] = -1
    a.sites.append({"file": "x.py", "line": 1})
    a.fields.setdefault("ProfilerConfig", {})["extra"] = None
    a.defaults.clear()
    a.compared.clear()
    a.site_at["x.py:1"] = 99
    a.trees.clear()
    b = synth.Synth("vllm-0.33.0", 7, tmp / "b")
    assert built == [1] and _analysis(b) == first


def test_a_changed_validation_file_is_analysed_again(tree):
    root, built, tmp = tree
    synth.Synth("vllm-0.33.0", 7, tmp / "a")
    f = root / "vllm" / "config" / "profiler.py"
    _touch(f, CONFIG.replace("backend refused", "backend is refused here"))
    b = synth.Synth("vllm-0.33.0", 7, tmp / "b")
    assert built == [1, 1]
    assert any("backend is refused here" in s["raises"] for s in b.sites)


def test_a_changed_imported_module_is_analysed_again(tree):
    root, built, tmp = tree
    synth.Synth("vllm-0.33.0", 7, tmp / "a")
    _touch(root / "vllm" / "consts.py", 'ALLOWED_BACKENDS = ("torch", "xgrammar", "outlines")\n')
    synth.Synth("vllm-0.33.0", 7, tmp / "b")
    assert built == [1, 1] and K.CONSTANTS["ALLOWED_BACKENDS"] == ["torch", "xgrammar", "outlines"]
    # a module the files import that appears (vllm/consts/__init__.py next to vllm/consts.py) is a change too
    (root / "vllm" / "consts").mkdir()
    (root / "vllm" / "consts" / "__init__.py").write_text(CONSTS)
    synth.Synth("vllm-0.33.0", 7, tmp / "c")
    assert built == [1, 1, 1]


def test_another_release_tree_is_another_analysis(tree, tmp_path, monkeypatch):
    root, built, tmp = tree
    synth.Synth("vllm-0.33.0", 7, tmp / "a")
    synth.Synth("vllm-0.34.0", 7, tmp / "b")   # the same files under another release's name
    assert built == [1, 1]


def test_runtime_only_rules_come_from_one_module_per_process(monkeypatch):
    calls = []
    mod = types.SimpleNamespace(runtime_only_rules=lambda: calls.append(1) or {"memory-rule"})
    monkeypatch.setitem(sys.modules, "_oracle_differential", mod)
    got = synth._runtime_only_rules()
    assert got == {"memory-rule"} and calls == [1]
    got.add("changed")   # the caller's copy: the module's own answer stays
    assert synth._runtime_only_rules() == {"memory-rule"}
