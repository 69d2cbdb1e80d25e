"""tools/testgate.py, the judge of a `scripts/test.sh` run, driven by a fake pytest that writes a given JUnit
report (and, where a case needs it, changes the tree), plus one real pytest run of a tiny suite through the
real marker plugin. Nothing here runs the project's suite inside the suite."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.waiting import wait_for
from tools import testgate

REPO = Path(__file__).resolve().parents[2]
GATE = REPO / "tools" / "testgate.py"

FAKE_PYTEST = f"""#!{sys.executable}
import json, os, pathlib, sys
args = sys.argv[1:]
log = pathlib.Path(os.environ["FAKE_ARGV"])
call = len(log.read_text().splitlines()) if log.exists() else 0    # the gate's n-th pytest run, from 0
with log.open("a") as fh:
    fh.write(json.dumps(args) + "\\n")
junit = next(a.split("=", 1)[1] for a in args if a.startswith("--junitxml="))
report = os.environ.get(f"FAKE_JUNIT_{{call}}", os.environ.get("FAKE_JUNIT"))
if report:
    pathlib.Path(junit).write_text(report)
for rel in filter(None, os.environ.get("FAKE_TOUCH", "").split(":")):
    with open(rel, "a") as fh:
        fh.write("written by the run\\n")
leak = os.environ.get("FAKE_LEAK")   # a child the "suite" forgets: in the run's session, or in one of its own
if leak:
    import subprocess
    child = subprocess.Popen(["sleep", os.environ.get("FAKE_LEAK_SECONDS", "307")], start_new_session=leak == "own-session")
    pathlib.Path(os.environ["FAKE_LEAK_PID"]).write_text(str(child.pid))
tmp_record = os.environ.get("FAKE_TMP_RECORD")   # leave a file in the run's temporary directory, say where
if tmp_record:
    import tempfile
    left = pathlib.Path(tempfile.gettempdir()) / "left-by-the-run.sock"
    left.write_text("x")
    pathlib.Path(tmp_record).write_text(str(left))
times = os.environ.get("FAKE_TIMES")   # when the run started and ended, its -m and niceness
if times:
    import time
    t0 = time.time()
    print("output of the run with -m", args[args.index("-m") + 1] if "-m" in args else None)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    with open(times, "a") as fh:
        fh.write(json.dumps({{"m": args[args.index("-m") + 1] if "-m" in args else None, "start": t0,
                             "end": time.time(), "nice": os.nice(0)}}) + "\\n")
codes = os.environ.get("FAKE_RC", "0").split(",")
sys.exit(int(codes[min(call, len(codes) - 1)]))
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


