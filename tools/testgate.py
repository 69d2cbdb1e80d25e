"""Run the test suite and judge the run, as ``scripts/test.sh`` does after preparing the tiers.

    python3 tools/testgate.py --junit PATH [--fast] [--workers N] [--repo DIR] [--pytest EXE] [-- PYTEST_ARGS...]

Runs ``python3 -m pytest -q -p no:cacheprovider -p tests.support.tier_report --junitxml PATH [ARGS]`` in the
repository (``--fast``: the unit tiers only, every marker of a tier that needs a tool or service deselected).

``--workers N`` (N >= 1; ``scripts/test.sh`` passes 2): two pytest runs instead of one, each with its own JUnit
report beside PATH (``<stem>.unit.xml``, ``<stem>.tiers.xml``), merged into PATH as one report with two
test suites: first the unit tiers on N pytest-xdist workers (``-n N``: CPU-bound, isolated by tmp dirs and free
ports), then the tiers that need a tool or service in one serial process (real engines, dockerd and GPUStack
share the 2 cores and must not start side by side; ``--fast`` leaves this run out). ``--overlap``: four runs in three
steps. Step 0: the unit run starts together with the serial run of the prepared tiers other than the engine tiers
(docker, GPUStack, helm, predict, ...: mostly waiting on a daemon or a server, or one process on one core), the unit
run at a lower CPU priority (``--unit-nice N``, default 5), its output in ``<stem>.unit.log``, printed when it ends
so the runs' lines do not interleave. Step 1, when both have ended: the ``engine_oracle`` tier alone on N xdist
workers (``<stem>.oracle.xml``; ``--dist loadfile``: a test module stays on one worker, so its module fixtures and
the session's verdict cache serve it whole; CPU-bound oracle work: each worker keeps its own oracle workers,
tests/engine_oracle/conftest.py, and writes only its own temporary files). Step 2: the ``engine`` tier serially
alone, as before (``<stem>.engines.xml``: several vLLM processes at once, start-up and side-channel timeouts).
``--oracle-with-tiers``: the ``engine_oracle`` run in step 0 instead, beside the other two at the unit run's
niceness (its output in ``<stem>.oracle.log``), the ``engine`` tier then step 1. A ``-m EXPR`` among ARGS narrows
each run (``-m "(tier's) and (EXPR)"``); with ``-x``/``--exitfirst`` a failing step ends the gate.

Then it fails (exit 1) when

* pytest collected no tests (its exit 5): for a run of the whole suite, each of the runs must collect
  tests; when ARGS select (paths, ``-k``, ``-m``), some of them finding nothing is expected, all is not,
* a test was skipped that is not marked ``kind`` or ``image_build`` (the only tiers that may
  skip: no kind cluster, no 4 GB engine image build, and no LWS CRD files, which no registry CI reaches ships,
  on the CI machines); every other tier was prepared, so a skip there means a check did not run,
* the working tree has changes after the run that it did not have before (``git status --porcelain``, with a
  digest of each listed file, so a further edit of an already modified file counts too). Outside a git
  checkout this check is skipped, and the summary says so,
* a process the run started is still alive after it (an engine, a server, a ``sleep`` a fixture forgot): each
  pytest run starts in a session of its own with a marker in its environment (``GPUSTACK_K3_TESTGATE_RUN``);
  a process in that session, or one whose environment carries the marker (a fixture that started it in a
  session of its own inherits the marker unless it replaced the whole environment), is named with its command
  line, then stopped (SIGTERM to its process group, SIGKILL after a grace period), and the gate fails. The check
  needs /proc (Linux); elsewhere the summary says it was skipped.

The runs share one temporary directory of the gate's own (``TMPDIR``, ``tempfile.mkdtemp(prefix="k3t-")``), removed
after them: what a test or an engine it started leaves there (pytest's ``tmp_path`` trees, the ZMQ IPC socket files
a vLLM process that was stopped never unlinks, named by uuid in ``tempfile.gettempdir()``) goes with it instead of
piling up in /tmp; the summary counts the entries removed.

Otherwise it exits with pytest's own code. ``--pytest EXE`` runs EXE instead of ``python3 -m pytest`` (the
gate's own tests use a fake pytest that writes a given JUnit report).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAY_SKIP = frozenset({"kind", "image_build"})   # upstream_crds: CI has shared/ beside the clone
# Markers of the tiers that need a tool or a service (pyproject.toml lists them); --fast deselects them all.
PREPARED_TIERS = ("docker", "engine", "engine_wheels", "gpustack", "helm", "tools", "wheel", "kind", "image_build",
                  "upstream_crds", "predict", "engine_oracle")
UNIT_ONLY = " and ".join(f"not {m}" for m in PREPARED_TIERS)
PREPARED_ONLY = " or ".join(PREPARED_TIERS)   # the complement of UNIT_ONLY: every test is in exactly one run
# --overlap: the prepared tiers split in two. The engine tiers (several vLLM processes at once; the P/D case's NIXL
# threads spin on both cores; side-channel and start-up timeouts) run alone, as before; the others beside the unit run.
ENGINE_TIERS = ("engine", "engine_oracle")
ENGINES_ONLY = " or ".join(ENGINE_TIERS)
OTHER_PREPARED_ONLY = f"({PREPARED_ONLY}) and not ({ENGINES_ONLY})"
# --overlap splits the engine tiers again: the oracle tier (CPU-bound, no ports, no start-up timeouts) on the xdist
# workers, the engine tier (real vLLM servers) serially alone; a test with both markers goes with the engine tier.
ORACLE_ONLY = "engine_oracle and not engine"
ENGINE_ONLY = "engine"
ORACLE_DIST = "loadfile"   # pytest-xdist --dist of the oracle run: whole modules per worker
NO_TESTS = 5   # pytest's exit code when it collected nothing
RUN_MARKER = "GPUSTACK_K3_TESTGATE_RUN"   # in the environment of every process a run starts
UNIT_NICE = 5   # --overlap: the unit run's niceness (weight 335 against the tiers' 1024: they keep ~75 % of a contended core)
GRACE_S = 5.0   # a process may take this long to go after the run ended (a server's shutdown) before it counts


@dataclasses.dataclass(frozen=True)
class Skip:
    test: str
    markers: frozenset[str]
    message: str

    @property
    def allowed(self) -> bool:
        return bool(self.markers & MAY_SKIP)


class GateError(Exception):
    """The run cannot be judged (no or broken JUnit report)."""


def read_skips(junit: Path) -> tuple[int, list[Skip]]:
    """(number of test cases, the skipped ones) of a pytest JUnit report."""
    try:
        root = ET.parse(junit).getroot()
    except FileNotFoundError:
        raise GateError(f"pytest wrote no JUnit report at {junit}") from None
    except ET.ParseError as exc:
        raise GateError(f"the JUnit report {junit} is not XML: {exc}") from None
    cases = root.iter("testcase")
    total, skips = 0, []
    for case in cases:
        total += 1
        skipped = case.find("skipped")
        if skipped is None:
            continue
        markers = ""
        for prop in case.iter("property"):
            if prop.get("name") == "markers":
                markers = prop.get("value") or ""
        name = "::".join(p for p in (case.get("classname"), case.get("name")) if p)
        message = (skipped.get("message") or skipped.text or "").strip()
        skips.append(Skip(name, frozenset(m for m in markers.split(",") if m), message))
    return total, skips


@dataclasses.dataclass(frozen=True)
class Proc:
    pid: int
    pgid: int
    sid: int
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} (process group {self.pgid}, session {self.sid}): {self.cmdline}"


def _proc(pid: int) -> tuple[Proc, bytes] | None:
    """(the process, its environment) from /proc; None when it is gone or not readable."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmd = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        env = (base / "environ").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) ": state ppid pgrp session ...
    if fields[0] == "Z":   # a zombie holds nothing and cannot be stopped; its parent reaps it
        return None
    return Proc(pid, int(fields[2]), int(fields[3]), cmd or stat[stat.index("(") + 1:stat.rindex(")")]), env


