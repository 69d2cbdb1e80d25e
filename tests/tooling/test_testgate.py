"""tools/testgate.py, the judge of a `scripts/test.sh` run, driven by a fake pytest that writes a given JUnit
report (and, where a case needs it, changes the tree), plus one real pytest run of a tiny suite through the
real marker plugin. Nothing here runs the project's suite inside the suite."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools import testgate

REPO = Path(__file__).resolve().parents[2]
GATE = REPO / "tools" / "testgate.py"

FAKE_PYTEST = f"""#!{sys.executable}
import json, os, pathlib, sys
args = sys.argv[1:]
pathlib.Path(os.environ["FAKE_ARGV"]).write_text(json.dumps(args))
junit = next(a.split("=", 1)[1] for a in args if a.startswith("--junitxml="))
if os.environ.get("FAKE_JUNIT"):
    pathlib.Path(junit).write_text(os.environ["FAKE_JUNIT"])
for rel in filter(None, os.environ.get("FAKE_TOUCH", "").split(":")):
    with open(rel, "a") as fh:
        fh.write("written by the run\\n")
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


def junit(*cases: tuple[str, str, str | None]) -> str:
    """A pytest JUnit report: (test name, comma-separated markers, skip message or None)."""
    body = ""
    for name, markers, skip in cases:
        inner = f'<properties><property name="markers" value="{markers}" /></properties>'
        if skip is not None:
            inner += f'<skipped type="pytest.skip" message="{skip}">{skip}</skipped>'
        body += f'<testcase classname="tests.x" name="{name}" time="0.1">{inner}</testcase>'
    return (f'<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" '
            f'tests="{len(cases)}">{body}</testsuite></testsuites>')


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git checkout with one committed file (the gate's --repo)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    (repo / "kept.txt").write_text("committed\n")
    subprocess.run([*git, "add", "kept.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return repo


def gate(repo: Path, tmp_path: Path, *, report: str | None, rc: int = 0, touch: str = "", fast: bool = False,
         pytest_args: tuple[str, ...] = ()) -> tuple[int, str, list[str]]:
    fake = tmp_path / "fake-pytest"
    fake.write_text(FAKE_PYTEST)
    fake.chmod(0o755)
    argv_file = tmp_path / "argv.json"
    env = {**os.environ, "FAKE_ARGV": str(argv_file), "FAKE_RC": str(rc), "FAKE_TOUCH": touch,
           "FAKE_JUNIT": report or ""}
    cmd = [sys.executable, str(GATE), "--junit", str(tmp_path / "cache" / "junit.xml"), "--repo", str(repo),
           "--pytest", str(fake), *(["--fast"] if fast else []), "--", *pytest_args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    return res.returncode, res.stdout + res.stderr, json.loads(argv_file.read_text())


def test_a_clean_run_passes_with_pytests_code_and_says_so(checkout, tmp_path):
    rc, out, argv = gate(checkout, tmp_path, report=junit(("test_a", "", None), ("test_b", "operator", None)),
                         pytest_args=("-x", "tests/core"))
    assert rc == 0, out
    assert "2 test(s), 0 skipped" in out and "working tree as before the run" in out
    assert f"--junitxml={tmp_path / 'cache' / 'junit.xml'}" in argv            # under the cache dir, not the tree
    assert argv[-2:] == ["-x", "tests/core"] and "-m" not in argv
    assert ["-p", "tests.support.tier_report"] == argv[argv.index("tests.support.tier_report") - 1:][:2]


def test_a_skip_in_a_prepared_tier_fails_and_names_the_test(checkout, tmp_path):
    report = junit(("test_ok", "", None), ("test_dockerd", "docker", "no dockerd answers"),
                   ("test_tool", "", "shellcheck is not installed"))
    rc, out, _ = gate(checkout, tmp_path, report=report)
    assert rc == 1, out
    assert "2 skipped in prepared tiers" in out
    assert "tests.x::test_dockerd: no dockerd answers" in out and "tests.x::test_tool: shellcheck" in out


@pytest.mark.parametrize("marker", ["kind", "image_build", "upstream_crds"])
def test_kind_and_image_build_may_skip_and_the_summary_lists_them(checkout, tmp_path, marker):
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_ok", "", None),
                                                      ("test_e2e", f"{marker},parametrize", "kind is not on PATH")))
    assert rc == 0, out
    assert "1 skipped in the tiers that may skip (image_build, kind, upstream_crds)" in out
    assert f"tests.x::test_e2e [{marker}]: kind is not on PATH" in out


def test_no_tests_collected_fails(checkout, tmp_path):
    rc, out, _ = gate(checkout, tmp_path, report=junit(), rc=5)
    assert rc == 1 and "pytest collected no tests" in out, out


def test_pytests_own_failure_code_is_kept(checkout, tmp_path):
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)), rc=2)
    assert rc == 2 and "pytest exited 2" not in out, out