def gate(repo: Path, tmp_path: Path, *, report: str | None, rc: int | str = 0, touch: str = "", fast: bool = False,
         workers: int = 0, reports: tuple[str | None, ...] = (),
         pytest_args: tuple[str, ...] = (), leak: str = "", gate_args: tuple[str, ...] = (),
         sleep: float = 0, tmp_record: str = "") -> tuple[int, str, list[list[str]]]:
    """Run the gate on the fake pytest: ``report`` is what every run writes unless ``reports`` gives the n-th run
    its own (None: no report), ``rc`` its exit code ("0,5": per run). Returns the argv of each run."""
    fake = tmp_path / "fake-pytest"
    fake.write_text(FAKE_PYTEST)
    fake.chmod(0o755)
    argv_file = tmp_path / "argv.jsonl"
    argv_file.unlink(missing_ok=True)
    env = {**os.environ, "FAKE_ARGV": str(argv_file), "FAKE_RC": str(rc), "FAKE_TOUCH": touch,
           "FAKE_JUNIT": report or "", **{f"FAKE_JUNIT_{i}": r or "" for i, r in enumerate(reports)},
           "FAKE_LEAK": leak, "FAKE_LEAK_PID": str(tmp_path / "leaked.pid"),
           "FAKE_TIMES": str(tmp_path / "times.jsonl"), "FAKE_SLEEP": str(sleep), "FAKE_TMP_RECORD": tmp_record}
    cmd = [sys.executable, str(GATE), "--junit", str(tmp_path / "cache" / "junit.xml"), "--repo", str(repo),
           "--pytest", str(fake), *(["--fast"] if fast else []), *(["--workers", str(workers)] if workers else []),
           *gate_args, "--", *pytest_args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    runs = [json.loads(ln) for ln in argv_file.read_text().splitlines()] if argv_file.exists() else []
    return res.returncode, res.stdout + res.stderr, runs


def test_a_clean_run_passes_with_pytests_code_and_says_so(checkout, tmp_path):
    rc, out, (argv,) = gate(checkout, tmp_path, report=junit(("test_a", "", None), ("test_b", "operator", None)),
                            pytest_args=("-x", "tests/core"))
    assert rc == 0, out
    assert "2 test(s), 0 skipped" in out and "working tree as before the run" in out
    assert "no process of the run left alive" in out
    assert f"--junitxml={tmp_path / 'cache' / 'junit.xml'}" in argv            # under the cache dir, not the tree
    assert argv[-2:] == ["-x", "tests/core"] and "-m" not in argv
    assert ["-p", "tests.support.tier_report"] == argv[argv.index("tests.support.tier_report") - 1:][:2]


def test_what_a_run_leaves_in_its_tmpdir_is_removed_with_it(checkout, tmp_path):
    """The runs get a TMPDIR of the gate's own (not the machine's /tmp), removed after them: a socket file an engine
    the run stopped never unlinked does not pile up in /tmp."""
    record = tmp_path / "left.txt"
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2, tmp_record=str(record))
    assert rc == 0, out
    left = Path(record.read_text())
    assert left.parent != Path(tempfile.gettempdir()) and left.parent.name.startswith("k3t-"), left
    assert not left.exists() and not left.parent.exists()
    assert f"the runs' TMPDIR {left.parent} (1 top-level entry left by the runs) removed" in out


def test_a_skip_in_a_prepared_tier_fails_and_names_the_test(checkout, tmp_path):
    report = junit(("test_ok", "", None), ("test_dockerd", "docker", "no dockerd answers"),
                   ("test_tool", "", "shellcheck is not installed"))
    rc, out, _ = gate(checkout, tmp_path, report=report)
    assert rc == 1, out
    assert "2 skipped in prepared tiers" in out
    assert "tests.x::test_dockerd: no dockerd answers" in out and "tests.x::test_tool: shellcheck" in out


@pytest.mark.parametrize("marker", ["kind", "image_build"])
def test_kind_and_image_build_may_skip_and_the_summary_lists_them(checkout, tmp_path, marker):
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_ok", "", None),
                                                      ("test_e2e", f"{marker},parametrize", "kind is not on PATH")))
    assert rc == 0, out
    assert "1 skipped in the tiers that may skip (image_build, kind)" in out
    assert f"tests.x::test_e2e [{marker}]: kind is not on PATH" in out


def test_an_upstream_crd_skip_fails_now_that_ci_has_the_files(checkout, tmp_path):
    """shared/ (with the LWS, DRA-driver and GAIE CRDs) lies beside CI's clone: that tier may no longer skip."""
    report = junit(("test_ok", "", None), ("test_crds", "upstream_crds", "no upstream CRD files"))
    rc, out, _ = gate(checkout, tmp_path, report=report)
    assert rc == 1 and "1 skipped in prepared tiers" in out, out


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
    _, _, (argv,) = gate(checkout, tmp_path, report=junit(("test_a", "", None)), fast=True)
    assert argv[argv.index("-m") + 1] == testgate.UNIT_ONLY
    import tomllib

    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    declared = {m.split(":", 1)[0] for m in markers}
    # every tier needs a tool or service except the operator's, which runs against the in-process emulator
    assert set(testgate.PREPARED_TIERS) == declared - {"operator"}
    assert testgate.MAY_SKIP <= set(testgate.PREPARED_TIERS)