def run_processes(sessions: Sequence[int], marker: str, var: str = RUN_MARKER) -> list[Proc] | None:
    """The live processes a run started: in one of ``sessions`` (each pytest run's, started with a session of its
    own) or with ``var=marker`` in their environment. None when /proc cannot be read (not Linux)."""
    if not Path("/proc/self/stat").exists():
        return None
    tag = f"{var}={marker}".encode() + b"\0"
    me = os.getpid()
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        got = _proc(int(entry.name))
        if got is not None and (got[0].sid in sessions or tag in got[1] + b"\0"):
            out.append(got[0])
    return sorted(out, key=lambda p: p.pid)


def leftover_processes(sessions: Sequence[int], marker: str, grace_s: float = GRACE_S,
                       var: str = RUN_MARKER) -> list[Proc] | None:
    """What the run left alive once ``grace_s`` passed; then stopped (SIGTERM to each process group, SIGKILL to
    what is left after ``grace_s``). None: the check cannot run here."""
    deadline = time.monotonic() + grace_s
    left = run_processes(sessions, marker, var)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = run_processes(sessions, marker, var)
    if not left:
        return left
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in run_processes(sessions, marker, var) or []:
            try:
                os.killpg(p.pgid, sig) if p.pgid != os.getpgid(0) else os.kill(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        end = time.monotonic() + grace_s
        while run_processes(sessions, marker, var) and time.monotonic() < end:
            time.sleep(0.2)
    return left


def tree_state(repo: Path) -> dict[str, str] | None:
    """Changed and untracked files of the checkout (path -> status and content digest); None outside git."""
    inside = subprocess.run(["git", "-C", str(repo), "rev-parse", "--is-inside-work-tree"], capture_output=True,
                            text=True, check=False)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    top = Path(subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True, check=True).stdout.strip())
    out = subprocess.run(["git", "-C", str(top), "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                         capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    entries = out.split("\0")
    state: dict[str, str] = {}
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":   # a rename or copy is followed by its source path
            i += 1
        state[path] = f"{code}:{_digest(top / path)}"
    return state


def _digest(path: Path) -> str:
    if path.is_symlink():
        return "link:" + str(path.readlink())
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return "dir" if path.is_dir() else "absent"


def tree_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths whose state differs between the two snapshots (new changes, further edits, reverted changes)."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


@dataclasses.dataclass(frozen=True)
class Run:
    """One pytest run of the gate: its label, the tier expression it selects (None: ARGS as given), its
    pytest-xdist workers (0: no xdist), where it writes its JUnit report, its step (runs of one step start
    together; a step starts when the one before it has ended) and its xdist ``--dist`` mode."""
    label: str
    tiers: str | None
    workers: int
    report: Path
    step: int = 0
    dist: str | None = None   # pytest-xdist --dist (with workers); None: xdist's default


def split_markexpr(args: Sequence[str]) -> tuple[list[str], str | None]:
    """ARGS without their ``-m`` options, and the expression pytest would use (the last ``-m``)."""
    rest: list[str] = []
    expr = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m" and i + 1 < len(args):
            expr, i = args[i + 1], i + 2
            continue
        if a.startswith("-m") and len(a) > 2 and not a.startswith("--"):
            expr, i = a[2:], i + 1
            continue
        rest.append(a)
        i += 1
    return rest, expr


def plan_runs(junit: Path, *, fast: bool, workers: int, overlap: bool = False,
              oracle_with_tiers: bool = False) -> list[Run]:
    """One run (workers 0) or the unit run on ``workers`` xdist workers and, unless ``fast``, the serial run of
    the prepared tiers; with two or more runs each report is a part beside ``junit``, merged into it afterwards.
    ``overlap``: the unit run and the serial run of the prepared tiers other than the engine tiers start together
    (step 0), then the engine-oracle tier on ``workers`` xdist workers (step 1), then the engine tier serially
    (step 2); ``oracle_with_tiers``: the engine-oracle run in step 0 beside the other two, the engine tier step 1."""
    if workers <= 0:
        return [Run("suite", UNIT_ONLY if fast else None, 0, junit)]
    runs = [Run("unit", UNIT_ONLY, workers, junit.with_name(f"{junit.stem}.unit.xml"))]
    if fast:
        return runs
    if not overlap:
        return [*runs, Run("tiers", PREPARED_ONLY, 0, junit.with_name(f"{junit.stem}.tiers.xml"), step=1)]
    oracle_step = 0 if oracle_with_tiers else 1
    return [*runs, Run("tiers", OTHER_PREPARED_ONLY, 0, junit.with_name(f"{junit.stem}.tiers.xml")),
            Run("oracle", ORACLE_ONLY, workers, junit.with_name(f"{junit.stem}.oracle.xml"), step=oracle_step,
                dist=ORACLE_DIST),
            Run("engines", ENGINE_ONLY, 0, junit.with_name(f"{junit.stem}.engines.xml"), step=oracle_step + 1)]


def pytest_argv(junit: Path, args: Sequence[str], *, tiers: str | None = None, workers: int = 0,
                pytest_exe: str | None = None, dist: str | None = None) -> list[str]:
    """The pytest command of one run: ``tiers`` is and-ed with a ``-m`` of ARGS, ``workers`` adds ``-n`` (and
    ``--dist`` when ``dist`` is given)."""
    base = [pytest_exe] if pytest_exe else [sys.executable, "-m", "pytest"]
    argv = [*base, "-q", "-p", "no:cacheprovider", "-p", "tests.support.tier_report", f"--junitxml={junit}"]
    if workers > 0:
        argv += ["-n", str(workers)]
        if dist:
            argv += ["--dist", dist]
    if tiers is None:
        return argv + list(args)
    rest, expr = split_markexpr(args)
    return argv + ["-m", markexpr(tiers, expr)] + rest


def markexpr(tiers: str, expr: str | None) -> str:
    """A run's ``-m``: its tier expression, narrowed by the user's."""
    return tiers if expr is None else f"({tiers}) and ({expr})"


def merge_reports(parts: Sequence[tuple[str, Path]], out: Path) -> list[str]:
    """Write the test suites of the runs' reports into one report at ``out`` (each suite named after its run);
    returns what is wrong (a run without a readable report). Writes nothing when no part is readable."""
    root = ET.Element("testsuites", {"name": "pytest tests"})
    problems, read = [], 0
    for label, path in parts:
        try:
            part = ET.parse(path).getroot()
        except FileNotFoundError:
            problems.append(f"the {label} run wrote no JUnit report at {path}")
            continue
        except ET.ParseError as exc:
            problems.append(f"the {label} run's JUnit report {path} is not XML: {exc}")
            continue
        read += 1
        for suite in ([part] if part.tag == "testsuite" else list(part.iter("testsuite"))):
            suite.set("name", label)
            root.append(suite)
    if read:
        ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return problems


def combine(codes: Sequence[tuple[str, int]], *, narrowed: bool) -> tuple[int, list[str]]:
    """pytest's code for the whole gate from each run's code, and the failing lines of runs that collected
    nothing: the first code other than 0 and 5 wins; all runs empty is pytest's 5 (no tests at all); one empty
    run fails a run of the whole suite (``narrowed`` False: no ARGS), where every run has tests to collect."""
    for _label, rc in codes:
        if rc not in (0, NO_TESTS):
            return rc, []
    if all(rc == NO_TESTS for _label, rc in codes):
        return NO_TESTS, []
    empty = [label for label, rc in codes if rc == NO_TESTS]
    if empty and not narrowed:
        return 0, [f"the {label} run collected no tests" for label in empty]
    return 0, []


def judge(rc: int, junit: Path, before: dict[str, str] | None, after: dict[str, str] | None,
          problems: Sequence[str] = (), leftovers: Sequence[Proc] | None = ()) -> tuple[int, list[str]]:
    """The gate's exit code and its summary lines, from pytest's exit code, its report, the tree snapshots, the
    processes the run left alive (None: not checked) and what else already fails the run (``problems``: a run
    without a report, a run that collected nothing)."""
    lines: list[str] = [f"{p}: failing" for p in problems]
    failed = bool(problems)
    if rc == NO_TESTS:
        lines.append("pytest collected no tests: failing")
        failed = True
    try:
        total, skips = read_skips(junit)
    except GateError as exc:
        lines.append(f"{exc}: failing")
        total, skips, failed = 0, [], True
    allowed = [s for s in skips if s.allowed]
    refused = [s for s in skips if not s.allowed]
    lines.append(f"JUnit report {junit}: {total} test(s), {len(skips)} skipped")
    if allowed:
        lines.append(f"{len(allowed)} skipped in the tiers that may skip ({', '.join(sorted(MAY_SKIP))}):")
        lines += [f"  {s.test} [{','.join(sorted(s.markers & MAY_SKIP))}]: {s.message}" for s in allowed]
    if refused:
        lines.append(f"{len(refused)} skipped in prepared tiers (only {' and '.join(sorted(MAY_SKIP))} may skip): failing")
        lines += [f"  {s.test}: {s.message}" for s in refused]
        failed = True
    if before is None or after is None:
        lines.append("not a git checkout: the check that tests leave the tree clean is skipped")
    else:
        changed = tree_changes(before, after)
        if changed:
            lines.append(f"the run changed the working tree ({len(changed)} path(s)): failing")
            lines += [f"  {p}: {before.get(p, 'clean')} -> {after.get(p, 'clean')}" for p in changed]
            failed = True
        else:
            lines.append("working tree as before the run")
    if leftovers is None:
        lines.append("no /proc here: the check that the run stops every process it starts is skipped")
    elif leftovers:
        lines.append(f"the run left {len(leftovers)} process(es) alive (now stopped): failing")
        lines += [f"  {p}" for p in leftovers]
        failed = True
    else:
        lines.append("no process of the run left alive")
    if rc not in (0, NO_TESTS):
        return rc, lines
    return (1 if failed else 0), lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/testgate.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--junit", type=Path, required=True, help="where pytest writes its JUnit report")
    ap.add_argument("--fast", action="store_true", help=f"unit tiers only (-m {UNIT_ONLY!r})")
    ap.add_argument("--workers", type=int, default=0, metavar="N",
                    help="run the unit tiers on N pytest-xdist workers, then the other tiers serially (default 0: "
                         "one serial run)")
    ap.add_argument("--overlap", action="store_true",
                    help="with --workers: run the unit tiers at the same time as the prepared tiers other than the "
                         "engine tiers, at lower CPU priority (--unit-nice); then the engine_oracle tier on the N "
                         "xdist workers; then the engine tier serially")
    ap.add_argument("--oracle-with-tiers", action="store_true",
                    help="with --overlap: the engine_oracle run in the first step, beside the unit and tiers runs at "
                         "the unit run's niceness, instead of a step of its own before the engine tier")
    ap.add_argument("--unit-nice", type=int, default=UNIT_NICE, metavar="N",
                    help=f"with --overlap: the unit run's niceness, 0-19 (default {UNIT_NICE})")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to run in and to keep clean")
    ap.add_argument("--pytest", dest="pytest_exe", default=None, help="run this instead of python3 -m pytest")
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = ap.parse_args(argv)
    if args.workers < 0:
        ap.error(f"--workers: {args.workers} is negative; give 0 (one serial run) or the number of xdist workers")
    if args.overlap and args.workers <= 0:
        ap.error("--overlap: needs --workers N (N >= 1): there is one run to overlap with only then")
    if args.oracle_with_tiers and not args.overlap:
        ap.error("--oracle-with-tiers: needs --overlap (and --workers N): it places a run of the overlapped plan")
    if not 0 <= args.unit_nice <= 19:
        ap.error(f"--unit-nice: {args.unit_nice} is out of range; give 0-19 (19: the lowest priority)")
    args.junit.parent.mkdir(parents=True, exist_ok=True)
    runs = plan_runs(args.junit, fast=args.fast, workers=args.workers, overlap=args.overlap,
                     oracle_with_tiers=args.oracle_with_tiers)
    for path in {args.junit, *(r.report for r in runs)}:
        path.unlink(missing_ok=True)     # a report of an earlier run must not be judged
    before = tree_state(args.repo)
    if args.fast:
        print(f"[testgate] unit tiers only: -m {UNIT_ONLY!r}", flush=True)
    exit_first = any(a in ("-x", "--exitfirst") for a in args.pytest_args)
    codes: list[tuple[str, int]] = []
    notes: list[str] = []
    marker, sessions = uuid.uuid4().hex, []
    started: list[subprocess.Popen] = []
    tmpdir = Path(tempfile.mkdtemp(prefix="k3t-"))
    try:
        for step in sorted({r.step for r in runs}):
            together = [r for r in runs if r.step == step]
            beside = len(together) > 1
            going: list[tuple[Run, float, subprocess.Popen, Path | None]] = []
            for run in together:
                cmd = pytest_argv(run.report, args.pytest_args, tiers=run.tiers, workers=run.workers,
                                  pytest_exe=args.pytest_exe, dist=run.dist)
                nice, log = 0, None
                if beside and run.workers:   # the xdist run yields the cores, and its lines wait for its end
                    nice, log = args.unit_nice, run.report.with_suffix(".log")
                if args.workers > 0:
                    how = f"{run.workers} xdist workers" if run.workers else "serial"
                    how += f" (--dist {run.dist})" if run.workers and run.dist else ""
                    if beside:
                        how += (f", beside the {' and '.join(r.label for r in together if r is not run)} run at "
                                f"niceness {nice}, its output in {log} until it ends" if log else
                                f", beside the {' and '.join(r.label for r in together if r is not run)} run")
                    expr = markexpr(run.tiers, split_markexpr(args.pytest_args)[1]) if run.tiers else None
                    print(f"[testgate] {run.label} run ({how}): -m {expr!r}", flush=True)
                proc = _start_pytest(cmd, args.repo, marker, sessions, nice=nice, log=log, tmpdir=tmpdir)
                started.append(proc)
                going.append((run, time.monotonic(), proc, log))
            failed = False
            for run, t0, proc, log in going:
                rc = _wait(proc, started)
                if log is not None:
                    print(f"[testgate] --- the {run.label} run's output ({log}) ---", flush=True)
                    sys.stdout.write(log.read_text(errors="replace"))
                    sys.stdout.flush()
                codes.append((run.label, rc))
                notes.append(f"{run.label} run: pytest exited {rc} after {time.monotonic() - t0:.0f} s")
                failed = failed or rc not in (0, NO_TESTS)
            if exit_first and failed and step != runs[-1].step:
                notes.append(f"-x: the {' and '.join(r.label for r in together)} run{'s' if beside else ''} "
                             "failed, the later run(s) did not run")
                break
    finally:
        for proc in started:   # an error in the gate itself must not leave a run going
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait()
    leftovers = leftover_processes(sessions, marker)
    tmp_note = remove_tmpdir(tmpdir)
    after = tree_state(args.repo) if before is not None else None
    problems: list[str] = []
    if args.workers > 0:     # each run wrote a part beside --junit
        reports = {r.label: r.report for r in runs}
        problems += merge_reports([(label, reports[label]) for label, _rc in codes], args.junit)
    rc, empty = combine(codes, narrowed=bool(args.pytest_args))
    code, lines = judge(rc, args.junit, before, after, [*problems, *empty], leftovers)
    for line in [*notes, tmp_note, *lines] if args.workers > 0 else [tmp_note, *lines]:
        print(f"[testgate] {line}", flush=True)
    print(f"[testgate] exit {code}" + (f" (pytest exited {rc})" if rc != code else ""), flush=True)
    return code


def remove_tmpdir(tmpdir: Path) -> str:
    """Remove the runs' TMPDIR (after every process of the runs has ended); the summary line saying what went."""
    left = sum(1 for _ in tmpdir.iterdir()) if tmpdir.is_dir() else 0
    shutil.rmtree(tmpdir, ignore_errors=True)
    gone = "removed" if not tmpdir.exists() else "could not be removed whole"
    return f"the runs' TMPDIR {tmpdir} ({left} top-level entr{'y' if left == 1 else 'ies'} left by the runs) {gone}"


def _start_pytest(cmd: list[str], repo: Path, marker: str, sessions: list[int], *, nice: int = 0,
                  log: Path | None = None, tmpdir: Path | None = None) -> subprocess.Popen:
    """One pytest run in a session of its own (its processes are found by session id), the run's marker in its
    environment; ``nice`` > 0 runs it (and what it starts) at that niceness, ``log`` takes its output, ``tmpdir``
    is its TMPDIR."""
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]   # nice execs pytest: the same pid, the session stays the run's
    out = open(log, "wb") if log is not None else None   # noqa: SIM115 - the child holds it; closed below
    try:
        env = {**os.environ, RUN_MARKER: marker, **({"TMPDIR": str(tmpdir)} if tmpdir is not None else {})}
        proc = subprocess.Popen(cmd, cwd=repo, env=env, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT if out else None)
    finally:
        if out is not None:
            out.close()
    sessions.append(proc.pid)
    return proc


def _wait(proc: subprocess.Popen, running: Sequence[subprocess.Popen]) -> int:
    """The run's exit code; Ctrl-C is passed on to every run still going."""
    try:
        return proc.wait()
    except KeyboardInterrupt:
        for p in running:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        return proc.wait()


if __name__ == "__main__":
    raise SystemExit(main())
