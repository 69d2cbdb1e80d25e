"""Instructions a cold CLI process executes, this checkout against a git revision (valgrind's callgrind).

    python3 bench/cli_instructions.py [--base REV] [--runs 1]

Wall-clock time on a shared 2-core VM moves by 10-30 % with the neighbours' load, more than most start-up
changes; the number of instructions a process executes (callgrind's ``Ir``) does not (run to run it varies by
about 1 %). So a start-up change is compared here by instructions: the same cases as bench/cli_latency.py, plus
the floor (python + ``import click`` + pydantic's ``BaseModel``/``Field``), each in a fresh process under
``PYTHONHASHSEED=0`` with its own warm start-up cache directory. ``--base REV``: the same cases from a temporary
git worktree of REV (byte-compiled, caches warmed the same way), and the difference. Instructions are not time:
cache misses and system calls are not in them; bench/cli_latency.py measures the time.

Needs valgrind. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from cli_latency import BASELINES, CASES   # the same cases as the time benchmark (a script's directory is sys.path[0])

ROOT = pathlib.Path(__file__).resolve().parent.parent

RUN = {**{"floor_click_pydantic": BASELINES["floor_click_pydantic"]}, **CASES}


def _python() -> str:
    """The interpreter binary itself (a launcher script would be what valgrind measures)."""
    return os.path.realpath(sys.executable)


def instructions(cmd: list[str], tree: pathlib.Path, cache: pathlib.Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", "GPUSTACK_K3_CATALOG_CACHE": str(cache)}
    argv = [_python(), *cmd[1:]]
    subprocess.run(argv, env=env, cwd=cache, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                       cwd=cache, capture_output=True, text=True, check=False)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if not m:
        raise SystemExit(f"callgrind gave no count for {' '.join(cmd)}: {p.stderr[-400:]}")
    return int(m.group(1))


def measure(tree: pathlib.Path, runs: int, work: pathlib.Path, cases: list[str] | None = None) -> dict[str, int]:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "gpustack_k3")], check=True)
    cache = work / f"cache-{tree.name}"
    cache.mkdir(mode=0o700)
    return {name: int(statistics.median(instructions(cmd, tree, cache) for _ in range(runs)))
            for name, cmd in RUN.items() if not cases or name in cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="a git revision to compare with (a temporary worktree of it)")
    ap.add_argument("--runs", type=int, default=1, help="runs per case (median); callgrind is ~40x slower")
    ap.add_argument("--case", action="append", choices=sorted(RUN), dest="cases",
                    help="measure only this case (repeatable; default: all, ~35 s each under callgrind)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        here = measure(ROOT, a.runs, work, a.cases)
        out: dict = {"runs": a.runs, "unit": "instructions (callgrind Ir)", "this_checkout": here}
        if a.base:
            base_tree = work / "base"
            rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", a.base + "^{commit}"],
                                 capture_output=True, text=True, check=False)
            if rev.returncode != 0:
                raise SystemExit(f"--base {a.base}: not a revision of this repository")
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree),
                            rev.stdout.strip()], check=True)
            try:
                base = measure(base_tree, a.runs, work, a.cases)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                               check=False)
            out["base"] = {"revision": rev.stdout.strip(), **base}
            out["difference"] = {k: {"instructions": here[k] - base[k],
                                     "percent": round(100 * (here[k] - base[k]) / base[k], 2),
                                     # of what this project adds above the floor (help imports no pydantic)
                                     "own_share_percent": round(100 * (here[k] - base[k]) / own, 1) if own > 0
                                     else None}
                                 for k in CASES if k in here and k in base
                                 for own in [base[k] - base["floor_click_pydantic"] if "floor_click_pydantic" in base
                                             else 0]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