def test_workers_run_the_unit_tiers_on_xdist_then_the_prepared_tiers_serially_into_one_report(checkout, tmp_path):
    unit = junit(("test_a", "", None), ("test_b", "operator", None))
    tiers = junit(("test_engine", "engine", None), ("test_e2e", "kind", "kind is not on PATH"))
    rc, out, runs = gate(checkout, tmp_path, report=None, reports=(unit, tiers), workers=2)
    assert rc == 0, out
    (first, second) = runs
    assert first[first.index("-n") + 1] == "2" and first[first.index("-m") + 1] == testgate.UNIT_ONLY
    assert "-n" not in second and second[second.index("-m") + 1] == testgate.PREPARED_ONLY
    cache = tmp_path / "cache"
    assert f"--junitxml={cache / 'junit.unit.xml'}" in first and f"--junitxml={cache / 'junit.tiers.xml'}" in second
    # one verdict over both: the merged report holds both runs' cases, one suite per run
    assert "4 test(s), 1 skipped" in out and "tests.x::test_e2e [kind]" in out
    import xml.etree.ElementTree as ET

    suites = ET.parse(cache / "junit.xml").getroot().findall("testsuite")
    assert [(s.get("name"), len(s.findall("testcase"))) for s in suites] == [("unit", 2), ("tiers", 2)]
    assert "unit run: pytest exited 0 after" in out and "tiers run: pytest exited 0 after" in out
    assert f"[testgate] unit run (2 xdist workers): -m {testgate.UNIT_ONLY!r}" in out
    assert f"[testgate] tiers run (serial): -m {testgate.PREPARED_ONLY!r}" in out


def test_overlap_runs_the_unit_tiers_beside_the_prepared_ones_then_the_oracle_tier_then_the_engine_tier(checkout,
                                                                                                          tmp_path):
    rc, out, argvs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2, sleep=1.5,
                          gate_args=("--overlap", "--unit-nice", "7"))
    assert rc == 0, out
    runs = {r["m"]: r for r in map(json.loads, (tmp_path / "times.jsonl").read_text().splitlines())}
    unit, tiers = runs[testgate.UNIT_ONLY], runs[testgate.OTHER_PREPARED_ONLY]
    oracle, engines = runs[testgate.ORACLE_ONLY], runs[testgate.ENGINE_ONLY]
    assert unit["start"] < tiers["end"] and tiers["start"] < unit["end"], runs          # side by side
    assert oracle["start"] >= max(unit["end"], tiers["end"]), runs                       # then the oracle tier alone
    assert engines["start"] >= oracle["end"], runs                                       # then the engine tier alone
    assert unit["nice"] == tiers["nice"] + 7 and engines["nice"] == oracle["nice"] == tiers["nice"], runs
    # the oracle tier on the xdist workers, whole modules per worker; the engine tier serial
    by_m = {a[a.index("-m") + 1]: a for a in argvs}
    o, e = by_m[testgate.ORACLE_ONLY], by_m[testgate.ENGINE_ONLY]
    assert o[o.index("-n") + 1] == "2" and o[o.index("--dist") + 1] == "loadfile", o
    assert "-n" not in e and "--dist" not in e, e
    assert f"--junitxml={tmp_path / 'cache' / 'junit.oracle.xml'}" in o
    assert "[testgate] oracle run (2 xdist workers (--dist loadfile)): -m" in out, out
    assert "4 test(s), 0 skipped" in out, out                                            # four reports, merged
    suites = ET.parse(tmp_path / "cache" / "junit.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["unit", "tiers", "oracle", "engines"]
    # the unit run's lines come as one block after it ended, not interleaved with the tiers run's
    block = out.index("[testgate] --- the unit run's output")
    assert out.index(f"output of the run with -m {testgate.UNIT_ONLY}") > block, out
    assert "the oracle run's output" not in out, out                                     # alone: its lines as they come
    for label in ("unit", "tiers", "oracle", "engines"):
        assert f"{label} run: pytest exited 0 after" in out, out
    # a failing run still fails the gate; with -x the later runs do not start after a failed first step
    rc, out, argvs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2, rc="1",
                          gate_args=("--overlap",), pytest_args=("-x",))
    assert rc == 1 and "-x: the unit and tiers runs failed, the later run(s) did not run" in out, out
    assert len(argvs) == 2, argvs
    # a failing oracle step ends it too: the engine tier does not start
    rc, out, argvs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2, rc="0,0,1",
                          gate_args=("--overlap",), pytest_args=("-x",))
    assert rc == 1 and "-x: the oracle run failed, the later run(s) did not run" in out, out
    assert [a[a.index("-m") + 1] for a in argvs][-1] == testgate.markexpr(testgate.ORACLE_ONLY, None), argvs