def test_a_missing_report_fails(checkout, tmp_path):
    rc, out, _ = gate(checkout, tmp_path, report=None)
    assert rc == 1 and "pytest wrote no JUnit report" in out, out


def test_a_report_of_an_earlier_run_is_not_judged(checkout, tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "junit.xml").write_text(junit(("test_old", "", None)))
    rc, out, _ = gate(checkout, tmp_path, report=None)
    assert rc == 1 and "pytest wrote no JUnit report" in out, out


def test_the_run_changing_the_tree_fails(checkout, tmp_path):
    (checkout / "kept.txt").write_text("edited before the run\n")        # a change the run did not make
    (checkout / "draft.txt").write_text("untracked before the run\n")
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)))
    assert rc == 0, out
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)), touch="new.txt")
    assert rc == 1 and "the run changed the working tree (1 path(s))" in out and "new.txt: clean -> ??" in out, out
    (checkout / "new.txt").unlink()
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)), touch="kept.txt")
    assert rc == 1 and re.search(r"kept\.txt:  M:\w+ ->  M:\w+", out), out     # a further edit of a dirty file


def test_outside_a_git_checkout_the_tree_check_is_skipped_and_said(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    rc, out, _ = gate(plain, tmp_path, report=junit(("test_a", "", None)), touch="new.txt")
    assert rc == 0, out
    assert "not a git checkout: the check that tests leave the tree clean is skipped" in out


def test_fast_deselects_every_tier_that_needs_preparation(checkout, tmp_path):
    _, _, argv = gate(checkout, tmp_path, report=junit(("test_a", "", None)), fast=True)
    assert argv[argv.index("-m") + 1] == testgate.UNIT_ONLY
    import tomllib

    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    declared = {m.split(":", 1)[0] for m in markers}
    # every tier needs a tool or service except the operator's, which runs against the in-process emulator
    assert set(testgate.PREPARED_TIERS) == declared - {"operator"}
    assert testgate.MAY_SKIP <= set(testgate.PREPARED_TIERS)


def test_real_pytest_through_the_marker_plugin(tmp_path):
    """The real plugin puts each test's markers into the real JUnit report, and the gate reads them."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_tiny.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.kind
        def test_kind_cluster():
            pytest.skip("kind is not on PATH")

        @pytest.mark.helm
        def test_helm_tier():
            pytest.skip("helm not found")

        def test_plain():
            pass
    """))
    report = tmp_path / "junit.xml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run(testgate.pytest_argv(report, [str(suite), "-W", "ignore::pytest.PytestUnknownMarkWarning"],
                                              fast=False, pytest_exe=None),
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    total, skips = testgate.read_skips(report)
    assert total == 3
    assert {(s.test.rsplit("::", 1)[-1], s.allowed) for s in skips} == {("test_kind_cluster", True),
                                                                         ("test_helm_tier", False)}
    code, lines = testgate.judge(res.returncode, report, None, None)
    assert code == 1 and any("test_helm_tier: helm not found" in ln for ln in lines)


def test_test_sh_runs_the_suite_through_the_gate():
    """scripts/test.sh cannot run inside the suite (it installs the package and starts services): check that
    it hands pytest's arguments to the gate, with the report under the cache dir and --fast for FAST runs."""
    text = (REPO / "scripts" / "test.sh").read_text()
    assert 'gate=(python3 tools/testgate.py --junit "$GPUSTACK_K3_CACHE/junit.xml")' in text
    assert '[ "${GPUSTACK_K3_FAST:-0}" = "1" ] && gate+=(--fast)' in text
    assert '"${gate[@]}" -- "$@"' in text
    assert "python3 -m pytest" not in text.split("gate=(", 1)[1]      # no second, unjudged pytest run
    res = subprocess.run(["bash", "-n", str(REPO / "scripts" / "test.sh")], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stderr


@pytest.mark.tools
@pytest.mark.parametrize("script", sorted([REPO / "scripts" / "test.sh", *(REPO / ".ci").glob("*.sh"), REPO / ".ci" / "run"]),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_ci_scripts_pass_shellcheck(script):
    from tests.support import tiers

    shellcheck = tiers.tool("shellcheck", "Debian: apt-get install shellcheck; .ci/setup_tools.sh")
    res = subprocess.run([shellcheck, "-x", str(script)], capture_output=True, text=True, check=False, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
