"""Golden files (preset/spec x target) and the committed manifests/examples must equal a fresh render.

Regenerate after an intended change and review the diff:
    python3 -m gpustack_k3.render.golden      # tests/render/golden
    python3 -m gpustack_k3.cli.main manifests # manifests/examples (or: gpustack-k3 manifests)
"""
from __future__ import annotations

import difflib

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.render_cmd import diff_tree
from gpustack_k3.render.golden import GOLDEN, golden_files
from tests.render.conftest import REPO

FRESH = golden_files()


def _show(path, want: str) -> str:
    have = path.read_text() if path.is_file() else ""
    return "".join(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                             f"committed {path.name}", "fresh render"))[:60])


@pytest.mark.parametrize("rel", sorted(FRESH))
def test_golden_file(rel):
    path = GOLDEN / rel
    assert path.is_file(), f"missing golden {rel}: run python3 -m gpustack_k3.render.golden"
    assert path.read_text() == FRESH[rel], (
        f"{rel} changed; if intended, run python3 -m gpustack_k3.render.golden and review the diff\n"
        + _show(path, FRESH[rel]))


def test_no_stale_golden_files():
    assert diff_tree(GOLDEN, FRESH) == [], "run python3 -m gpustack_k3.render.golden"


def test_golden_covers_every_case_and_target():
    from gpustack_k3.render.golden import cases
    from gpustack_k3.render.targets import TARGETS, gpustack_available

    targets = [t for t in TARGETS if t != "gpustack" or gpustack_available()]
    have = {tuple(rel.split("/")[:2]) for rel in FRESH}
    assert have == {(c, t) for c in cases() for t in targets}


def test_committed_manifests_match_a_fresh_regeneration(tmp_path):
    from gpustack_k3.cli.render_cmd import manifests

    res = CliRunner().invoke(manifests, ["--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    fresh = {p.relative_to(tmp_path / "m" / "examples").as_posix(): p.read_text()
             for p in (tmp_path / "m" / "examples").rglob("*") if p.is_file()}
    committed = REPO / "manifests" / "examples"
    drift = diff_tree(committed, fresh)
    assert drift == [], f"manifests/examples is stale ({drift[:5]}...): run `gpustack-k3 manifests`"
    # --check agrees, and the regeneration is byte-for-byte deterministic.
    check = CliRunner().invoke(manifests, ["--out", str(tmp_path / "m"), "--check"])
    assert check.exit_code == 0, check.output
    again = CliRunner().invoke(manifests, ["--out", str(tmp_path / "m2")])
    assert again.exit_code == 0
    assert diff_tree(tmp_path / "m2" / "examples", fresh) == []


def test_manifests_check_detects_drift(tmp_path):
    from gpustack_k3.cli.render_cmd import manifests

    assert CliRunner().invoke(manifests, ["--out", str(tmp_path)]).exit_code == 0
    victim = next(p for p in (tmp_path / "examples").rglob("kubernetes.yaml"))
    victim.write_text(victim.read_text().replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 7"))
    (tmp_path / "examples" / "extra.txt").write_text("x")
    res = CliRunner().invoke(manifests, ["--out", str(tmp_path), "--check"])
    assert res.exit_code == 1
    assert "extra.txt" in res.output and victim.name in res.output