def test_oracle_with_tiers_runs_the_oracle_tier_in_the_first_step_then_the_engine_tier_alone(checkout, tmp_path):
    rc, out, argvs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2, sleep=1.5,
                          gate_args=("--overlap", "--oracle-with-tiers", "--unit-nice", "6"))
    assert rc == 0, out
    runs = {r["m"]: r for r in map(json.loads, (tmp_path / "times.jsonl").read_text().splitlines())}
    unit, tiers = runs[testgate.UNIT_ONLY], runs[testgate.OTHER_PREPARED_ONLY]
    oracle, engines = runs[testgate.ORACLE_ONLY], runs[testgate.ENGINE_ONLY]
    assert max(unit["start"], tiers["start"], oracle["start"]) < min(unit["end"], tiers["end"], oracle["end"]), runs
    assert engines["start"] >= max(unit["end"], tiers["end"], oracle["end"]), runs
    assert unit["nice"] == oracle["nice"] == tiers["nice"] + 6 and engines["nice"] == tiers["nice"], runs
    # both xdist runs' lines come as blocks after they ended
    for label in ("unit", "oracle"):
        assert f"[testgate] --- the {label} run's output ({tmp_path / 'cache' / f'junit.{label}.log'})" in out, out
    assert "4 test(s), 0 skipped" in out, out
    rc, out, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2,
                         gate_args=("--oracle-with-tiers",))
    assert rc == 2 and "--oracle-with-tiers: needs --overlap" in out and runs == [], out


def test_with_overlap_every_test_is_in_exactly_one_of_the_four_runs():
    from itertools import combinations

    from _pytest.mark.expression import Expression

    runs = [Expression.compile(e) for e in (testgate.UNIT_ONLY, testgate.OTHER_PREPARED_ONLY, testgate.ORACLE_ONLY,
                                            testgate.ENGINE_ONLY)]
    names = [*testgate.PREPARED_TIERS, "operator", "parametrize"]
    for n in range(4):
        for marks in combinations(names, n):
            def has(name, marks=marks, **_kw):
                return name in marks
            assert sum(r.evaluate(has) for r in runs) == 1, marks
    # a test of both engine tiers runs with the engine tier (its real servers), serially
    assert Expression.compile(testgate.ENGINE_ONLY).evaluate(lambda name, **_kw: name in ("engine", "engine_oracle"))


@pytest.mark.parametrize("gate_args", [("--overlap",), ("--overlap", "--workers", "2", "--unit-nice", "20")])
def test_overlap_needs_workers_and_a_niceness_in_range(checkout, tmp_path, gate_args):
    rc, out, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), gate_args=gate_args)
    assert rc == 2 and ("--overlap: needs --workers" in out or "--unit-nice: 20 is out of range" in out), out
    assert runs == []


def test_fast_with_workers_is_the_unit_run_alone_and_its_report_is_judged(checkout, tmp_path):
    rc, out, (argv,) = gate(checkout, tmp_path, report=junit(("test_a", "", None)), fast=True, workers=2)
    assert rc == 0 and "1 test(s), 0 skipped" in out, out
    assert argv[argv.index("-n") + 1] == "2" and argv[argv.index("-m") + 1] == testgate.UNIT_ONLY
    rc, out, _ = gate(checkout, tmp_path, report=None, fast=True, workers=2)
    assert rc == 1 and "the unit run wrote no JUnit report" in out, out


def test_every_test_is_in_exactly_one_of_the_two_runs():
    """UNIT_ONLY and PREPARED_ONLY are complements: pytest's own marker matcher over every marker combination."""
    from itertools import combinations

    from _pytest.mark.expression import Expression

    unit, prepared = Expression.compile(testgate.UNIT_ONLY), Expression.compile(testgate.PREPARED_ONLY)
    names = [*testgate.PREPARED_TIERS, "operator", "parametrize"]
    for n in range(3):
        for marks in combinations(names, n):
            def has(name, marks=marks, **_kw):
                return name in marks
            assert unit.evaluate(has) != prepared.evaluate(has), marks


