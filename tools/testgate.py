"""Run the test suite and judge the run, as ``scripts/test.sh`` does after preparing the tiers.

    python3 tools/testgate.py --junit PATH [--fast] [--repo DIR] [--pytest EXE] [-- PYTEST_ARGS...]

Runs ``python3 -m pytest -q -p no:cacheprovider -p tests.support.tier_report --junitxml PATH [ARGS]`` in the
repository (``--fast``: the unit tiers only, every marker of a tier that needs a tool or service deselected),
then fails (exit 1) when

* pytest collected no tests (its exit 5),
* a test was skipped that is not marked ``kind``, ``image_build`` or ``upstream_crds`` (the only tiers that may
  skip: no kind cluster, no 4 GB engine image build, and no LWS CRD files, which no registry CI reaches ships,
  on the CI machines); every other tier was prepared, so a skip there means a check did not run,
* the working tree has changes after the run that it did not have before (``git status --porcelain``, with a
  digest of each listed file, so a further edit of an already modified file counts too). Outside a git
  checkout this check is skipped, and the summary says so.

Otherwise it exits with pytest's own code. ``--pytest EXE`` runs EXE instead of ``python3 -m pytest`` (the
gate's own tests use a fake pytest that writes a given JUnit report).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAY_SKIP = frozenset({"kind", "image_build", "upstream_crds"})
# Markers of the tiers that need a tool or a service (pyproject.toml lists them); --fast deselects them all.
PREPARED_TIERS = ("docker", "engine", "engine_wheels", "gpustack", "helm", "tools", "wheel", "kind", "image_build",
                  "upstream_crds")
UNIT_ONLY = " and ".join(f"not {m}" for m in PREPARED_TIERS)
NO_TESTS = 5   # pytest's exit code when it collected nothing


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


def pytest_argv(junit: Path, args: Sequence[str], *, fast: bool, pytest_exe: str | None) -> list[str]:
    base = [pytest_exe] if pytest_exe else [sys.executable, "-m", "pytest"]
    argv = [*base, "-q", "-p", "no:cacheprovider", "-p", "tests.support.tier_report", f"--junitxml={junit}"]
    if fast:
        argv += ["-m", UNIT_ONLY]
    return argv + list(args)


def judge(rc: int, junit: Path, before: dict[str, str] | None, after: dict[str, str] | None) -> tuple[int, list[str]]:
    """The gate's exit code and its summary lines, from pytest's exit code, its report and the tree snapshots."""
    lines: list[str] = []
    failed = False
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
    if rc not in (0, NO_TESTS):
        return rc, lines
    return (1 if failed else 0), lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/testgate.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--junit", type=Path, required=True, help="where pytest writes its JUnit report")
    ap.add_argument("--fast", action="store_true", help=f"unit tiers only (-m {UNIT_ONLY!r})")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to run in and to keep clean")
    ap.add_argument("--pytest", dest="pytest_exe", default=None, help="run this instead of python3 -m pytest")
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = ap.parse_args(argv)
    args.junit.parent.mkdir(parents=True, exist_ok=True)
    args.junit.unlink(missing_ok=True)     # a report of an earlier run must not be judged
    before = tree_state(args.repo)
    cmd = pytest_argv(args.junit, args.pytest_args, fast=args.fast, pytest_exe=args.pytest_exe)
    if args.fast:
        print(f"[testgate] unit tiers only: -m {UNIT_ONLY!r}", flush=True)
    rc = subprocess.run(cmd, cwd=args.repo, check=False).returncode
    after = tree_state(args.repo) if before is not None else None
    code, lines = judge(rc, args.junit, before, after)
    for line in lines:
        print(f"[testgate] {line}", flush=True)
    print(f"[testgate] exit {code}" + (f" (pytest exited {rc})" if rc != code else ""), flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
