"""manifests/examples is the one golden tree: every file must equal a fresh render (tools/examples.py).

Regenerate after an intended change and review the diff:  python3 tools/generate.py
"""
from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from tools import examples
from tools.generate import diff_tree

FRESH = examples.example_files()
REGENERATE = "python3 tools/generate.py"


def _show(path, want: str) -> str:
    have = path.read_text() if path.is_file() else ""
    return "".join(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                             f"committed {path.name}", "fresh render"))[:60])


@pytest.mark.parametrize("rel", sorted(FRESH))
def test_golden_file(rel):
    path = examples.EXAMPLES / rel
    assert path.is_file(), f"missing golden {rel}: run {REGENERATE}"
    assert path.read_text() == FRESH[rel], (
        f"{rel} changed; if intended, run {REGENERATE} and review the diff\n" + _show(path, FRESH[rel]))


def test_no_stale_golden_files():
    assert diff_tree(examples.EXAMPLES, FRESH) == [], f"run {REGENERATE}"


def test_golden_covers_every_case_and_target():
    from gpustack_k3.render.targets import TARGETS

    from gpustack_k3.core.topology import multi_pod

    have = {tuple(rel.split("/")[:2]) for rel in FRESH if rel.count("/") >= 2}
    # a multi-pod/P-D case: argv per role, one LWS per role and the DisaggregatedSet form, docker and gpustack
    # refusals (tools/examples.py topology_files)
    topology = ("launch", "argv", "kubernetes", "kubernetes-disaggregatedset", "docker", "gpustack")
    want = {(c, t) for c, doc in examples.cases().items()
            for t in (topology if multi_pod(doc) else (*TARGETS, "gpustack-worker"))}
    assert have == want


def test_regeneration_is_deterministic():
    assert examples.example_files() == FRESH


def test_generate_check_detects_drift_and_names_the_file(tmp_path, monkeypatch):
    """``tools/generate.py --check`` lists a changed and an extra file and exits 1 (examples only: the chart
    and install.yaml are checked by the helm tier)."""
    from tools import generate

    tree = tmp_path / "examples"
    monkeypatch.setattr(examples, "EXAMPLES", tree)
    files = {tree / rel: text for rel, text in FRESH.items()}
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert generate.stale(files) == ([], [])
    victim = next(p for p in files if p.name == "kubernetes.yaml")
    victim.write_text(victim.read_text().replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 7"))
    (tree / "extra.txt").write_text("x")
    changed, extra = generate.stale(files)
    assert changed == [victim] and extra == [tree / "extra.txt"]


def test_generate_refuses_unknown_arguments():
    proc = subprocess.run([sys.executable, "tools/generate.py", "--frobnicate"], capture_output=True, text=True,
                          cwd=examples.REPO, timeout=120)
    assert proc.returncode == 2 and "usage" in proc.stderr