def test_a_skip_in_the_prepared_run_still_fails(checkout, tmp_path):
    tiers = junit(("test_dockerd", "docker", "no dockerd answers"))
    rc, out, _ = gate(checkout, tmp_path, report=None, reports=(junit(("test_a", "", None)), tiers), workers=2)
    assert rc == 1 and "tests.x::test_dockerd: no dockerd answers" in out, out


def test_a_failing_run_gives_its_code_and_the_other_run_still_runs(checkout, tmp_path):
    rc, out, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), rc="1,0", workers=2)
    assert rc == 1 and len(runs) == 2, out
    rc, out, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), rc="0,3", workers=2)
    assert rc == 3 and "pytest exited 3" in out, out


def test_with_exitfirst_a_failing_unit_run_ends_the_gate(checkout, tmp_path):
    rc, out, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), rc="1", workers=2,
                         pytest_args=("-x",))
    assert rc == 1 and len(runs) == 1 and "-x: the unit run failed, the later run(s) did not run" in out, out


def test_an_empty_run_fails_the_whole_suite_but_not_a_selection(checkout, tmp_path):
    empty = junit()
    rc, out, _ = gate(checkout, tmp_path, report=None, reports=(junit(("test_a", "", None)), empty), rc="0,5",
                      workers=2)
    assert rc == 1 and "the tiers run collected no tests: failing" in out, out
    # `scripts/test.sh tests/core`: the prepared-tier run has nothing to select there
    rc, out, _ = gate(checkout, tmp_path, report=None, reports=(junit(("test_a", "", None)), empty), rc="0,5",
                      workers=2, pytest_args=("tests/core",))
    assert rc == 0, out
    rc, out, _ = gate(checkout, tmp_path, report=empty, rc="5", workers=2, pytest_args=("tests/nothing",))
    assert rc == 1 and "pytest collected no tests: failing" in out, out


def test_a_run_without_a_report_fails_and_is_named(checkout, tmp_path):
    rc, out, _ = gate(checkout, tmp_path, report=None, reports=(junit(("test_a", "", None)), None), workers=2)
    assert rc == 1 and "the tiers run wrote no JUnit report at" in out, out


def test_a_user_marker_expression_narrows_each_run(checkout, tmp_path):
    _, _, runs = gate(checkout, tmp_path, report=junit(("test_a", "", None)), workers=2,
                      pytest_args=("-m", "not slow", "tests", "-mhypothesis or engine"))
    for argv, tiers in zip(runs, (testgate.UNIT_ONLY, testgate.PREPARED_ONLY)):
        assert argv.count("-m") == 1 and argv[argv.index("-m") + 1] == f"({tiers}) and (hypothesis or engine)"
        assert argv[-1] == "tests"
    _, _, (argv,) = gate(checkout, tmp_path, report=junit(("test_a", "", None)), fast=True, pytest_args=("-m", "hypothesis"))
    assert argv[argv.index("-m") + 1] == f"({testgate.UNIT_ONLY}) and (hypothesis)"


