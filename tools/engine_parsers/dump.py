"""Dump the real argument parser of each released engine version the catalog pins, from its wheel.

  python3 tools/engine_parsers/dump.py            # every catalog version with a `parser.wheel`: write the dumps
  python3 tools/engine_parsers/dump.py --check    # compare with the committed dumps (exit 1 on a difference)
  python3 tools/engine_parsers/dump.py vllm==0.28.0 --out /tmp/x.json   # any other release

The wheels come from ${GPUSTACK_K3_CACHE:-~/.cache/gpustack-k3}/wheels (`bash .ci/setup_engine_wheels.sh`
downloads them). Nothing is installed: the wheel is unpacked (without its compiled extensions) into the cache,
and the parser is built in a small venv (requirements.txt) where torch, CUDA kernels, tokenizers and the HTTP
server are stubs (gpustack_k3/oracle/engine_side/stubs.py lists each with the reason). See README.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ENGINES = REPO / "gpustack_k3" / "catalog" / "data" / "engines"
if str(REPO) not in sys.path:   # run as a script: the package's wheel helpers
    sys.path.insert(0, str(REPO))
from gpustack_k3.oracle.cache import cache_dir, wheels_dir  # noqa: E402,F401
from gpustack_k3.oracle.wheels import DIST, find_wheel, required_versions, unpack  # noqa: E402,F401
from gpustack_k3.oracle.wheels import WheelError as DumpError  # noqa: E402


def tools_python() -> Path:
    """The venv the parser is built in (created once per requirements.txt content)."""
    req = (HERE / "requirements.txt").read_bytes()
    tag = hashlib.sha256(req + platform.python_version().encode()).hexdigest()[:12]
    venv = cache_dir() / "engine-parsers" / f"venv-{tag}"
    python = venv / "bin" / "python"
    if not (venv / "stamp").is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(HERE / "requirements.txt")], check=True)
        (venv / "stamp").write_text("ok\n")
    return python


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _run_build(mode: str, engine: str, version: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    wheel = find_wheel(engine, version)
    python = tools_python()
    unpacked, extensions = unpack(wheel)
    proc = subprocess.run([str(python), "-I", str(HERE / "_build.py"), mode, engine, str(unpacked),
                           json.dumps(extensions), json.dumps(required_versions(wheel))],
                          input=stdin, capture_output=True, text=True, cwd=str(HERE), timeout=900, check=False,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    if proc.returncode != 0:
        raise DumpError(f"building the {engine} {version} parser failed:\n{proc.stderr[-4000:]}")
    return proc


def parse_with_wheel(engine: str, version: str, argvs: list[list[str]]) -> list[dict]:
    """Ask the release's own parsing code (built from its wheel, as for a dump) about many command lines in one
    interpreter start: one {"ok", "error", "unrecognized", "parsed"?} per argv (see _build.py)."""
    answers = json.loads(_run_build("parse", engine, version, json.dumps(argvs)).stdout)
    if len(answers) != len(argvs):
        raise DumpError(f"{engine} {version}: {len(answers)} answers for {len(argvs)} command lines")
    return answers


def dump(engine: str, version: str) -> dict:
    wheel = find_wheel(engine, version)
    proc = _run_build("describe", engine, version)
    python = tools_python()
    for line in proc.stderr.splitlines():
        if line.startswith("missing modules"):
            print(f"{engine} {version}: {line}", file=sys.stderr)
    built = json.loads(proc.stdout)
    py = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                        capture_output=True, text=True, check=True).stdout.strip()
    return {
        "format": 1,
        "engine": engine,
        "version": version,
        "source": {"wheel": wheel.name, "sha256": sha256(wheel), "python": py,
                   "made_by": "tools/engine_parsers/dump.py", "stubbed": built.pop("stubbed"),
                   "absent": built.pop("absent")},
        "parser": built,
    }


def write(doc: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(doc))
    tmp.replace(path)


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def catalog_targets() -> list[tuple[str, str, Path]]:
    """(engine, release, dump path) for every catalog version whose parser comes from a released wheel."""
    import yaml

    out = []
    for p in sorted(ENGINES.glob("*.yaml")):
        data = yaml.safe_load(p.read_text())
        seen = set()
        for v in data["versions"].values():
            parser = v.get("parser") or {}
            if parser.get("wheel") and parser["wheel"] not in seen:
                seen.add(parser["wheel"])
                out.append((data["engine"], parser["wheel"], ENGINES.parent / parser["dump"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("targets", nargs="*", metavar="ENGINE==VERSION", help="default: every catalog version with a wheel")
    ap.add_argument("--out", type=Path, help="output file (one target only)")
    ap.add_argument("--check", action="store_true", help="compare with the committed dumps instead of writing")
    ap.add_argument("--wheels", action="store_true",
                    help="print the wheels the catalog needs (ENGINE==VERSION, one a line) and exit")
    ap.add_argument("--prepare", action="store_true", help="create the tools venv and exit (prints its python)")
    args = ap.parse_args(argv)
    if args.wheels:
        for engine, version, _ in catalog_targets():
            print(f"{DIST[engine]}=={version}")
        return 0
    if args.prepare:
        print(tools_python())
        return 0
    if args.targets:
        targets = []
        for t in args.targets:
            engine, sep, version = t.partition("==")
            if not sep or engine not in DIST:
                ap.error(f"{t!r}: write ENGINE==VERSION with ENGINE one of {', '.join(DIST)}")
            targets.append((engine, version, args.out or ENGINES / f"{engine}-{version}-options.json"))
    else:
        targets = catalog_targets()
    if args.out and len(targets) != 1:
        ap.error("--out takes one target")
    status = 0
    for engine, version, path in targets:
        try:
            doc = dump(engine, version)
        except DumpError as exc:
            print(f"{engine} {version}: {exc}", file=sys.stderr)
            return 2
        if args.check:
            same = path.is_file() and path.read_text() == render(doc)
            print(f"{engine} {version}: {'matches' if same else 'DIFFERS from'} {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
            status |= 0 if same else 1
        else:
            write(doc, path)
            print(f"{engine} {version}: {len(doc['parser']['options'])} options -> {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