def tiny_suite(tmp_path: Path, body: str) -> Path:
    """A directory holding one test module: ``import pytest`` and ``body`` (indented as written)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_tiny.py").write_text("import pytest\n" + textwrap.dedent(body))
    return suite


def test_the_unit_run_on_real_xdist_keeps_the_markers_in_the_report(tmp_path):
    """pytest-xdist workers load the marker plugin too: the controller's report has each case's markers."""
    suite = tiny_suite(tmp_path, """
        @pytest.mark.operator
        def test_one():
            pass

        @pytest.mark.operator
        def test_two():
            pytest.skip("a unit-tier skip")
    """)
    report = tmp_path / "junit.xml"
    res = subprocess.run(testgate.pytest_argv(report, [str(suite), "-W", "ignore::pytest.PytestUnknownMarkWarning"],
                                              tiers=testgate.UNIT_ONLY, workers=2),
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "bringing up nodes" in res.stdout, res.stdout                  # xdist ran it
    total, skips = testgate.read_skips(report)
    assert total == 2 and [(s.test.rsplit("::", 1)[-1], s.markers, s.allowed) for s in skips] == [
        ("test_two", frozenset({"operator"}), False)]


def test_real_pytest_through_the_marker_plugin(tmp_path):
    """The real plugin puts each test's markers into the real JUnit report, and the gate reads them."""
    suite = tiny_suite(tmp_path, """
        @pytest.mark.kind
        def test_kind_cluster():
            pytest.skip("kind is not on PATH")

        @pytest.mark.helm
        def test_helm_tier():
            pytest.skip("helm not found")

        def test_plain():
            pass
    """)
    report = tmp_path / "junit.xml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run(testgate.pytest_argv(report, [str(suite), "-W", "ignore::pytest.PytestUnknownMarkWarning"],
                                              pytest_exe=None),
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
    it hands pytest's arguments to the gate, with the report under the cache dir, the unit tiers on xdist
    workers, and --fast for FAST runs."""
    text = (REPO / "scripts" / "test.sh").read_text()
    assert ('gate=(python3 tools/testgate.py --junit "$GPUSTACK_K3_CACHE/junit.xml" '
            '--workers "${GPUSTACK_K3_TEST_WORKERS:-2}")') in text
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


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.parametrize("leak", ["session", "own-session"])
def test_a_process_the_run_leaves_alive_fails_the_gate_named_and_is_stopped(checkout, tmp_path, leak):
    """Issue 33 item 7: a child the suite forgot (here a `sleep`; in the suite, an engine) fails the gate, named
    with its command line, whether it stayed in the run's session or started one of its own (the run's marker in
    its environment finds it); the gate stops it."""
    rc, out, _ = gate(checkout, tmp_path, report=junit(("test_a", "", None)), leak=leak)
    pid = int((tmp_path / "leaked.pid").read_text())
    try:
        assert rc == 1, out
        assert "the run left 1 process(es) alive (now stopped): failing" in out, out
        assert f"pid {pid} " in out and "sleep 307" in out, out
        assert not _alive(pid), "the gate stops what the run left"
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def test_the_leftover_check_finds_only_the_runs_processes(tmp_path):
    """A process of another run (another marker, another session) is not this run's."""
    import uuid

    mine, other = uuid.uuid4().hex, uuid.uuid4().hex
    a = subprocess.Popen(["sleep", "311"], env={**os.environ, testgate.RUN_MARKER: mine}, start_new_session=True)
    b = subprocess.Popen(["sleep", "313"], env={**os.environ, testgate.RUN_MARKER: other}, start_new_session=True)
    try:
        found = {p.pid for p in testgate.run_processes([], mine)}
        assert a.pid in found and b.pid not in found
        assert {p.pid for p in testgate.run_processes([b.pid], mine)} >= {a.pid, b.pid}   # b: by its session
        left = testgate.leftover_processes([], mine, grace_s=0.5)
        assert [p.pid for p in left] == [a.pid] and a.wait(5) is not None and b.poll() is None
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
            p.wait(5)


def test_a_fixture_stops_the_grandchild_its_child_started_in_a_session_of_its_own(tmp_path):
    """tests/support/procs.py, as tests/engine/test_probe_engine.py's ``served`` uses it: `run` (here a Python
    parent) starts its engine (here a `sleep`) in a session of its own; `run` is killed (the fixture's last resort)
    and the engine is orphaned: the fixture's marker still finds it and stops it."""
    from tests.support.procs import marked, stop_marked

    env, token = marked()
    pidfile = tmp_path / "engine.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import pathlib, subprocess, time
        child = subprocess.Popen(["sleep", "317"], start_new_session=True)
        pathlib.Path({str(pidfile)!r}).write_text(str(child.pid))
        time.sleep(300)
        """)], env=env, start_new_session=True)
    try:
        wait_for(pidfile.exists, timeout=30, what="the engine's pid")
        engine = int(pidfile.read_text())
        parent.kill()
        parent.wait(5)
        assert _alive(engine), "the orphan the old fixture left behind"
        stopped = stop_marked(token, grace_s=0.5)
        assert [p.pid for p in stopped] == [engine] and "sleep 317" in stopped[0].cmdline
        assert not _alive(engine)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(5)
        if pidfile.exists() and _alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), 9)
